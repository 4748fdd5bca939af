"""Error events → root-cause candidates with a category, and each rank's first error.

Symptoms (watchdog timeouts, teardown, SIGTERM, tracebacks) are never causes.
A cause candidate carries a strength: how specific the line is about the root
cause (a CUDA OOM message is specific; ``ncclRemoteError`` can be the echo of a
peer that died). The verdict weighs them by time and strength.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from operator import attrgetter
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
# symptoms a catalogue signature can name the cause of: the signal the launcher's agent got
# says who ended the job (a hang-up from the login session is the cause itself)
CAUSAL_WHEN_CATALOGUED = {"agent_signal"}
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


# kinds whose line alone says the category and how sure it is
_FIXED: dict[str, tuple[str, float]] = {
    "cuda_oom": ("OOM", 0.95),
    "host_oom_kill": ("OOM", 0.85),
    "gpu_off_bus": ("HARDWARE", 0.9),
    "ecc_error": ("HARDWARE", 0.9),
    "nan_loss": ("NUMERICAL", 0.9),
    "nan_detected": ("NUMERICAL", 0.75),
    "collective_mismatch": ("SOFTWARE", 0.9),
    "slurm_time_limit": ("INFRA", 0.9),
    "slurm_preempted": ("INFRA", 0.85),
    "node_fail": ("INFRA", 0.85),
    "slurm_cancelled": ("INFRA", 0.5),
    "storage_error": ("STORAGE_IO", 0.8),
    "data_error": ("DATA", 0.75),
    "segfault": ("SOFTWARE", 0.5),
}


def _gpu_reading(e: Event) -> tuple[str, float] | None:
    # nvidia-smi could not reach the GPU ("Unable to determine the device handle"), or
    # cannot read sensors that a board of the same model beside it reads
    readings = e.fields.get("readings") or {}
    if readings.get("lost"):
        return "HARDWARE", 0.9
    return ("HARDWARE", 0.6) if readings.get("sensor_errors_unlike_peers") else None


# Xid 43: the GPU stopped a channel after the application's own fault, and (NVIDIA's
# catalogue) the GPU stays healthy. It is the echo of what the application logs, so it is
# weaker than any other Xid and never a cause on its own.
_APP_FAULT_XIDS = frozenset({43})


def _xid(e: Event) -> tuple[str, float] | None:
    if e.fields.get("hardware"):
        return "HARDWARE", 0.95
    return ("HARDWARE", 0.4) if e.fields.get("xid") in _APP_FAULT_XIDS else ("HARDWARE", 0.5)


# (words in the CUDA error's text, outcome), first match wins
_CUDA_WHAT: tuple[tuple[tuple[str, ...], tuple[str, float]], ...] = (
    (("illegal memory access", "device-side assert"), ("SOFTWARE", 0.6)),
    (("launch failure", "uncorrectable", "hardware"), ("HARDWARE", 0.6)),
    (("out of memory",), ("OOM", 0.9)),
)


def _cuda_error(e: Event) -> tuple[str, float] | None:
    what = str(e.fields.get("what", "")).lower()
    for words, outcome in _CUDA_WHAT:
        if any(w in what for w in words):
            return outcome
    return "SOFTWARE", 0.55


def _network_error(e: Event) -> tuple[str, float] | None:
    # a socket closed by the peer is as often a rank that died as a broken link
    return ("NETWORK", 0.5) if e.fields.get("peer_closed") else ("NETWORK", 0.8)


def _nccl_error(e: Event) -> tuple[str, float] | None:
    code = str(e.fields.get("nccl_code", "")) + str(e.fields.get("what", ""))
    if "ncclInvalidUsage" in code or "ncclInvalidArgument" in code:
        return "SOFTWARE", 0.6
    if "ncclUnhandledCudaError" in code:
        return "HARDWARE", 0.4
    return "NETWORK", 0.5


_IN_WORKER = re.compile(r"Caught (\w+) in DataLoader worker")


def _python_exception(e: Event) -> tuple[str, float] | None:
    t = e.fields.get("type", "")
    msg = str(e.fields.get("message", ""))
    if t in ("DistBackendError", "DistNetworkError", "DistStoreError", "ChildFailedError"):
        return None  # distributed echoes of another failure
    if "NCCL" in msg or "Watchdog" in msg or "ProcessGroup" in msg:
        return None
    if "DataLoader" in msg or "Loader" in t:
        return "DATA", 0.7
    rule = exception_rule(t, msg)
    # a bare programming error decides only when nothing more specific does
    return rule.category, (0.45 if rule.category == "SOFTWARE" else rule.confidence)


def _data_error(e: Event) -> tuple[str, float] | None:
    """A data loader's error is the data's, unless it re-raises a worker's exception a rule
    knows as something else ("Caught OSError in DataLoader worker process 1. … [Errno 28] No
    space left on device": the disk; a MemoryError: the host's memory; a remote store's
    timeout: the store)."""
    what = str(e.fields.get("what", ""))
    wrapped = _IN_WORKER.search(what)
    if wrapped:
        inner = exception_rule(wrapped.group(1), what)
        if inner.category not in ("SOFTWARE", "DATA"):
            return inner.category, inner.confidence
    return _FIXED["data_error"]


def _retry_exhausted(e: Event) -> tuple[str, float] | None:
    # what was retried decides: a peer/store of the job is the network, the rest storage
    if any(w in e.text for w in _PEER_WORDS):
        return "NETWORK", 0.6
    return "STORAGE_IO", 0.6


# kinds whose category depends on what the line says
_BY_KIND: dict[str, Callable[[Event], tuple[str, float] | None]] = {
    "gpu_reading": _gpu_reading,
    "xid": _xid,
    "cuda_error": _cuda_error,
    "network_error": _network_error,
    "nccl_error": _nccl_error,
    "async_exception": _nccl_error,
    "python_exception": _python_exception,
    "retry_exhausted": _retry_exhausted,
    "data_error": _data_error,
}


def _category(e: Event) -> tuple[str, float] | None:
    """A signature's category first, then the event kind's rule."""
    if "sig" in e.fields:
        sig = BY_ID.get(str(e.fields["sig"]))
        if sig is not None and sig.category is not None:
            return sig.category, sig.strength
    rule = _BY_KIND.get(e.kind)
    if rule is not None:
        return rule(e)
    return _FIXED.get(e.kind)


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
        causes, first_by_rank = _causes_and_first_errors(ctx)
        ctx.facts.causes = causes
        ctx.facts.first_error_by_rank = [
            {"rank": r, "kind": e.kind, "time": etime(e), **evidence(e)}
            for r, e in sorted(first_by_rank.items())
        ][:4096]
        first = _first_failure(ctx)
        if first is not None:
            ctx.facts.first_failure = {
                "rank": first.rank,
                "kind": first.kind,
                "time": etime(first),
                **evidence(first),
            }
        for cat in sorted({c["category"] for c in causes}):
            _add_category_finding(ctx, cat, [c for c in causes if c["category"] == cat])


def _watchdog_cuda_cause(e: Event) -> dict[str, Any] | None:
    """torch >= 2.2: the watchdog thread reports the rank's own CUDA fault."""
    cat = _category(
        Event(kind="cuda_error", line=e.line, text=e.text, fields={"what": e.fields["what"]})
    )
    if cat is None:
        return None
    return {
        "category": cat[0],
        "strength": cat[1],
        "event": e,
        "label": "CUDA error reported by the NCCL watchdog",
    }


def _causes_and_first_errors(ctx: Context) -> tuple[list[dict[str, Any]], dict[int, Event]]:
    """Every error line that names a category is a cause; each rank's first error line."""
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
            cause = _watchdog_cuda_cause(e)
            if cause is not None:
                causes.append(cause)
            continue
        if e.kind in SYMPTOMS and not (e.kind in CAUSAL_WHEN_CATALOGUED and "sig" in e.fields):
            continue
        cat = _category(e)
        if cat is None:
            continue
        if e.kind == "data_error" and "Killed" in e.text and ctx.by_kind.get("host_oom_kill"):
            continue  # a loader worker SIGKILLed while the kernel logged an OOM kill: OOM
        causes.append({"category": cat[0], "strength": cat[1], "event": e, "label": label_of(e)})
    _store_hosted_by_none(ctx, causes)
    return causes, first_by_rank


_STORE_CLIENT = re.compile(
    r"client socket has timed out after \d+s while trying to connect to \(?(?P<host>[^\s,()]+?)"
    r"(?:, |:)(?P<port>\d+)\)?"
)


def _store_hosted_by_none(ctx: Context, causes: list[dict[str, Any]]) -> None:
    """Every node's agent timed out as a client of the same c10d store endpoint: no agent
    hosted it (the c10d backend hosts the store on the node that recognises the endpoint's
    host as its own), so the endpoint names no node of the job as the launcher sees it — a
    launch setting, not an unreachable address. One node's log alone cannot tell that."""
    files = {r.name for r in ctx.results}
    by_endpoint: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for c in causes:
        m = _STORE_CLIENT.search(c["event"].text)
        if m is not None and c["event"].fields.get("sig") == "c10d-store-unreachable":
            by_endpoint.setdefault((m["host"], m["port"]), []).append(c)
    for (host, port), same in by_endpoint.items():
        seen = {c["event"].file for c in same}
        if len(seen) < 2 or seen != files:
            continue
        for c in causes:
            if c["event"].fields.get("sig") == "c10d-store-unreachable":
                c["category"] = "INFRA"
                c["label"] = (
                    f"No node hosted the c10d store: every node's agent timed out as a client "
                    f"of {host}:{port}"
                )
                c["action"] = _HOSTED_BY_NONE_ACTION


_HOSTED_BY_NONE_ACTION = (
    "Give the rendezvous endpoint as the name the first node knows itself by (its hostname "
    "or FQDN, as `hostname -f` prints it), or pass --local_addr / use the static backend "
    "with --master_addr; an IP or alias the node does not recognise makes every agent a client."
)


def _first_failure(ctx: Context) -> Event | None:
    errors = [
        e
        for e in ctx.events
        if e.kind not in NOT_ERRORS
        and (e.kind not in SYMPTOMS or e.kind in ("watchdog_timeout", "torchrun_failure"))
    ]
    # the first of a stable sort by this key, without sorting
    return min(errors, key=lambda e: (etime(e) or "9999", e.file, e.line), default=None)


def _add_category_finding(ctx: Context, cat: str, group: list[dict[str, Any]]) -> None:
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
    prefixes are one stream); lines above the stream's first stamp get that stamp, the
    latest they can have happened. Marked approximate in the event and its evidence."""
    # only files with an untimed line have anything to do (a stream never spans files)
    files = {e.file for e in ctx.events if not e.time}
    if not files:
        return
    last: dict[tuple[str, int | None], str] = {}
    before_first: dict[tuple[str, int | None], list[Event]] = {}
    in_files = [e for e in ctx.events if e.file in files]
    for e in sorted(in_files, key=attrgetter("file", "line")):
        key = (e.file, e.rank)
        if e.time:
            last[key] = e.time
            # lines above the stream's first stamp happened no later than it
            for early in before_first.pop(key, ()):
                early.fields["approx_time"] = e.time
                early.fields["time_approximate"] = True
        elif key in last:
            e.fields["approx_time"] = last[key]
            e.fields["time_approximate"] = True
        else:
            before_first.setdefault(key, []).append(e)


register_analyzer(FailuresAnalyzer())
