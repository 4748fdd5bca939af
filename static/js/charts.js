/* Draws every [data-plotly] figure: on load and after htmx swaps.
   Figures are built in Python (apps/investigation/charts.py) and embedded with json_script. */
(function () {
  "use strict";
  function draw(root) {
    if (typeof window.Plotly === "undefined") return;
    (root || document).querySelectorAll("[data-plotly]").forEach(function (el) {
      if (el.dataset.drawn) return;
      var src = document.getElementById(el.dataset.plotly);
      if (!src) return;
      var fig;
      try { fig = JSON.parse(src.textContent); } catch (e) { el.textContent = "This chart could not be read."; return; }
      el.dataset.drawn = "1";
      window.Plotly.newPlot(el, fig.data, fig.layout, {responsive: true, displaylogo: false});
    });
  }
  document.addEventListener("DOMContentLoaded", function () { draw(document); });
  document.addEventListener("htmx:afterSettle", function (evt) { draw(evt.target); });
  window.addEventListener("load", function () { draw(document); });
})();
