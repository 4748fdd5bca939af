"""Error events → root-cause candidates with a category, and each rank's first error.

Symptoms (watchdog timeouts, teardown, SIGTERM, tracebacks) are never causes.
A cause candidate carries a strength: how specific the line is about the root
cause (a CUDA OOM message is specific; ``ncclRemoteError`` can be the echo of a
peer that died). The verdict weighs them by time and strength.
"""

from __future__ import annotations

from typing import Any

from ..model import Event, evidence
from ..render import rank_list as _short
from ..signatures import BY_ID, exception_rule
from ..times import etime
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
    "gpu_reading": "nvidia-smi cannot reach a GPU",
}


_PEER_WORDS = ("NCCL", "c10d", "TCPStore", "rendezvous", "Rendezvous", "MASTER_ADDR", "peer")


def _category(e: Event) -> tuple[str, float] | None:
    k, f = e.kind, e.fields
    if "sig" in f:
        sig = BY_ID.get(str(f["sig"]))
        if sig is not None and sig.category is not None:
            return sig.category, sig.strength
    if k == "gpu_reading":
        # nvidia-smi could not reach the GPU ("Unable to determine the device handle"), or
        # cannot read sensors that a board of the same model beside it reads
        readings = f.get("readings") or {}
        if readings.get("lost"):
            return "HARDWARE", 0.9
        return ("HARDWARE", 0.6) if readings.get("sensor_errors_unlike_peers") else None
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
        if "illegal memory access" in what or "device-side assert" in what:
            return "SOFTWARE", 0.6
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
        if "DataLoader" in msg or "Loader" in t:
            return "DATA", 0.7
        rule = exception_rule(t, msg)
        # a bare programming error decides only when nothing more specific does
        return rule.category, (0.45 if rule.category == "SOFTWARE" else rule.confidence)
    if k == "segfault":
        return "SOFTWARE", 0.5
    if k == "retry_exhausted":
        # what was retried decides: a peer/store of the job is the network, the rest storage
        text = e.text
        if any(w in text for w in _PEER_WORDS):
            return "NETWORK", 0.6
        return "STORAGE_IO", 0.6
    return None


def label_of(e: Event) -> str:
    if e.kind == "gpu_reading" and not (e.fields.get("readings") or {}).get("lost"):
        return "nvidia-smi cannot read a GPU's sensors (ERR!)"
    if "sig" in e.fields:
        sig = BY_ID.get(str(e.fields.get("sig")))
        if sig is not None:
            return sig.meaning.split(":")[0].rstrip(".")
    return LABELS.get(e.kind, e.kind)


class FailuresAnalyzer:
    name = "failures"
    phase = "triage"
    order = 30
    reads = ("events",)
    writes = ("facts.causes", "facts.first_error_by_rank", "facts.first_failure", "findings")

    def run(self, ctx: Context) -> None:
        _approximate_times(ctx)
        causes: list[dict[str, Any]] = []
        first_by_rank: dict[int, Event] = {}
        for e in ctx.events:
            if e.kind in NOT_ERRORS and "sig" not in e.fields:
                continue
            if (
                e.rank is not None
                and e.rank not in first_by_rank
                and (e.level in ("E", "F", None) or e.kind not in SYMPTOMS)
            ):
                first_by_rank[e.rank] = e
            if e.kind == "watchdog_exit" and "CUDA error" in str(e.fields.get("what", "")):
                # torch >= 2.2: the watchdog thread reports the rank's own CUDA fault
                cat = _category(
                    Event(
                        kind="cuda_error",
                        line=e.line,
                        text=e.text,
                        fields={"what": e.fields["what"]},
                    )
                )
                if cat is not None:
                    causes.append(
                        {
                            "category": cat[0],
                            "strength": cat[1],
                            "event": e,
                            "label": "CUDA error reported by the NCCL watchdog",
                        }
                    )
                continue
            if e.kind in SYMPTOMS:
                continue
            cat = _category(e)
            if cat is None:
                continue
            if e.kind == "data_error" and "Killed" in e.text and ctx.by_kind.get("host_oom_kill"):
                continue  # a loader worker SIGKILLed while the kernel logged an OOM kill: OOM
            causes.append(
                {
                    "category": cat[0],
                    "strength": cat[1],
                    "event": e,
                    "label": label_of(e),
                }
            )
        ctx.facts.causes = causes
        ctx.facts.first_error_by_rank = [
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
            ctx.facts.first_failure = {
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


def _approximate_times(ctx: Context) -> None:
    """Lines without a timestamp (Python tracebacks) get the time of the previous stamped line
    of the same rank in the same file — never another rank's (lines of a file without rank
    prefixes are one stream). Marked approximate in the event and its evidence."""
    last: dict[tuple[str, int | None], str] = {}
    for e in sorted(ctx.events, key=lambda x: (x.file, x.line)):
        key = (e.file, e.rank)
        if e.time:
            last[key] = e.time
        elif key in last:
            e.fields["approx_time"] = last[key]
            e.fields["time_approximate"] = True


register_analyzer(FailuresAnalyzer())
