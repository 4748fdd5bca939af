"""Error events → root-cause candidates with a category, and each rank's first error.

Symptoms (watchdog timeouts, teardown, SIGTERM, tracebacks) are never causes.
A cause candidate carries a strength: how specific the line is about the root
cause (a CUDA OOM message is specific; ``ncclRemoteError`` can be the echo of a
peer that died). The verdict weighs them by time and strength.
"""

from __future__ import annotations

from typing import Any

from ..model import Event, evidence
from . import Context, register_analyzer

SYMPTOMS = {
    "watchdog_timeout",
    "watchdog_failure",
    "dump_first",
    "dump_observed",
    "dump_received",
    "teardown",
    "fatal_terminate",
    "watchdog_exit",
    "blocking_wait_timeout",
    "torchrun_failed",
    "torchrun_failure",
    "sigterm_sent",
    "agent_signal",
    "traceback",
    "worker_group_failed",
    "comm_aborted",
    "remote_error",
}
NOT_ERRORS = {
    "nccl_progress",
    "run_succeeded",
    "retry",
    "connection_error",
    "fr_status",
    "dump_observed",
    "dump_received",
}

LABELS = {
    "cuda_oom": "CUDA out of memory",
    "host_oom_kill": "host out of memory (OOM killer)",
    "xid": "GPU Xid error",
    "gpu_off_bus": "GPU fell off the bus",
    "ecc_error": "uncorrectable ECC error",
    "cuda_error": "CUDA error",
    "nan_loss": "loss became NaN/Inf",
    "nan_detected": "NaN/Inf detected",
    "collective_mismatch": "mismatched collectives across ranks",
    "slurm_time_limit": "SLURM time limit reached",
    "slurm_preempted": "job preempted",
    "node_fail": "node failure",
    "slurm_cancelled": "job cancelled",
    "storage_error": "storage I/O error",
    "data_error": "data loading error",
    "network_error": "NCCL network error",
    "nccl_error": "NCCL error",
    "async_exception": "NCCL async error on a collective",
    "python_exception": "Python exception",
    "segfault": "segmentation fault / fatal error",
    "retry_exhausted": "retries exhausted",
}


def _category(e: Event) -> tuple[str, float] | None:
    k, f = e.kind, e.fields
    if k == "cuda_oom":
        return "OOM", 0.95
    if k == "host_oom_kill":
        return "OOM", 0.85
    if k == "xid":
        return ("HARDWARE", 0.95) if f.get("hardware") else ("HARDWARE", 0.5)
    if k in ("gpu_off_bus", "ecc_error"):
        return "HARDWARE", 0.9
    if k == "cuda_error":
        what = str(f.get("what", "")).lower()
        if "launch failure" in what or "uncorrectable" in what or "hardware" in what:
            return "HARDWARE", 0.6
        if "out of memory" in what:
            return "OOM", 0.9
        return "SOFTWARE", 0.55
    if k == "nan_loss":
        return "NUMERICAL", 0.9
    if k == "nan_detected":
        return "NUMERICAL", 0.75
    if k == "collective_mismatch":
        return "SOFTWARE", 0.9
    if k == "slurm_time_limit":
        return "INFRA", 0.9
    if k in ("slurm_preempted", "node_fail"):
        return "INFRA", 0.85
    if k == "slurm_cancelled":
        return "INFRA", 0.5
    if k == "storage_error":
        return "STORAGE_IO", 0.8
    if k == "data_error":
        return "DATA", 0.75
    if k == "network_error":
        # a socket closed by the peer is as often a rank that died as a broken link
        return ("NETWORK", 0.5) if f.get("peer_closed") else ("NETWORK", 0.8)
    if k in ("nccl_error", "async_exception"):
        code = str(f.get("nccl_code", "")) + str(f.get("what", ""))
        if "ncclInvalidUsage" in code or "ncclInvalidArgument" in code:
            return "SOFTWARE", 0.6
        if "ncclUnhandledCudaError" in code:
            return "HARDWARE", 0.4
        return "NETWORK", 0.5
    if k == "python_exception":
        t = f.get("type", "")
        msg = str(f.get("message", ""))
        if t in ("DistBackendError", "DistNetworkError", "DistStoreError", "ChildFailedError"):
            return None  # distributed echoes of another failure
        if "NCCL" in msg or "Watchdog" in msg or "ProcessGroup" in msg:
            return None
        if (
            t in ("OSError", "IOError", "FileNotFoundError", "PermissionError")
            or "I/O error" in msg
        ):
            return "STORAGE_IO", 0.5
        if "DataLoader" in msg or "Loader" in t:
            return "DATA", 0.7
        return "SOFTWARE", 0.45
    if k == "segfault":
        return "SOFTWARE", 0.5
    if k == "retry_exhausted":
        return "STORAGE_IO", 0.6
    return None


def etime(e: Event) -> str | None:
    return e.time or e.fields.get("approx_time")


class FailuresAnalyzer:
    name = "failures"
    phase = "triage"
    order = 30

    def run(self, ctx: Context) -> None:
        _approximate_times(ctx)
        causes: list[dict[str, Any]] = []
        first_by_rank: dict[int, Event] = {}
        for e in ctx.events:
            if e.kind in NOT_ERRORS:
                continue
            if (
                e.rank is not None
                and e.rank not in first_by_rank
                and (e.level in ("E", "F", None) or e.kind not in SYMPTOMS)
            ):
                first_by_rank[e.rank] = e
            if e.kind in SYMPTOMS:
                continue
            cat = _category(e)
            if cat is None:
                continue
            causes.append(
                {
                    "category": cat[0],
                    "strength": cat[1],
                    "event": e,
                    "label": LABELS.get(e.kind, e.kind),
                }
            )
        ctx.facts["causes"] = causes
        loc = ctx.doc["localization"]
        loc["first_error_by_rank"] = [
            {"rank": r, "kind": e.kind, "time": etime(e), **evidence(e)}
            for r, e in sorted(first_by_rank.items())
        ][:4096]
        errors = [
            e
            for e in ctx.events
            if e.kind not in NOT_ERRORS
            and (e.kind not in SYMPTOMS or e.kind in ("watchdog_timeout", "torchrun_failure"))
        ]
        errors.sort(key=lambda e: (etime(e) or "9999", e.file, e.line))
        if errors:
            first = errors[0]
            loc["first_failure"] = {
                "rank": first.rank,
                "kind": first.kind,
                "time": etime(first),
                **evidence(first),
            }
        for cat in sorted({c["category"] for c in causes}):
            group = [c for c in causes if c["category"] == cat]
            group.sort(key=lambda c: (etime(c["event"]) or "9999", -c["strength"]))
            ranks = sorted({c["event"].rank for c in group if c["event"].rank is not None})
            hosts = sorted({c["event"].host for c in group if c["event"].host})
            best = max(c["strength"] for c in group)
            kinds = sorted({c["event"].kind for c in group})
            ctx.add_finding(
                phase="triage",
                kind=group[0]["event"].kind,
                title=f"{group[0]['label']}"
                + (f" on rank(s) {_short(ranks)}" if ranks else "")
                + (f" ({', '.join(hosts[:4])})" if hosts else ""),
                detail=f"{len(group)} line(s) of kind {', '.join(kinds)}; category {cat}.",
                confidence=best,
                ranks=ranks,
                hosts=hosts,
                evidence_events=[c["event"] for c in group[:3]],
                category=cat,
            )


def _short(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks[:8])) + (
        f" and {len(ranks) - 8} more" if len(ranks) > 8 else ""
    )


def _approximate_times(ctx: Context) -> None:
    """Lines without a timestamp (Python tracebacks) get the last time seen above them in their file."""
    last: dict[str, str] = {}
    for e in sorted(ctx.events, key=lambda x: (x.file, x.line)):
        if e.time:
            last[e.file] = e.time
        elif e.file in last:
            e.fields["approx_time"] = last[e.file]


register_analyzer(FailuresAnalyzer())
