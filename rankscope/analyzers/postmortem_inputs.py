"""Numbers the post-mortem's cost model reads from the triage document (docs/postmortems.md).

Writes the ``metrics`` section: ``files`` (what fed each measure, from the slowdown
analyzer's ``ctx.facts.metric_sources``) and, only when known,
``metrics.step_time`` (median seconds per step over the run), ``metrics.baseline_step_time``
  (median over the run's 10-30 % after warm-up), ``metrics.baseline_throughput`` and
  ``metrics.degraded_throughput`` (same window vs the last 20 % of steps; throughput as the
  files give it, per step the median across ranks).
"""

from __future__ import annotations

from typing import Any

from .._lazy import lazy_module
from . import Context, register_analyzer
from ._rc import metrics_files

np = lazy_module("numpy")


def _per_step(steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Median of ``values`` per step, steps sorted."""
    ok = ~(np.isnan(steps) | np.isnan(values))
    steps, values = steps[ok], values[ok]
    if steps.size == 0:
        return steps, values
    # by step, and within a step by value: every step's median is then read at its middle,
    # for all steps at once instead of one np.median call per step
    order = np.lexsort((values, steps))
    steps, values = steps[order], values[order]
    first = np.flatnonzero(np.r_[True, np.diff(steps) != 0])
    size = np.diff(first, append=steps.size)
    mid = first + size // 2
    # np.median's arithmetic, bit for bit: the mean of the middle one or two values, whose
    # sum starts from 0.0 (no NaN is left here)
    med = values[mid] + 0.0
    even = np.flatnonzero(size % 2 == 0)
    med[even] = (0.0 + (0.0 + values[mid[even] - 1] + values[mid[even]])) / 2
    return steps[first], med


def _windows(v: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    n = v.size
    if n < 10:
        return None
    base = v[int(n * 0.1) : max(int(n * 0.3), int(n * 0.1) + 1)]
    recent = v[int(n * 0.8) :]
    return base, recent


class PostmortemInputsAnalyzer:
    name = "postmortem_inputs"
    phase = "resolution"
    order = 97
    reads = ("results", "facts.metric_sources")
    writes = ("doc.metrics",)

    def run(self, ctx: Context) -> None:
        metrics: dict[str, Any] = {}
        if ctx.facts.metric_sources:
            metrics["files"] = ctx.facts.metric_sources
        for _, m in metrics_files(ctx):
            if not m.has("step"):
                continue
            steps = m.numpy("step").astype(float)
            for col, key in (("step_time", "step_time"), ("throughput", "throughput")):
                if not m.has(col) or key in metrics:
                    continue
                _, v = _per_step(steps, m.numpy(col).astype(float))
                if v.size == 0:
                    continue
                if key == "step_time":
                    metrics["step_time"] = round(float(np.median(v)), 6)
                    w = _windows(v)
                    if w is not None:
                        metrics["baseline_step_time"] = round(float(np.median(w[0])), 6)
                else:
                    w = _windows(v)
                    if w is not None:
                        metrics["baseline_throughput"] = round(float(np.median(w[0])), 6)
                        metrics["degraded_throughput"] = round(float(np.median(w[1])), 6)
        if metrics:
            ctx.doc["metrics"] = metrics


register_analyzer(PostmortemInputsAnalyzer())
