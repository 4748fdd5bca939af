// Upload panel: many files (multi-select or drag and drop), one XHR per file with its own
// progress bar. Without JavaScript the form posts all files as a plain multipart form.
(function () {
  "use strict";
  var PARALLEL = 3;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text; // log names are untrusted: text only
    return e;
  }

  function human(n) {
    var units = ["bytes", "KiB", "MiB", "GiB", "TiB"], i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : n) + " " + units[i];
  }

  function setup(form) {
    if (form.dataset.uploadReady) return;
    form.dataset.uploadReady = "1";
    var input = form.querySelector('input[type="file"]');
    var list = form.querySelector("[data-upload-list]");
    var zone = form.querySelector("[data-dropzone]");
    var submit = form.querySelector("[data-upload-submit]");
    var maxBytes = parseInt(form.dataset.maxBytes || "0", 10);
    var token = form.querySelector('input[name="csrfmiddlewaretoken"]').value;
    var queue = [], running = 0;

    function finishedOne() {
      running--;
      pump();
      if (!running && !queue.length) {
        // The file table listens to the first, the analysis panel to the second.
        document.body.dispatchEvent(new Event("artifacts-changed"));
        document.body.dispatchEvent(new Event("rankscope:uploaded"));
      }
    }

    function outcomeText(o) {
      // "stored (387 bytes, rank log)", not "stored — stored (…)"
      var msg = (o.message || "").replace(new RegExp("^" + o.status + "\\b\\s*"), "");
      return o.status + (msg ? " " + msg : "");
    }

    function showOutcomes(row, outcomes) {
      var ul = el("ul", "outcomes");
      outcomes.forEach(function (o) {
        var li = el("li", o.status, o.name + ": " + outcomeText(o));
        ul.appendChild(li);
      });
      row.appendChild(ul);
    }

    function send(item) {
      var xhr = new XMLHttpRequest();
      var data = new FormData();
      data.append("files", item.file, item.file.name);
      xhr.open("POST", form.action);
      xhr.setRequestHeader("Accept", "application/json");
      xhr.setRequestHeader("X-CSRFToken", token);
      xhr.setRequestHeader("X-Rankscope-Single-File", "1");
      xhr.setRequestHeader("X-Rankscope-File-Name", encodeURIComponent(item.file.name).slice(0, 500));
      xhr.upload.addEventListener("progress", function (e) {
        if (e.lengthComputable) item.bar.value = Math.round((100 * e.loaded) / e.total);
      });
      xhr.addEventListener("load", function () {
        item.bar.value = 100;
        var body = null;
        try { body = JSON.parse(xhr.responseText); } catch (err) { body = null; }
        if (xhr.status === 413) {
          item.status.textContent = "Refused: over the per-file size limit (" + human(maxBytes) + ").";
          item.row.classList.add("rejected");
        } else if (xhr.status >= 400 || !body) {
          // Say what the server said; only a reply without a reason gets the generic advice.
          var said = body && (body.error || (body.outcomes && body.outcomes.length && body.outcomes[0].message));
          item.status.textContent = said
            ? "Not stored: " + said
            : "Upload failed (HTTP " + xhr.status + "). Try again, or use the form without JavaScript.";
          item.row.classList.add(said ? "rejected" : "failed");
        } else {
          var outs = body.outcomes || [];
          var bad = outs.filter(function (o) { return o.status === "rejected"; }).length;
          item.status.textContent = outs.length === 1 ? outcomeText(outs[0])
            : outs.length + " files (" + (outs.length - bad) + " accepted, " + bad + " rejected)";
          if (outs.length > 1) showOutcomes(item.row, outs);
          if (bad) item.row.classList.add("rejected");
        }
        finishedOne();
      });
      xhr.addEventListener("error", function () {
        item.status.textContent = "Network error: the file did not arrive. Try again.";
        item.row.classList.add("failed");
        finishedOne();
      });
      xhr.send(data);
    }

    function pump() {
      while (running < PARALLEL && queue.length) {
        running++;
        send(queue.shift());
      }
    }

    function add(files) {
      Array.prototype.forEach.call(files, function (file) {
        var row = el("li");
        var label = el("span", "name", file.name + " (" + human(file.size) + ")");
        var bar = el("progress");
        bar.max = 100; bar.value = 0;
        bar.setAttribute("aria-label", "Upload progress of " + file.name);
        var status = el("div", "meta", "Waiting…");
        row.appendChild(label); row.appendChild(bar); row.appendChild(status);
        list.appendChild(row);
        if (maxBytes && file.size > maxBytes) {
          bar.value = 0;
          status.textContent = "Refused: " + human(file.size) + " is over the " + human(maxBytes) + " per-file limit.";
          row.classList.add("rejected");
          return;
        }
        queue.push({ file: file, row: row, bar: bar, status: status });
      });
      pump();
    }

    // Files upload as soon as they are chosen (below), which empties the input: the button
    // is then pressed with nothing selected. The browser's own `required` check (kept for
    // the form without JavaScript) would pop "Please select…" over the running uploads.
    form.noValidate = true;
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      if (!input.files.length) {
        input.focus();
        if (!list.querySelector("progress")) {  // nothing on its way: say what to do
          list.appendChild(el("li", "rejected", "Choose at least one file to upload."));
        }
        return;
      }
      add(input.files);
      input.value = "";
    });
    input.addEventListener("change", function () {
      if (input.files.length) { add(input.files); input.value = ""; }
    });
    if (submit) submit.textContent = "Upload selected files";
    if (zone) {
      ["dragenter", "dragover"].forEach(function (t) {
        zone.addEventListener(t, function (e) { e.preventDefault(); zone.classList.add("dragover"); });
      });
      ["dragleave", "drop"].forEach(function (t) {
        zone.addEventListener(t, function (e) { e.preventDefault(); zone.classList.remove("dragover"); });
      });
      zone.addEventListener("drop", function (e) {
        if (e.dataTransfer && e.dataTransfer.files.length) add(e.dataTransfer.files);
      });
    }
  }

  function init() {
    document.querySelectorAll("form[data-upload]").forEach(setup);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
