"""Numbers the post-mortem's cost model reads from the triage document (docs/postmortems.md).

Added only when known (never renames existing keys):
- ``job.last_step``: the highest step any rank logged (log head/tail facts, metrics rows);
- ``job.last_checkpoint_step``: the last checkpoint saved at or before it (checkpoint events
  with a step);
- ``metrics.step_time`` (median seconds per step over the run), ``metrics.baseline_step_time``
  (median over the run's 10-30 % after warm-up), ``metrics.baseline_throughput`` and
  ``metrics.degraded_throughput`` (same window vs the last 20 % of steps; throughput as the
  files give it, per step the median across ranks).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import Context, register_analyzer
from ._rc import metrics_files

SAVED = ("checkpoint_saved", "checkpoint_save")


def _per_step(steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Median of ``values`` per step, steps sorted."""
    ok = ~(np.isnan(steps) | np.isnan(values))
    steps, values = steps[ok], values[ok]
    if steps.size == 0:
        return steps, values
    order = np.argsort(steps, kind="stable")
    steps, values = steps[order], values[order]
    bounds = np.flatnonzero(np.diff(steps)) + 1
    us = np.array([g[0] for g in np.split(steps, bounds)])
    med = np.array([float(np.median(g)) for g in np.split(values, bounds)])
    return us, med


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

    def run(self, ctx: Context) -> None:
        job = ctx.doc["job"]
        metrics: dict[str, Any] = {}
        last = ctx.facts.last_step
        for _, m in metrics_files(ctx):
            if not m.has("step"):
                continue
            steps = m.numpy("step").astype(float)
            if steps.size and not np.all(np.isnan(steps)):
                top = int(np.nanmax(steps))
                last = top if last is None else max(last, top)
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
        if last is not None:
            job["last_step"] = int(last)
        ckpts = [
            e.fields["step"]
            for e in ctx.kinds(*SAVED)
            if isinstance(e.fields.get("step"), int) and (last is None or e.fields["step"] <= last)
        ]
        if ckpts:
            job["last_checkpoint_step"] = max(ckpts)
        if metrics:
            ctx.doc.setdefault("metrics", {}).update(metrics)


register_analyzer(PostmortemInputsAnalyzer())
