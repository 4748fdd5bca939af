"""Precise parsing of one candidate line (message already peeled of its envelope).

``classify`` returns ``(kind, fields)`` or ``None``. One line gives one event,
the most specific reading wins (an exception line naming a CUDA OOM is
``cuda_oom``, not ``python_exception``). Formats are those of
docs reference ``log-formats.md``: every wording of the PyTorch NCCL watchdog,
flight recorder heartbeat, NCCL, torchrun/elastic, SLURM, kernel.

``needs_more`` tells the caller that the line starts a known message whose
fields are cut (terminal wrapping): the caller retries with the next line(s)
appended.
"""

from __future__ import annotations

import re
from typing import Any

from .._lazy import lazy_compile

# torch <= 1.9 prints no SeqNum: "WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000)"
WORK = lazy_compile(
    r"WorkNCCL\((?:SeqNum=(?P<seq>\d+), )?OpType=(?P<op>\w+)"
    r"(?:, NumelIn=(?P<nin>\d+), NumelOut=(?P<nout>\d+))?, Timeout\(ms\)=(?P<to>\d+)\)"
)
PG = lazy_compile(
    r"\[PG (?:ID )?(?P<pg>\d+)(?: PG GUID (?P<guid>[^\s(\]]+))? ?(?:\((?P<desc>[^)]*)\))? "
    r"Rank (?P<grank>\d+)\]"
)
WORK_RANK = lazy_compile(r"\[Rank (?P<r>\d+)\]")
NCCL_HOST = lazy_compile(
    r"^(?P<host>[A-Za-z0-9][\w.-]*):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\]"
)

_RX: dict[str, re.Pattern[str]] = {
    "failure": lazy_compile(
        r"failure detected by watchdog at work sequence id: (?P<seq>\d+)\s+PG status: "
        r"last enqueued work: (?P<e>-?\d+), last completed work: (?P<c>-?\d+)"
        r"(?:, last started work: (?P<s>-?\d+))?"
    ),
    "exc_detected": lazy_compile(
        r"Exception \(either an error or timeout\) detected by watchdog at work: (?P<seq>\d+), "
        r"last enqueued NCCL work: (?P<e>-?\d+), last completed NCCL work: (?P<c>-?\d+)"
    ),
    "timeout_at": lazy_compile(
        r"Timeout at NCCL work: (?P<seq>\d+), last enqueued NCCL work: (?P<e>-?\d+), "
        r"last completed NCCL work: (?P<c>-?\d+)"
    ),
    "received": lazy_compile(
        r"Received a dump signal due to a collective timeout from\s+(?:(?P<self>this local rank)|rank (?P<from>-?\d+))"
        r".*?Last enqueued NCCL work: (?P<e>-?\d+), last completed NCCL work: (?P<c>-?\d+)"
    ),
    "progress": lazy_compile(
        r"last enqueued NCCL work: (?P<e>-?\d+), last completed NCCL work: (?P<c>-?\d+)"
    ),
    "terminate": lazy_compile(r"after attempting to dump debug info, due to (?P<why>[^.]+)"),
    "stuck": lazy_compile(r"watchdog got stuck for (?P<s>\d+) seconds"),
    "remote": lazy_compile(r"remote error detected from rank: ?(?P<r>\d+)"),
    "aborted": lazy_compile(
        r"NCCL communicator was aborted on rank (?P<r>\d+)\.\s+Original reason for failure was: (?P<why>.*)"
    ),
    "mismatch_pgw": lazy_compile(
        r"Detected mismatch between collectives on ranks\. Rank (?P<a>\d+) is running collective: "
        r"(?P<fa>CollectiveFingerPrint\(.*?\)\)?), but Rank (?P<b>\d+) is running collective: (?P<fb>.*)"
    ),
    # torch 1.10-1.12: each rank prints its own fingerprint (terminal wrapping may cut it)
    "mismatch_self": lazy_compile(
        r"Detected mismatch between collectives on ranks\. Rank (?P<r>\d+) is running "
        r"inconsistent collective: (?P<fp>CollectiveFingerPrint\(.*)"
    ),
    "mismatch_nccl": lazy_compile(r"Mismatched collective detected.*?around rank (?P<r>\d+)"),
    "oom_tried": lazy_compile(r"Tried to allocate (?P<n>[\d.]+ ?[KMGT]i?B)"),
    # "GPU 3 has a total capacity of 79.1 GiB" (torch >= 2.1), "(GPU 3; 15.98 GiB total
    # capacity; …" before it
    "oom_gpu": lazy_compile(
        r"GPU (?P<g>\d+)(?: has a total capacity of |; )(?P<cap>[\d.]+ ?[KMGT]i?B)"
    ),
    "off_bus_pci": lazy_compile(r"GPU (?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)"),
    "xid": lazy_compile(r"NVRM: Xid \((?P<pci>[^)]*)\): (?P<code>\d+),?\s*(?P<rest>.*)"),
    "host_oom": lazy_compile(
        r"[Oo]ut of memory: Kill(?:ed)? process (?P<pid>\d+) \((?P<proc>[^)]*)\)"
    ),
    "slurm_cancel": lazy_compile(
        r"\*\*\* (?P<what>JOB|STEP) (?P<id>[\w.+]+) ON (?P<host>\S+) CANCELLED AT (?P<at>\S+)"
        r"(?: DUE TO (?P<why>[A-Z ]+?))? \*\*\*"
    ),
    "tr_failed": lazy_compile(
        r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<lr>\d+) \(pid: (?P<pid>\d+)\)"
        r"(?: of binary: (?P<bin>.*))?"
    ),
    "tr_field": lazy_compile(
        r"^\s*(?P<k>time|host|rank|exitcode|error_file|traceback)\s*: (?P<v>.*)$"
    ),
    "closing": lazy_compile(r"Sending process (?P<pid>\d+) closing signal (?P<sig>\S+)"),
    "death": lazy_compile(r"Received (?P<sig>\S+) death signal"),
    "retry_frac": lazy_compile(r"[Rr]etr(?:y|ying)(?: attempt)? (?P<k>\d+)(?:/| of )(?P<n>\d+)"),
    "retry_total": lazy_compile(r"Retrying \(Retry\(total=(?P<left>-?\d+)"),
    "exception": lazy_compile(
        r"(?:^|[\s:\]])(?P<type>[A-Za-z_][\w.]*(?:Error|Exception)): (?P<msg>.*)"
    ),
    # the leftmost match starts where a run of name characters does (from any later
    # position in the run, the same match less a few name characters): the lookbehind
    # spares the search a scan of the run from each of its characters; same matches
    "nan_loss": lazy_compile(
        r"(?<![A-Za-z_ ])"
        r"(?P<name>[A-Za-z_ ]*[Ll]oss[A-Za-z_ ]{0,20})[=:] *(?P<v>-?(?:nan|NaN|NAN|inf|Inf|INF))\b"
    ),
    "nan_count": lazy_compile(r"number of nan iterations: *(?P<n>[1-9]\d*)"),
    "iteration": lazy_compile(r"\biteration\s+(?P<i>\d+)\s*/\s*(?P<of>\d+)"),
    "cuda_error": lazy_compile(
        r"CUDA error: (?P<what>[^\n]*?)(?:\s*$|\n|Compile with|CUDA kernel errors)"
    ),
}

# Xid codes that point at the hardware rather than the application
# (NVIDIA's Xid catalogue: bus drop, ECC/DBE, row remapping, NVLink, GSP/firmware).
_NCCL_CODE = lazy_compile(r"nccl\w+Error|ncclInvalid\w+")
# NCCL WARN wordings of a peer that went away (often a rank that died, not the fabric)
_PEER_CLOSED = (
    "closed by remote peer",
    "Connection closed by",
    "Broken pipe",
    "Connection reset",
    "Call to recv from",
)

HARDWARE_XIDS = {48, 54, 56, 57, 58, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 121, 123, 140}


def _pg_fields(msg: str) -> dict[str, Any]:
    m = PG.search(msg)
    if not m:
        return {}
    pg, grank, desc, guid = m.group("pg", "grank", "desc", "guid")  # one call, not four
    f: dict[str, Any] = {"pg": pg, "group_rank": int(grank)}
    if desc:
        f["pg_desc"] = desc
    if guid:
        f["pg_guid"] = guid
    return f


def _work_fields(msg: str) -> dict[str, Any]:
    m = WORK.search(msg)
    if not m:
        return {}
    op, to, seq = m.group("op", "to", "seq")
    f: dict[str, Any] = {"op": op, "timeout_ms": int(to)}
    if seq is not None:
        f["seq"] = int(seq)
    w = WORK_RANK.search(msg)
    if w:
        f["work_rank"] = int(w.group("r"))
    return f


Result = tuple[str, dict[str, Any]] | None


def _has_any(msg: str, words: tuple[str, ...]) -> bool:
    # a plain loop: any() over a generator costs more than the few tests it makes
    for w in words:  # noqa: SIM110 — see above
        if w in msg:
            return True
    return False


def classify(msg: str) -> tuple[Result, bool]:
    """Return ``(result, needs_more)`` for one peeled message."""
    r = _classify_nccl(msg)
    if r is not None:
        return r
    return _classify_other(msg), False


_TIMEOUT_MARK = "Watchdog caught collective operation timeout"
# an envelope inside a peeled message, right behind other text (no space or column
# separator between): the message was glued behind other output (a progress bar
# without a newline, another rank's partial line)
_ENV_INSIDE = lazy_compile(
    r"(?:\[[\w-]+\]:)*(?:\[[IWEF]\d{3,4} \d\d:\d\d:\d\d[.\d]*\s*\d* [\w.]+:\d+\]"
    r"|\[[IWEF] [\w.]+:\d+\]|\[(?:rank|default)\d+\]:)"
)


def _glued(msg: str, end: int) -> bool:
    if msg.find(":", 0, end) < 0:
        return False  # every envelope _ENV_INSIDE reads has a colon (a search tries each position)
    return any(
        m.start() > 0 and msg[m.start() - 1] not in " \t|"
        for m in _ENV_INSIDE.finditer(msg, 0, end)
    )


# how long the timed-out work ran: the first such words after the marker and ": " (a message
# is one line: searched from there for its literal, not with ``.*?`` from the marker on)
_RAN_FOR = lazy_compile(r"ran for (?P<ran>\d+) milli")


# the watchdog's failure wordings: (key of their regex in _RX, literal that names them),
# built once rather than per line
_WATCHDOG_MARKERS = (
    ("failure", "failure detected by watchdog"),
    ("exc_detected", "detected by watchdog at work"),
    ("timeout_at", "Timeout at NCCL work"),
)


def _watchdog_timeouts(msg: str) -> tuple[Result, bool] | None:
    """Collective timeouts and the watchdog's failure reports (every wording)."""
    caught = msg.find("Watchdog caught")
    at = msg.find(_TIMEOUT_MARK, caught) if caught >= 0 else -1
    if caught >= 0 and at < 0 and _TIMEOUT_MARK.startswith(msg[caught:].rstrip()):
        # terminal wrapping cut the message inside its own marker words
        # ("… [Rank 2] Watchdog caught ⏎ collective operation timeout: …")
        f = _pg_fields(msg)
        w = WORK_RANK.search(msg)
        if w:
            f["work_rank"] = int(w.group("r"))
        return ("watchdog_timeout", f), True
    if at >= 0:
        f = _work_fields(msg)
        words = msg.find(_TIMEOUT_MARK + ": ", at)
        m = _RAN_FOR.search(msg, words + len(_TIMEOUT_MARK) + 2) if words >= 0 else None
        if m:
            f["ran_ms"] = int(m.group("ran"))
        f.update(_pg_fields(msg))
        if _glued(msg, at):
            f["glued"] = True  # printed behind other output on the same line
        if "thread terminated with exception" in msg:
            f["via"] = "watchdog_exit"
        return ("watchdog_timeout", f), "op" not in f
    for key, marker in _WATCHDOG_MARKERS:
        if marker in msg:
            m = _RX[key].search(msg)
            if not m:
                return ("watchdog_failure", _pg_fields(msg)), True
            f = _pg_fields(msg)
            f.update(
                seq=int(m.group("seq")),
                last_enqueued=int(m.group("e")),
                last_completed=int(m.group("c")),
            )
            if key == "failure" and m.group("s") is not None:
                f["last_started"] = int(m.group("s"))
            f["wording"] = key
            return ("watchdog_failure", f), False
    return None


def _dump_signals(msg: str) -> tuple[Result, bool] | None:
    """Who signalled the flight-recorder dump, and who only observed it."""
    if (
        "to signal dumping" in msg
        or "to set the dump signal" in msg
        or "Received a timeout signal from this local rank" in msg
    ):
        return ("dump_first", _pg_fields(msg)), False
    if "global timeout from another rank" in msg:
        # ≈2.2-2.3 heartbeat: notified by the store, without naming the rank that signalled
        f = _pg_fields(msg)
        m = _RX["progress"].search(msg)
        if m:
            f.update(last_enqueued=int(m.group("e")), last_completed=int(m.group("c")))
        return ("dump_observed", f), False
    if "dump signal from another rank" in msg or "ProcessGroupNCCL preparing to dump" in msg:
        # the rank is writing its flight-recorder dump: it got the signal (its own
        # watchdog's lines say so when it sent it) and was alive to react
        return ("dump_observed", _pg_fields(msg)), False
    if "Received a dump signal" in msg:
        m = _RX["received"].search(msg)
        f = _pg_fields(msg)
        if not m:
            return ("dump_received", f), True
        if m.group("from") is not None:
            f["from_rank"] = int(m.group("from"))
        else:
            f["from_self"] = True
        f.update(last_enqueued=int(m.group("e")), last_completed=int(m.group("c")))
        return ("dump_received", f), False
    return None


def _async_errors(msg: str) -> tuple[Result, bool] | None:
    """Async NCCL exceptions and blocking-wait timeouts."""
    if "raised the following async exception" in msg:
        f = _work_fields(msg)
        f.update(_pg_fields(msg))
        f["what"] = msg.split("async exception:", 1)[-1].strip()[:300]
        code = _NCCL_CODE.search(msg)
        if code:
            f["nccl_code"] = code.group(0)
        return ("async_exception", f), "op" not in f
    if "timed out in blocking wait" in msg:
        f = _work_fields(msg)
        return ("blocking_wait_timeout", f), "op" not in f
    return None


def _teardown_and_aborts(msg: str) -> tuple[Result, bool] | None:
    """Process teardown, heartbeat-monitor aborts, aborted communicators, progress lines."""
    if "taking the entire process down" in msg or "Some NCCL operations have failed" in msg:
        if "NCCL error" in msg or _NCCL_CODE.search(msg):
            return None  # old torch prints the teardown and the NCCL error on one line
        return ("teardown", {}), False
    if "after attempting to dump debug info" in msg:
        m = _RX["terminate"].search(msg)
        return ("fatal_terminate", {"reason": m.group("why").strip()} if m else {}), False
    if "watchdog got stuck for" in msg or "Heartbeat monitor timed out" in msg:
        m = _RX["stuck"].search(msg)
        f = _pg_fields(msg)
        if m:
            f["stuck_s"] = int(m.group("s"))
        return ("watchdog_hang", f), False
    if "watchdog thread terminated with exception" in msg:
        f = _pg_fields(msg)
        w = WORK_RANK.search(msg.split("exception:", 1)[0])
        if w and "pg" not in f:
            f["work_rank"] = int(w.group("r"))  # old wording: "[Rank N] NCCL watchdog thread …"
        f["what"] = msg.split("exception:", 1)[-1].strip()[:300]
        return ("watchdog_exit", f), False
    if "NCCL communicator was aborted" in msg:
        m = _RX["aborted"].search(msg)
        f = {"work_rank": int(m.group("r")), "what": m.group("why")[:300]} if m else {}
        f.update(_work_fields(msg))
        return ("comm_aborted", f), False
    if "remote error detected from rank" in msg:
        m = _RX["remote"].search(msg)
        f = _pg_fields(msg)
        if m:
            f["from_rank"] = int(m.group("r"))
        return ("remote_error", f), False
    if "NCCL Work update periodically" in msg:
        m = _RX["progress"].search(msg)
        if not m:
            return ("nccl_progress", {}), True
        return (
            "nccl_progress",
            {"last_enqueued": int(m.group("e")), "last_completed": int(m.group("c"))},
        ), False
    return None


def _own_fingerprint(msg: str) -> tuple[Result, bool] | None:
    """A rank's own collective fingerprint (``Rank N is running inconsistent collective:
    CollectiveFingerPrint(…)``); the next line is needed while its shapes and dtypes are cut."""
    if "is running inconsistent collective" not in msg:
        return None
    m = _RX["mismatch_self"].search(msg)
    if m is None:
        return ("collective_mismatch", {}), False
    fp = m.group("fp")
    f = {"rank_self": int(m.group("r")), "fingerprint": fp[:300]}
    return ("collective_mismatch", f), "TensorDtypes=" not in fp


def _classify_nccl(msg: str) -> tuple[Result, bool] | None:
    """The NCCL family, its readers in the order their wordings must be tried (a reader that
    returns None passes the message on; the teardown reader hands a teardown line carrying
    an NCCL error to the other readers). A reader is skipped when the message has none of
    the words its wordings share ("atchdog": "Watchdog caught", "watchdog got stuck"…;
    "dump": "to signal dumping", "Received a dump signal"…): most candidate lines are
    none of theirs, and each reader tests several wordings."""
    nccl = "NCCL" in msg
    watchdog = "atchdog" in msg
    dump = "dump" in msg
    if nccl or watchdog:  # "Timeout at NCCL work"
        r = _watchdog_timeouts(msg)
        if r is not None:
            return r
    if dump or "timeout signal" in msg or "global timeout" in msg:
        r = _dump_signals(msg)
        if r is not None:
            return r
    r = _async_errors(msg)  # (tests its two wordings first)
    if r is not None:
        return r
    if (
        nccl
        or watchdog
        or dump
        or "entire process down" in msg
        or "Heartbeat monitor" in msg
        or "remote error detected" in msg
    ):
        r = _teardown_and_aborts(msg)
        if r is not None:
            return r
    return _own_fingerprint(msg)


def _collectives_and_gpu(msg: str) -> Result:
    """Collective mismatches, Xid and a GPU that fell off the bus."""
    if "Detected mismatch between collectives" in msg:
        m = _RX["mismatch_pgw"].search(msg)
        f: dict[str, Any] = {}
        if m:
            f = {
                "rank_a": int(m.group("a")),
                "rank_b": int(m.group("b")),
                "fingerprint_a": m.group("fa")[:300],
                "fingerprint_b": m.group("fb")[:300],
            }
        return "collective_mismatch", f
    if "Mismatched collective" in msg:
        m = _RX["mismatch_nccl"].search(msg)
        return "collective_mismatch", ({"around_rank": int(m.group("r"))} if m else {})
    if "NVRM: Xid" in msg:
        m = _RX["xid"].search(msg)
        if m:
            code = int(m.group("code"))
            return "xid", {
                "pci": m.group("pci"),
                "xid": code,
                "detail": m.group("rest")[:200],
                "hardware": code in HARDWARE_XIDS,
            }
        return "xid", {}
    if "fallen off the bus" in msg:
        m = _RX["off_bus_pci"].search(msg)
        return "gpu_off_bus", ({"pci": m.group("pci")} if m else {})
    return None


def _memory(msg: str) -> Result:
    """CUDA OOM (and ROCm's HIP build of the same allocator) and the host OOM killer."""
    # Ray's OutOfMemoryError is its memory monitor killing a worker for the node's host
    # memory (catalogue: ray-memory-monitor-kill), not the GPU's; ROCm builds before 2.2
    # raise a plain RuntimeError worded "HIP out of memory. Tried to allocate …"
    if "emory" not in msg and "oom-kill" not in msg:
        return None  # a word of each wording below ("out of memory", "OutOfMemoryError"…)
    if (
        "CUDA out of memory" in msg
        or "HIP out of memory" in msg
        or ("OutOfMemoryError" in msg and "node running low on memory" not in msg)
    ):
        f = {}
        m = _RX["oom_tried"].search(msg)
        if m:
            f["tried"] = m.group("n")
        m = _RX["oom_gpu"].search(msg)
        if m:
            f["gpu"] = int(m.group("g"))
            f["capacity"] = m.group("cap")
        return "cuda_oom", f
    if (
        "ut of memory: Killed process" in msg  # kernel and memory cgroup ("Memory cgroup out …")
        or "ut of memory: Kill process" in msg  # the same before kernel 5.x
        or "invoked oom-killer" in msg
        or "oom-kill event" in msg
        or "Exceeded job memory limit" in msg
    ):
        m = _RX["host_oom"].search(msg)
        return "host_oom_kill", (
            {"pid": int(m.group("pid")), "process": m.group("proc")} if m else {}
        )
    return None


def _scheduler(msg: str) -> Result:
    """SLURM cancellations: time limit, preemption, node failure."""
    if "DUE TO" in msg or "NODE_FAIL" in msg or "CANCELLED AT" in msg:
        m = _RX["slurm_cancel"].search(msg)
        f = {}
        if m:
            f = {
                "what": m.group("what").lower(),
                "slurm_id": m.group("id"),
                "host": m.group("host"),
                "at": m.group("at"),
            }
        why = (m.group("why") if m else None) or ""
        if "TIME LIMIT" in msg or "TIME LIMIT" in why:
            return "slurm_time_limit", f
        if "PREEMPTION" in msg or "JOB REQUEUE" in why:
            # a requeue ends the running job the same way (preemption with requeue, or
            # the job's own handler asking SLURM to requeue it before its limit)
            return "slurm_preempted", f
        if "NODE FAILURE" in msg or "NODE_FAIL" in msg:
            return "node_fail", f
        return "slurm_cancelled", f
    return None


# a launcher's line that names the rank whose work raised the CUDA error
# ("Failed to initialize executor on rank 6: CUDA error: …", TensorRT-LLM)
_ON_RANK = lazy_compile(r"\bon rank (?P<r>\d+): CUDA error")


def _cuda(msg: str) -> Result:
    """CUDA and ECC errors."""
    if "CUDA error" in msg:
        m = _RX["cuda_error"].search(msg)
        what = (m.group("what") if m else msg.split("CUDA error", 1)[1]).strip(" :")[:200]
        kind = "ecc_error" if "ECC" in what else "cuda_error"
        f: dict[str, Any] = {"what": what}
        on = _ON_RANK.search(msg)
        if on:
            f["msg_rank"] = int(on.group("r"))
        return kind, f
    if "ECC error" in msg:
        return "ecc_error", {"what": msg[:200]}
    return None


def _torchrun_agent(msg: str) -> Result:
    """torchrun/elastic agent: failed workers, summaries, signals, success."""
    if "failed (exitcode: " in msg:
        m = _RX["tr_failed"].search(msg)
        if m:
            return "torchrun_failed", {
                "exitcode": int(m.group("code")),
                "local_rank": int(m.group("lr")),
                "pid": int(m.group("pid")),
            }
        return "torchrun_failed", {}
    if "Root Cause (first observed failure)" in msg:
        return "torchrun_root_marker", {}
    m = _RX["tr_field"].match(msg)
    if m and ("      : " in msg or "  : " in msg or "error_file:" in msg or "traceback : " in msg):
        return "torchrun_field", {"key": m.group("k"), "value": m.group("v").strip()}
    if "closing signal" in msg:
        m = _RX["closing"].search(msg)
        return "sigterm_sent", ({"pid": int(m.group("pid")), "signal": m.group("sig")} if m else {})
    if "death signal, shutting down workers" in msg:
        m = _RX["death"].search(msg)
        return "agent_signal", ({"signal": m.group("sig")} if m else {})
    if "worker group finished" in msg or "(SUCCEEDED)" in msg:
        return ("run_succeeded" if "SUCCEEDED" in msg else "worker_group_failed"), {}
    if "SignalException" in msg:
        return "agent_signal", {"what": msg[:200]}
    return None


def _nccl_warn_line(msg: str) -> Result:
    """NCCL WARN lines (network, CUDA, mismatch)."""
    if "NCCL WARN" in msg:
        return _nccl_warn(msg)
    return None


_NONFINITE_FOUND = lazy_compile(r"(?:found|[Dd]etected) (?:NaN|nan|Inf|inf)|non-finite|NaN or Inf")
# the tail of every "loss: nan" the loss regex reads: searched first, since that regex's
# open-ended name prefix makes its search try every position (~20 µs a line)
_NONFINITE_VALUE = lazy_compile(r"[=:] *-?(?:nan|NaN|NAN|inf|Inf|INF)\b")


_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_ ")


def _nan_loss(msg: str) -> re.Match[str] | None:
    """``_RX["nan_loss"].search(msg)``, from the non-finite values back: the name before a
    value is the run of name characters that ends at its "=" or ":", and the leftmost match
    is that of the first value whose run reads as a loss. A metrics line has many runs and
    few such values (the search itself costs ~30 µs on mmdet's 650-character line)."""
    for v in _NONFINITE_VALUE.finditer(msg):
        r = v.start()
        while r > 0 and msg[r - 1] in _NAME_CHARS:
            r -= 1
        m = _RX["nan_loss"].match(msg, r)
        if m:
            return m
    return None


def _numerics(msg: str) -> Result:
    """Non-finite loss and NaN/Inf detectors."""
    low = msg.lower()
    if "nan" not in low and "inf" not in low and "non-finite" not in msg:
        return None  # every wording below names one of them
    m = _nan_loss(msg) if "oss" in msg else None
    if m:
        f = {"metric": m.group("name").strip(), "value": m.group("v")}
        it = _RX["iteration"].search(msg) if "iteration" in msg else None
        if it:
            f["step"] = int(it.group("i"))
        return "nan_loss", f
    m = _RX["nan_count"].search(msg)
    if m:
        f = {"nan_iterations": int(m.group("n"))}
        it = _RX["iteration"].search(msg)
        if it:
            f["step"] = int(it.group("i"))
        return "nan_loss", f
    if (
        "found " in msg or "etected " in msg or "non-finite" in msg or "NaN or Inf" in msg
    ) and _NONFINITE_FOUND.search(msg):  # (the literals first: an "INFO" line gets here)
        return "nan_detected", {"what": msg[:200]}
    return None


def _retries(msg: str) -> Result:
    """Retry counters and exhausted retries."""
    m = _RX["retry_frac"].search(msg) if "etr" in msg else None  # "[Rr]etr…"
    if m:
        return "retry", {
            "attempt": int(m.group("k")),
            "max": int(m.group("n")),
            "reason": _reason(msg),
        }
    m = _RX["retry_total"].search(msg)
    if m:
        return "retry", {"remaining": int(m.group("left")), "reason": _reason(msg)}
    if "Max retries exceeded" in msg:
        return "retry_exhausted", {"reason": _reason(msg)}
    return None


_DATA_LOAD = lazy_compile(r"[Dd]ata ?[Ll]oad")
_STORAGE_ERRORS = (
    "Input/output error",
    "No space left on device",
    "Stale file handle",
    "Disk quota exceeded",
)


def _data_and_storage(msg: str) -> Result:
    """Data-loader and file-system errors."""
    if (
        "AISBatchLoaderError" in msg
        or "DataLoader" in msg
        or ("oad" in msg and "ata" in msg and _DATA_LOAD.search(msg))
    ):
        return "data_error", {"what": msg[:300]}
    if _has_any(msg, _STORAGE_ERRORS):
        return "storage_error", {"what": msg[:300]}
    return None


def _nccl_error(msg: str) -> Result:
    """NCCL error codes."""
    code = _NCCL_CODE.search(msg)
    if "NCCL error" in msg or code:
        f = {"nccl_code": code.group(0)} if code else {}
        if "remote process exited or there was a network error" in msg:
            f["remote_or_network"] = True
        if "Last error:" in msg:
            last = msg.split("Last error:", 1)[1].strip()
            if last:
                f["last_error"] = last[:300]
        return "nccl_error", f
    return None


def _crash_or_lifecycle(msg: str) -> Result:
    """Segfaults, then checkpoints, LR/batch changes, evaluation, restarts."""
    if "Segmentation fault" in msg or "Fatal Python error" in msg:
        return "segfault", {"what": msg[:200]}
    lc = _lifecycle(msg)
    if lc is not None:
        return lc
    return None


# lines joining two tracebacks into one failure: Python's exception chaining, and
# torch.multiprocessing re-raising a spawned process's own traceback
_CHAIN_WORDS = (
    "exception was the direct cause of the following",
    "During handling of the above exception",
    "terminated with the following error",
)


def _exceptions(msg: str) -> Result:
    """Python exceptions and tracebacks."""
    # the regex needs "…Error: " or "…Exception: "; most lines have neither
    has_type = "Error: " in msg or "Exception: " in msg
    m = _RX["exception"].search(msg) if has_type else None
    if m:
        etype = m.group("type")
        return "python_exception", {
            "type": etype.rsplit(".", 1)[-1],
            "qualified": etype,
            "message": m.group("msg")[:300],
        }
    if "Traceback (most recent call last)" in msg:
        return "traceback", {}
    if _has_any(msg, _CHAIN_WORDS):
        return "exception_chain", {}  # the next traceback continues this one
    return None


_CONNECTION_ERRORS = (
    "Connection reset by peer",
    "Connection refused",
    "Broken pipe",
    "No route to host",
    "Read timed out",
)


def _connection_or_success(msg: str) -> Result:
    """Connection errors, and the success markers of a finished run."""
    if _has_any(msg, _CONNECTION_ERRORS):
        return "connection_error", {"reason": _reason(msg)}
    if (
        "raining completed" in msg
        or "raining finished" in msg
        or "raining done" in msg
        or "after training is done" in msg  # Megatron's "[after training is done] datetime: …"
        or "` reached" in msg
    ):
        return "run_succeeded", {}
    return None


# Everything else, most specific first: the first reader that knows the message wins.
_OTHER_READERS = (
    _collectives_and_gpu,
    _memory,
    _scheduler,
    _cuda,
    _torchrun_agent,
    _nccl_warn_line,
    _numerics,
    _retries,
    _data_and_storage,
    _nccl_error,
    _crash_or_lifecycle,
    _exceptions,
    _connection_or_success,
)


def _classify_other(msg: str) -> Result:
    for read in _OTHER_READERS:
        r = read(msg)
        if r is not None:
            return r
    return None


_STEP_IN = lazy_compile(
    r"(?:at |from |iteration|global_step|global step|step[=_ ]|checkpoint-)\s*(?P<s>\d+)"
)
_LR_TO = lazy_compile(r"learning rate(?: of group \d+)? to (?P<v>\d[\d.]*(?:[eE][+-]?\d+)?)")
_BS_TO = lazy_compile(r"atch size changed to (?P<v>\d+)")


def _step_of(msg: str) -> dict[str, Any]:
    m = _STEP_IN.search(msg)
    return {"step": int(m.group("s"))} if m else {}


# checkpoint wordings (Megatron, DeepSpeed, HF Trainer, Lightning/NeMo), in the order tried
_CHECKPOINTS = (
    (
        "checkpoint_saved",
        ("uccessfully saved checkpoint", "is ready now", ", saving model to ", "aved checkpoint"),
    ),
    (
        "checkpoint_save",
        (
            "aving checkpoint at iteration",
            "Saving model checkpoint",
            "aving checkpoint",
            "aving latest checkpoint",
        ),
    ),
    (
        "checkpoint_loaded",
        (
            "oading checkpoint from",
            "uccessfully loaded checkpoint",
            "Restoring states from the checkpoint",
        ),
    ),
)


def _lifecycle(msg: str) -> Result:
    """Checkpoint save/load, LR/batch-size change, evaluation, worker-group restart
    (Megatron, DeepSpeed, HF Trainer, Lightning/NeMo, PyTorch schedulers, torchrun)."""
    if "checkpoint" in msg or "is ready now" in msg or ", saving model to " in msg:
        # (every other checkpoint wording says "checkpoint")
        for kind, wordings in _CHECKPOINTS:
            if _has_any(msg, wordings):
                return kind, _step_of(msg)
    if "educing learning rate" in msg or "Adjusting learning rate of group" in msg:
        m = _LR_TO.search(msg)
        return "lr_change", ({"lr": float(m.group("v"))} if m else {})
    if "atch size changed to" in msg:
        m = _BS_TO.search(msg)
        return "batch_size_change", ({"batch_size": int(m.group("v"))} if m else {})
    if "validation loss at iteration" in msg or "Running Evaluation" in msg:
        return "eval", _step_of(msg)
    if "Restarting worker group" in msg or "will restart worker group" in msg:
        return "restart", {"what": msg[:200]}
    return None


def _reason(msg: str) -> str:
    for s in (
        "Connection reset by peer",
        "Connection refused",
        "Broken pipe",
        "No route to host",
        "Read timed out",
        "timed out",
        "Connection aborted",
    ):
        if s in msg:
            return s
    return ""


def _nccl_warn(msg: str) -> Result:
    body = msg.split("NCCL WARN", 1)[1].strip()
    f: dict[str, Any] = {"what": body[:300]}
    m = NCCL_HOST.search(msg)
    if m:
        f["nccl_host"] = m.group("host")
        f["cuda_device"] = int(m.group("dev"))
    if "Mismatched collective" in body:
        return "collective_mismatch", f
    low = body.lower()
    if (
        any(
            s in body
            for s in (
                "NET/",
                "IB",
                "ibv_",
                "Socket",
                "socket",
                "peer",
                "Connection",
                "mlx5",
                "RoCE",
            )
        )
        or "network" in low
    ):
        if any(p in body for p in _PEER_CLOSED):
            f["peer_closed"] = True
        return "network_error", f
    if "cuda" in low:
        return "cuda_error", f
    return "nccl_warn", f
