"""Numerics and training progress from per-step metrics.

- First NaN/Inf step (metrics loss, or ``nan_loss`` log events), the gradient-norm
  spike before it (grad norm > 5 x the median of the steps before, within 200 steps),
  and the last clean checkpoint before it (checkpoint events with a step, when the
  logs have them).
- Loss plateau (< 0.1 % improvement between the last two fifths of the run) or rise
  (> 2 % worse): a stall.
- Step-time regression against a baseline (``Options.baseline_step_time`` or the
  run's own steps between 10 % and 30 % of the run): slower by more than
  ``Options.step_time_regression`` (10 %).
- Pipeline bubble fraction ``(p - 1) / (m + p - 1)`` when ``Options.pipeline_stages``
  (p) and ``Options.micro_batches`` (m) are given.
"""

from __future__ import annotations

from typing import Any

from .._lazy import lazy_module
from ..model import Event
from . import Context, register_analyzer
from ._rc import metrics_files, row_event

np = lazy_module("numpy")

CHECKPOINT_KINDS = ("checkpoint_saved", "checkpoint_save", "checkpoint")


def _series(m: Any, col: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(steps, values, row indices) of ``col`` averaged per step, sorted by step (row = first of that step)."""
    steps = m.numpy("step").astype(float)
    vals = m.numpy(col).astype(float)
    valid = m.valid(col)
    keep = valid & ~np.isnan(steps)
    steps, vals, rows = steps[keep], vals[keep], np.flatnonzero(keep)
    if steps.size == 0:
        return steps, vals, rows
    order = np.argsort(steps, kind="stable")
    steps, vals, rows = steps[order], vals[order], rows[order]
    u, first = np.unique(steps, return_index=True)
    # Most steps have one row: the mean of one value is ``0.0 + value`` (numpy's sum starts
    # from 0.0, which turns -0.0 into 0.0), done for all of them at once. Only the steps
    # with several rows go through np.mean one by one (its pairwise sum is kept as is),
    # and a non-finite single value stays itself.
    sizes = np.diff(first, append=steps.size)
    means = vals[first]
    means = np.where(np.isfinite(means), means + 0.0, means)
    for i in np.flatnonzero(sizes > 1):
        v = vals[first[i] : first[i] + sizes[i]]
        means[i] = np.mean(v) if np.all(np.isfinite(v)) else v[~np.isfinite(v)][0]
    return u, means, rows[first]


def _finite_series(m: Any, col: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``_series`` without the steps whose value is not finite."""
    steps, vals, rows = _series(m, col)
    ok = np.isfinite(vals)
    return steps[ok], vals[ok], rows[ok]


def _with_null_runs(
    m: Any, steps: np.ndarray, loss: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, ...]:
    """CSV readers turn ``nan`` into null: a loss that is null from some step to the end, after
    finite values, on rows that still have a step, is read as NaN from that step."""
    all_steps = m.numpy("step").astype(float)
    valid = m.valid("loss")
    if valid.all() or not valid.any():
        return steps, loss, rows
    last_valid_step = float(np.nanmax(all_steps[valid]))
    null_after = np.flatnonzero(~valid & (all_steps > last_valid_step))
    if null_after.size < 2:
        return steps, loss, rows
    i = int(null_after[np.argmin(all_steps[null_after])])
    return (np.append(steps, all_steps[i]), np.append(loss, np.nan), np.append(rows, i))


def _report_onset(
    ctx: Context,
    iso: dict[str, Any],
    out: dict[str, Any],
    evs: list[Event],
    *,
    clean_before: int,
    title: str,
    detail: str,
    confidence: float,
) -> None:
    """``isolation.numerics`` and the ``nan_onset`` finding, with the last checkpoint saved
    before ``clean_before`` (the spike, else the first non-finite step) to restart from."""
    ckpts = [
        e
        for e in ctx.kinds(*CHECKPOINT_KINDS)
        if isinstance(e.fields.get("step"), int) and e.fields["step"] < clean_before
    ]
    if ckpts:
        last = max(ckpts, key=lambda e: (e.fields["step"], e.kind == "checkpoint_saved"))
        out["last_clean_checkpoint_step"] = last.fields["step"]
        evs.append(last)
    iso["numerics"] = out
    ck = (
        f"; last clean checkpoint: step {out['last_clean_checkpoint_step']}"
        if "last_clean_checkpoint_step" in out
        else f"; restart from a checkpoint before step {clean_before}"
    )
    ctx.add_finding(
        phase="isolation",
        kind="nan_onset",
        title=f"{title}{ck}",
        detail=detail,
        confidence=confidence,
        evidence_events=evs,
        category="NUMERICAL",
        **{k: v for k, v in out.items() if k != "file"},
    )


class NumericsAnalyzer:
    name = "numerics"
    phase = "isolation"
    order = 63
    reads = ("results", "events")
    writes = (
        "doc.isolation.numerics",
        "doc.isolation.loss",
        "doc.isolation.step_time",
        "doc.isolation.pipeline_bubble",
        "findings",
    )

    def run(self, ctx: Context) -> None:
        iso = ctx.doc.setdefault("isolation", {})
        for name, m in metrics_files(ctx):
            if not m.has("step"):
                continue
            if m.has("loss"):
                self._nan(ctx, name, m, iso)
                self._stall(ctx, name, m, iso)
            if m.has("step_time"):
                self._regression(ctx, name, m, iso)
        if "numerics" not in iso:
            self._nan_from_logs(ctx, iso)
        p, mb = ctx.options.pipeline_stages, ctx.options.micro_batches
        if p and mb and p > 0 and mb > 0:
            frac = (p - 1) / (mb + p - 1)
            iso["pipeline_bubble"] = {
                "stages": p,
                "micro_batches": mb,
                "fraction": round(frac, 4),
                "advice": "increase micro-batches (m ≥ 4p keeps the bubble under ~20 %)"
                if frac > 0.2
                else "small",
            }
        if not iso:
            ctx.doc.pop("isolation", None)

    def _nan(self, ctx: Context, name: str, m: Any, iso: dict[str, Any]) -> None:
        steps, loss, rows = _series(m, "loss")
        bad = ~np.isfinite(loss)
        if not bad.any():
            steps, loss, rows = _with_null_runs(m, steps, loss, rows)
            bad = ~np.isfinite(loss)
        if not bad.any():
            return
        i = int(np.argmax(bad))
        nan_step = int(steps[i])
        out: dict[str, Any] = {"first_nonfinite_step": nan_step, "file": name}
        evs = [row_event(name, m, int(rows[i]), "metrics_row", ["loss", "grad_norm"])]
        spike_txt = ""
        if m.has("grad_norm"):
            gs, gv, grows = _series(m, "grad_norm")
            before = (gs < nan_step) & (gs >= nan_step - 200) & np.isfinite(gv)
            prior = gv[(gs < nan_step) & np.isfinite(gv)]
            if before.any() and prior.size >= 5:
                cand = np.flatnonzero(before)
                for j in cand:
                    base = np.median(gv[:j][np.isfinite(gv[:j])]) if j > 3 else None
                    if base and gv[j] > 5 * base:
                        out["grad_norm_spike_step"] = int(gs[j])
                        out["grad_norm_spike"] = float(gv[j])
                        out["grad_norm_median_before"] = float(base)
                        evs.insert(
                            0,
                            row_event(name, m, int(grows[j]), "metrics_row", ["grad_norm", "loss"]),
                        )
                        spike_txt = f"; grad norm spiked to {gv[j]:.3g} (median {base:.3g}) at step {int(gs[j])}"
                        break
        spike = out.get("grad_norm_spike_step")
        _report_onset(
            ctx,
            iso,
            out,
            evs,
            clean_before=spike or nan_step,
            title=f"First non-finite loss at step {nan_step}{spike_txt}",
            detail="Restart from the last checkpoint before the spike with a lower learning rate or tighter gradient "
            "clipping, and inspect the data of the spike step.",
            confidence=0.8,
        )

    def _nan_from_logs(self, ctx: Context, iso: dict[str, Any]) -> None:
        """No metrics file: the first NaN/Inf loss line with a step, and the last checkpoint
        saved before it (checkpoint lines of the same logs)."""
        nans = [e for e in ctx.kinds("nan_loss") if isinstance(e.fields.get("step"), int)]
        if not nans:
            return
        first = min(nans, key=lambda e: (e.fields["step"], e.file, e.line))
        nan_step = first.fields["step"]
        out: dict[str, Any] = {"first_nonfinite_step": nan_step, "file": first.file}
        _report_onset(
            ctx,
            iso,
            out,
            [first],
            clean_before=nan_step,
            title=f"First non-finite loss at step {nan_step}",
            detail="Restart from the last checkpoint before it with a lower learning rate or tighter "
            "gradient clipping, and inspect the data of that step.",
            confidence=0.75,
        )

    def _stall(self, ctx: Context, name: str, m: Any, iso: dict[str, Any]) -> None:
        _steps, loss, rows = _finite_series(m, "loss")
        n = loss.size
        if n < 50:
            return
        k = n // 5
        older, recent = loss[n - 2 * k : n - k], loss[n - k :]
        o, r = float(np.mean(older)), float(np.mean(recent))
        if o == 0:
            return
        improvement = (o - r) / abs(o)
        if improvement >= 0.001:
            return
        kind = "loss_rise" if improvement < -0.02 else "loss_plateau"
        iso["loss"] = {
            "state": kind,
            "older_mean": round(o, 5),
            "recent_mean": round(r, 5),
            "improvement": round(improvement, 5),
        }
        ctx.add_finding(
            phase="isolation",
            kind=kind,
            title=("Loss is rising" if kind == "loss_rise" else "Loss has plateaued")
            + f": {o:.4g} → {r:.4g}",
            detail="Stall causes: LR decayed too far, clipping too aggressive, batch size changed without LR change, "
            "data repeating (shuffle), optimizer state lost on checkpoint load.",
            confidence=0.55,
            evidence_events=[
                row_event(name, m, int(rows[n - 2 * k]), "metrics_row", ["loss"]),
                row_event(name, m, int(rows[-1]), "metrics_row", ["loss"]),
            ],
            category="NUMERICAL",
        )

    def _regression(self, ctx: Context, name: str, m: Any, iso: dict[str, Any]) -> None:
        steps, st, rows = _finite_series(m, "step_time")
        n = st.size
        if n < 20:
            return
        base = ctx.options.baseline_step_time
        base_src = "given baseline"
        if not base:
            base = float(np.median(st[int(n * 0.1) : max(int(n * 0.3), int(n * 0.1) + 3)]))
            base_src = "the run's own early steps"
        cur = float(np.median(st[-max(5, n // 10) :]))
        if base <= 0:
            return
        ratio = cur / base
        iso["step_time"] = {
            "baseline": round(base, 4),
            "current": round(cur, 4),
            "ratio": round(ratio, 3),
            "baseline_from": base_src,
        }
        if ratio <= 1 + ctx.options.step_time_regression:
            return
        # first step where the rolling median crosses the threshold: the middle of each
        # sorted window of 5 (the values are finite), all windows in one sort
        thr = base * (1 + ctx.options.step_time_regression)
        w = 5
        rolling = np.sort(np.lib.stride_tricks.sliding_window_view(st[:-1], w), axis=1)[:, w // 2]
        crossed = np.flatnonzero(rolling[int(n * 0.1) :] > thr)
        at = int(n * 0.1) + int(crossed[0]) if crossed.size else n - 1
        iso["step_time"]["regressed_at_step"] = int(steps[at])
        ctx.add_finding(
            phase="isolation",
            kind="step_time_regression",
            title=f"Step time regressed {ratio - 1:.0%} against {base_src} ({base:.3g}s → {cur:.3g}s) from step {int(steps[at])}",
            detail="Compare compute vs communication per node group (isolation) to tell a slow GPU from a slow link.",
            confidence=0.65,
            evidence_events=[
                row_event(name, m, int(rows[at]), "metrics_row", ["step_time"]),
                row_event(name, m, int(rows[-1]), "metrics_row", ["step_time"]),
            ],
            ratio=round(ratio, 3),
        )


register_analyzer(NumericsAnalyzer())
