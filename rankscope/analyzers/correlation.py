"""Correlation: events that precede failures within a window, with risk ratios; periodic failures.

Precursors are events whose kind names a checkpoint save, an LR or batch-size
change, an evaluation, a restart (torchrun restart, storage daemon start) or a
data-shard change. Failures are error-level events (OOM, NaN, Xid, NCCL
timeouts, exceptions, data/storage errors). For each precursor type:

    risk ratio = P(failure within W after the event) / P(failure in any W)
               = (failures within W after events / (events x W)) / (failures / span)

with W = ``Options.correlation_window`` (600 s). Ratios ≥ 2 with at least two
failures behind them are reported. Failures whose gaps are regular
(coefficient of variation < 0.2, at least 3 gaps) are reported as periodic.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .._lazy import lazy_module
from ..model import Event
from ..times import etime, to_dt
from . import Context, register_analyzer

np = lazy_module("numpy")

PRECURSORS = (
    ("checkpoint", ("checkpoint",)),
    ("lr_change", ("lr_change", "learning_rate")),
    ("batch_size_change", ("batch_size",)),
    ("eval", ("eval",)),
    ("restart", ("restart", "ais_restart", "resume")),
    ("data_shard_change", ("shard",)),
)
FAILURES = {
    "cuda_oom",
    "host_oom_kill",
    "nan_loss",
    "nan_detected",
    "xid",
    "gpu_off_bus",
    "ecc_error",
    "watchdog_timeout",
    "python_exception",
    "data_error",
    "retry_exhausted",
    "storage_error",
    "nccl_error",
    "network_error",
    "segfault",
    "cuda_error",
    "ais_out_of_bounds",
    "ais_stream_broken",
}


def _ptype(kind: str) -> str | None:
    for name, keys in PRECURSORS:
        if any(k in kind for k in keys):
            return name
    return None


class CorrelationAnalyzer:
    name = "correlation"
    phase = "root_cause"
    order = 70
    reads = ("events",)
    writes = ("doc.isolation.correlation", "findings")

    def run(self, ctx: Context) -> None:
        W = float(ctx.options.correlation_window)
        # a precursor type per kind, not per event (thousands of events, a dozen kinds)
        ptype = {k: _ptype(k) for k in {e.kind for e in ctx.events} - FAILURES}
        # only failures and precursors need their time read; every event's only to measure
        # the span, when there are both
        fails_t: list[tuple[datetime, Event]] = []
        pre: dict[str, list[tuple[datetime, Event]]] = {}
        for e in ctx.events:
            p = ptype.get(e.kind)
            if p is None and e.kind not in FAILURES:
                continue
            t = to_dt(etime(e))
            if t is None:
                continue
            if p is None:
                fails_t.append((t, e))
            else:
                pre.setdefault(p, []).append((t, e))
        fails = self._dedupe(fails_t)
        out: dict[str, Any] = {"window_seconds": W, "failures": len(fails), "precursors": {}}
        if fails and pre:
            times = [t for e in ctx.events if (t := to_dt(etime(e))) is not None]
            span = max(W, (max(times) - min(times)).total_seconds())
            base = len(fails) / span
            for p, evs in sorted(pre.items()):
                hits: list[tuple[Event, Event]] = []
                for t, e in evs:
                    for tf, f in fails:
                        dt = (tf - t).total_seconds()
                        if 0 < dt <= W:
                            hits.append((e, f))
                            break
                rate_after = len(hits) / (len(evs) * W)
                rr = rate_after / base if base else 0.0
                out["precursors"][p] = {
                    "events": len(evs),
                    "followed_by_failure": len(hits),
                    "risk_ratio": round(rr, 2),
                }
                if rr >= 2 and len(hits) >= 2:
                    ctx.add_finding(
                        phase="root_cause",
                        kind="precursor_correlation",
                        title=f"Failures follow {p.replace('_', ' ')} events: risk ratio {rr:.1f}x "
                        f"({len(hits)} of {len(evs)} followed by a failure within {W:.0f} s)",
                        detail="Correlation, not proof: test it by moving or disabling that event (e.g. checkpoint less often, "
                        "or async) and watching whether the failures move with it.",
                        confidence=min(0.8, 0.4 + 0.1 * len(hits)),
                        evidence_events=[x for pair in hits[:2] for x in pair],
                        precursor=p,
                        risk_ratio=round(rr, 2),
                    )
        self._periodic(ctx, fails, out)
        if out["precursors"] or out.get("periodic"):
            ctx.doc.setdefault("isolation", {})["correlation"] = out

    @staticmethod
    def _dedupe(fails: list[tuple[datetime, Event]]) -> list[tuple[datetime, Event]]:
        """One failure per burst: events within 60 s of the previous failure are the same failure."""
        fails.sort(key=lambda x: x[0])
        out: list[tuple[datetime, Event]] = []
        for t, e in fails:
            if out and (t - out[-1][0]).total_seconds() < 60:
                continue
            out.append((t, e))
        return out

    @staticmethod
    def _periodic(ctx: Context, fails: list[tuple[datetime, Event]], out: dict[str, Any]) -> None:
        if len(fails) < 4:
            return
        gaps = np.diff([t.timestamp() for t, _ in fails])
        mean = float(np.mean(gaps))
        if mean <= 0:
            return
        cv = float(np.std(gaps) / mean)
        if cv < 0.2:
            out["periodic"] = {
                "period_seconds": round(mean, 1),
                "cv": round(cv, 3),
                "count": len(fails),
            }
            ctx.add_finding(
                phase="root_cause",
                kind="periodic_failures",
                title=f"Failures recur every {mean / 60:.1f} min ({len(fails)} occurrences, regular to {cv:.0%})",
                detail="A periodic failure points at something scheduled: checkpoint or eval intervals, cron jobs, "
                "log rotation, storage housekeeping, a data shard boundary.",
                confidence=0.6,
                evidence_events=[e for _, e in fails[:3]],
                period_seconds=round(mean, 1),
            )


register_analyzer(CorrelationAnalyzer())
