"""The verdict: triage (shape, category, severity, scope, when, confidence, summary),
culprit ranks/hosts, the root-cause chain, the timeline and recommendations.

Category names the root cause, not the loudest symptom: the earliest causal
event wins; a specific local cause (OOM, Xid, NaN, mismatch, data, storage,
scheduler) beats NCCL network errors unless those are clearly earlier (they
are usually the echo of a peer that died). With no error at all, the NCCL
state decides: a straggler (DATA when its own lines show a data-loading
symptom, else UNKNOWN) or every rank inside the collective (NETWORK).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._lazy import lazy_compile
from ..envelope import peel
from ..model import Event, evidence
from ..signatures import BY_ID, exception_rule
from ..times import etime, seconds_between
from . import Context, register_analyzer
from .activity import activity_hang
from .advice import recommendations, summary
from .chain import apply_chain
from .nccl import quotable

NON_FATAL = {"data_error", "storage_error", "retry_exhausted", "connection_error", "retry"}
DATA_SYMPTOMS = {"data_error", "retry", "connection_error", "retry_exhausted", "storage_error"}
FATAL = {
    "torchrun_failure",
    "teardown",
    "fatal_terminate",
    "watchdog_timeout",
    "watchdog_failure",
    "slurm_time_limit",
    "torchrun_failed",
    "worker_group_failed",
}


# exceptions that echo a failure elsewhere (a peer's, the agent's summary of a worker's)
_ECHO_TYPES = {"DistBackendError", "ChildFailedError", "DistStoreError", "SignalException"}
# messages that echo a failure elsewhere: a collective's or the framework's reaction to a
# rank that died first (Horovod shuts every rank down after one rank's exception)
_ECHO_WORDS = lazy_compile(r"NCCL|Watchdog|Horovod has been shut down")
# an exception this close to the end of its file is what the process died of
_TAIL_LINES = 300


# -- crash or hang ---------------------------------------------------------------------
# A failure is a CRASH when some process exited or was killed because of it, a HANG when
# progress stopped and nothing exited by itself. The rule looks for *exit evidence* at or
# after the root cause (on the root's own line, later in its file, or in any other file):
#   - an uncaught exception (``SomeError: …`` / ``Exception: …``), a segfault or abort;
#   - an exit summary (torchrun ``failed (exitcode: …)``, ``ChildFailedError``, the agent
#     sending or receiving a signal, a failed worker group);
#   - a kill: the kernel or cgroup OOM killer, Kubernetes eviction, the scheduler ending
#     the job because of the root cause itself (time limit, preemption, node failure);
#   - a message programs print as they give up (``Exiting``, ``exit code``, ``core dumped``).
# Not exit evidence — the job hung and something else ended the wait:
#   - a timeout waiting on peers (the NCCL watchdog, a store ``Socket Timeout``, an exit
#     barrier), and the aborts and exit summaries that follow a collective timeout;
#   - a person cancelling the job (``CANCELLED AT`` without ``DUE TO``), or the scheduler
#     ending a job whose root cause was something else (a stuck job reaching its limit).
# So Xid/AER lines in dmesg, an nvidia-smi reading, an NCCL WARN or a retry loop that the
# log simply stops after are a hang; the same lines followed by a traceback are a crash.
# A GPU that fell off the bus mid-job (Xid 79) is the exception: its processes lost their
# device, none can go on waiting on it.
_EXIT_KINDS = {
    "python_exception",
    "traceback",
    "segfault",
    "fatal_terminate",
    "teardown",
    "watchdog_exit",
    "torchrun_failure",
    "torchrun_failed",
    "worker_group_failed",
    "agent_signal",
    "sigterm_sent",
    "host_oom_kill",
    "collective_mismatch",  # NCCL's / torch's check fails the call: the rank raises
}
# exits that follow a collective timeout are the watchdog's (or the agent's) reaction to it
_REACTION_KINDS = {
    "fatal_terminate",
    "teardown",
    "torchrun_failure",
    "torchrun_failed",
    "worker_group_failed",
    "agent_signal",
    "sigterm_sent",
}
_COLLECTIVE_TIMEOUTS = (
    "watchdog_timeout",
    "watchdog_failure",
    "blocking_wait_timeout",
    "watchdog_hang",
)
# the scheduler ended the job: exit evidence only when that is the root cause itself
_SCHEDULER_KILLS = {"slurm_time_limit", "slurm_preempted", "node_fail"}
# the scheduler ended a job that was still running: its clock, or a person
_SCHEDULER_ENDS = {"slurm_time_limit", "slurm_cancelled"}
# a raised exception as Python, PyTorch (``CUDA error: …`` is a RuntimeError's text), an
# OSError's own text (``[Errno 5] …``) and error files (``"message": "XError: …"``) print it
_RAISED = lazy_compile(
    r"(?:^|[\s:\]>|\"'(])(?:[A-Za-z_][\w.]*(?:Error|Exception)|Exception|[a-z_]\w*\.error)"
    r"(?:: |$)|CUDA error: |\[Errno \d+\] "
    # the text of the exception ProcessGroupNCCL raises when an NCCL call returns an error,
    # also when the program prints it itself ("... e= NCCL error in: …")
    r"|NCCL error in: \S+:\d+, "
)
_EXIT_WORDS = lazy_compile(
    r"\bExiting\b|\bexit(?:ed)? (?:with )?(?:code|status)[ :=]*(?!0\b)-?\d|exitcode\s*:?\s*(?!0\b)-?\d"
    r"|core dumped|\bAborted\b"
    r"|terminate called|terminated with exception|being killed|Killed process|OOM Killed"
    r"|oom[-_]kill|\b[Ee]victed\b|killed by signal|: task \d+: Killed|Assertion `.*` failed"
    r"|Failed, NCCL error|(?:Test )?NCCL failure \S+:\d+ '"
)
# NCCL's CUDACHECK ("Cuda failure '…'") returns ncclUnhandledCudaError from the NCCL call;
# printed by the process's main thread (NCCL's ``host:pid:tid``, tid = pid) the call was the
# program's own (PyTorch enqueues collectives there) and the error is raised in it at once.
# Frameworks that call NCCL from a background thread (Horovod, TensorFlow) may just stop.
_NCCL_MAIN_THREAD_CUDA_FAILURE = lazy_compile(
    r":(\d+):(\d+) \[\d+\] \S+:\d+ NCCL WARN Cuda failure "
)
# a logging level word before the exception: the program logged it and went on
_LOGGED = lazy_compile(r"(?:^|[\s\[:|-])(?:WARNING|WARN|INFO|DEBUG)(?:[\]\s:|-]|$)")
# Xid 45: the driver tore down the GPU channels of a process that was ending; Xid 79: the
# GPU left the bus while the driver ran — every later CUDA call of the processes on it fails
# (the device is gone until a reset), so they end (not printed at probe, where no job ran)
_EXIT_XIDS = {45, 79}
_WAIT_TIMEOUT = lazy_compile(
    r"Socket Timeout|[Tt]imed out waiting|[Ww]ait timeout|exit barrier"
    r"|collective operation timeout|Read timeout \["  # gloo's collective timeout
    r"|Application timeout caused pair closure"  # gloo's pair closed by that timeout
)


# a one-element collective: a barrier or a metric sync
_ONE_ELEMENT = lazy_compile(r"NumelIn=1, NumelOut=1\b")
# torch.multiprocessing.spawn re-raising a child's error in the parent's output
_SPAWNED_CHILD = lazy_compile(r"-- Process (?P<n>\d+) terminated with the following error")

# an abort prints its reason after it ("terminate called …", "what(): …", NCCL's "Last error:"
# block): an exit line this close before the root is the same message
_ABORT_BLOCK = 8


def _exit_line(e: Event) -> bool:
    """``e``'s own line says a process ended (not a timeout waiting on peers)."""
    if _WAIT_TIMEOUT.search(e.text):
        return False
    if e.kind == "xid":
        return e.fields.get("xid") in _EXIT_XIDS
    sig = BY_ID.get(str(e.fields.get("sig"))) if "sig" in e.fields else None
    if sig is not None and sig.category is None and sig.shape == "crash":
        return True  # a catalogued "process ended" symptom (signatures.py)
    if e.kind in _EXIT_KINDS - {"python_exception"} or _EXIT_WORDS.search(e.text):
        return True
    nccl = _NCCL_MAIN_THREAD_CUDA_FAILURE.search(e.text)
    if nccl is not None and nccl.group(1) == nccl.group(2):
        return True
    # the program's own words: a log viewer's or launcher's columns in front are not its level
    msg = peel(e.text).message
    m = _RAISED.search(msg)
    if m is None and e.kind != "python_exception":
        return False
    # an exception logged at warning/info level was caught (a retry, a fallback)
    logged = m is not None and _LOGGED.search(msg[: m.start()])
    return e.level not in ("W", "I", "D") and not logged


def exit_evidence(ctx: Context, root: Event) -> Event | None:
    """The first line proving that a process exited or was killed because of ``root``
    (``root`` itself when its own line does), or None: the job hung."""
    quiet = _quiet_proxy_files(ctx)
    if root.kind in _SCHEDULER_KILLS or (_exit_line(root) and not _stays_in_proxy(root, quiet)):
        return root
    timed_out = bool(ctx.kinds(*_COLLECTIVE_TIMEOUTS))
    closing: dict[str, tuple[list[int], list[Event]]] | None = None
    for x in ctx.events:
        if x.file == root.file and x.line <= root.line - _ABORT_BLOCK:
            continue
        if _stays_in_proxy(x, quiet):
            continue
        if x.kind in ("slurm_cancelled", *_SCHEDULER_KILLS):
            continue  # a person, or the clock, ended a job that was already stuck
        if timed_out and (x.kind in _REACTION_KINDS or x.fields.get("type") in _ECHO_TYPES):
            continue
        if x.kind == "traceback":
            closing = closing if closing is not None else _exceptions_by_file(ctx)
            if _closed_by_wait_timeout(closing, x):
                continue  # a logged traceback of a barrier/store wait that timed out
        if _exit_line(x):
            return x
    return None


# NCCL <= 2.12 tags the error-return trace of its proxy thread "[Proxy Thread]"; those
# releases report a proxy error to nobody: the collective just never completes
_NCCL_RETURN_THREAD = lazy_compile(r":(\d+):(\d+) \[\d+\] (?:NCCL )?INFO \S+:\d+ -> [1-9]")


def _quiet_proxy_files(ctx: Context) -> set[str]:
    """Files whose NCCL error-return traces end in the old proxy thread."""
    return {
        e.file
        for e in ctx.by_kind.get("signature", [])
        if e.fields.get("sig") == "nccl-error-return" and e.text.rstrip().endswith("[Proxy Thread]")
    }


def _stays_in_proxy(e: Event, quiet: set[str]) -> bool:
    """An NCCL error-return line of a background thread (tid ≠ pid) in a file of such a
    release: the error stayed in NCCL's threads, the process did not end on it."""
    if e.file not in quiet or e.fields.get("sig") != "nccl-error-return":
        return False
    m = _NCCL_RETURN_THREAD.search(e.text)
    return m is not None and m.group(1) != m.group(2)


def _exceptions_by_file(ctx: Context) -> dict[str, tuple[list[int], list[Event]]]:
    out: dict[str, tuple[list[int], list[Event]]] = {}
    for x in sorted(ctx.by_kind.get("python_exception", []), key=lambda e: (e.file, e.line)):
        lines, evs = out.setdefault(x.file, ([], []))
        lines.append(x.line)
        evs.append(x)
    return out


def _closed_by_wait_timeout(closing: dict[str, tuple[list[int], list[Event]]], tb: Event) -> bool:
    """The exception that ends traceback ``tb`` (the next one in its file) is a wait timeout."""
    lines, evs = closing.get(tb.file, ([], []))
    i = bisect.bisect_right(lines, tb.line)
    return i < len(evs) and bool(_WAIT_TIMEOUT.search(evs[i].text))


def _alive_after_nccl_return(ctx: Context, ended: Event) -> bool:
    """The only exit evidence is NCCL's error-return trace, and a stack was taken from a
    process of the job that was still running (gdb attached to it): the error stayed in a
    background thread and the process waited instead of raising it."""
    if ended.fields.get("sig") != "nccl-error-return":
        return False
    return any(
        x.fields.get("sig") == "live-process-stack" for x in ctx.by_kind.get("signature", [])
    )


def _ended_symptoms(ctx: Context) -> list[Event]:
    """Lines a catalogue symptom says end a process (category None, shape crash)."""
    out = []
    for e in ctx.by_kind.get("signature", []):
        sig = BY_ID.get(str(e.fields.get("sig")))
        if sig is not None and sig.category is None and sig.shape == "crash":
            out.append(e)
    return out


# readings of a raised program/configuration error (not a device fault, a crash in native
# code or a cross-rank check that names ranks)
_PROGRAM_ERROR_KINDS = {"python_exception", "signature", "traceback"}


def _network_culprits(
    ctx: Context, v: Verdict, sig: Any, ranks: list[int], hosts: list[str], same: list[Event]
) -> None:
    """A fabric error is seen from both ends (nobody to blame); a local setup failure
    (``local``: its own NIC, port, provider) that only some ranks or hosts log is theirs."""
    nccl = ctx.facts.nccl
    own = sig is not None and sig.local and ranks and len(ranks) < 0.5 * _job_size(ctx)
    v.culprit_ranks = ranks[:64] if own else []
    all_hosts = set(ctx.doc["job"].get("hosts", {}))
    share = 0.5
    if sig is not None and sig.local:
        # the hosts that log that very line, when some hosts of the job (those the lines
        # name when no rank is tied to one) do not: logged by every host it is shared setup
        hosts = sorted({x.host for x in same if x.fields.get("sig") == sig.id and x.host})
        all_hosts = all_hosts or {x.host for x in ctx.events if x.host}
        share = 1.0
    v.culprit_hosts = (
        hosts if hosts and (own or (all_hosts and len(set(hosts)) < share * len(all_hosts))) else []
    )
    v.extra["all_in_collective"] = nccl.get("all_in_collective")
    v.confidence = max(v.confidence, 0.8 if nccl.get("all_in_collective") else 0.6)


def _same_oom_on_several_ranks(causes: list[dict[str, Any]], e: Event, ranks: list[int]) -> bool:
    """Two or more ranks ran out of CUDA memory asking for the same allocation size; in a
    log without rank prefixes, two or more GPUs the messages name (``GPU 3``) on a host."""
    if e.kind != "cuda_oom" or (len(ranks) < 2 and e.rank is not None):
        return False
    ooms = [
        c["event"]
        for c in causes
        if c["event"].kind == "cuda_oom" and (c["event"].rank in ranks if ranks else True)
    ]
    if ranks:
        who = {x.rank for x in ooms}
    else:  # no rank known: the device each message names, on the host that printed it
        who = {(x.host, x.fields.get("gpu")) for x in ooms if x.fields.get("gpu") is not None}
    tried = {x.fields.get("tried") for x in ooms}
    return len(who) >= 2 and len(tried) == 1 and None not in tried


def _report_host(ended: list[Event], e: Event) -> str | None:
    """A launcher's report spread over lines (Hydra's ``PID … RUNNING AT host`` above its
    ``EXIT CODE``) names the host on a line of its own just above the kill."""
    for x in ended:
        if x.file == e.file and 0 < e.line - x.line <= 2 and x.fields.get("host"):
            return str(x.fields["host"])
    return None


def _same_on_every_rank(e: Event) -> bool:
    """A program error every rank would raise alike — unless the message itself names the
    rank it is about (NCCL's "around rank N", DDP's "did not receive grad for rank N")."""
    names_rank = e.fields.get("around_rank") is not None or (
        "sig" in e.fields and "rank" in e.fields
    )
    return e.kind in _PROGRAM_ERROR_KINDS and not names_rank


def _local_few(ctx: Context, sig: Any, ranks: list[int]) -> bool:
    """A signature about the logging process's own state (``local``) logged by fewer than
    half of the job's ranks: those ranks are where it happened, not every rank alike."""
    return bool(sig.local and ranks and len(ranks) < 0.5 * max(_job_size(ctx), 2))


def _job_size(ctx: Context) -> int:
    """How many ranks the job has at least: the ranks seen, the launcher's world size, and
    one more than the highest rank seen (ranks are numbered from 0, so a log that shows
    only ranks 12-14 is of a job of 15 ranks or more)."""
    job = ctx.doc["job"]
    seen = [int(r) for r in job.get("ranks_seen") or []]
    return max(len(seen), max(seen, default=-1) + 1, job.get("world_size") or 0)


def _mutual_mismatch(ctx: Context) -> bool:
    """Two ranks each report the other in a different collective (``Rank 1 is running …, but
    Rank 7 is running …`` and ``Rank 7 is running …, but Rank 1 …``): both sides of one
    disagreement are in the log, and which of them printed under a rank prefix says nothing
    of which one diverged."""
    pairs = {
        (e.fields.get("rank_a"), e.fields.get("rank_b"))
        for e in ctx.by_kind.get("collective_mismatch", [])
        if e.fields.get("rank_a") is not None
    }
    return any((b, a) in pairs for a, b in pairs)


def _first_traceback_end(ctx: Context, file: str, excs: list[Event]) -> Event:
    """The outermost exception of the file's first traceback: a ``Traceback (most recent
    call last)`` header after an exception starts another one (another process's copy, a
    later failure) unless a chain line (``The above exception was the direct cause …``,
    ``During handling of the above exception …``) joins them."""
    marks = sorted(
        (x.line, x.kind) for x in ctx.kinds("traceback", "exception_chain") if x.file == file
    )
    end = excs[0]
    for e in excs[1:]:
        between = {k for ln, k in marks if end.line < ln < e.line}
        if "traceback" in between and "exception_chain" not in between:
            break
        end = e
    return end


# srun's report that a task ended, however it ended (its out-of-memory kill has its own)
_SRUN_TASK_ENDED = frozenset({"srun-task-failed", "srun-task-out-of-memory"})


def _failed_tasks(ctx: Context, e: Event) -> list[int]:
    """The tasks srun reports ended (``srun: error: cn7: task 3: Killed``) in the root's own
    output file: a step's task index is its rank."""
    return sorted(
        {
            x.rank
            for x in ctx.events
            if x.file == e.file and x.fields.get("sig") in _SRUN_TASK_ENDED and x.rank is not None
        }
    )[:64]


def _sole_worker(ctx: Context, e: Event) -> list[int]:
    """The rank the deepspeed launcher's exit report in the root's own file names, in a job
    of one declared worker. The launcher prints the command of the last worker it started
    whichever worker failed, so its ``--local_rank`` names the failed one only when there
    was one."""
    job = ctx.doc["job"]
    if job.get("world_size") != 1 or job.get("world_size_source") not in _WORLD_DECLARED:
        return []
    named = {
        str(x.fields.get("local_rank", ""))
        for x in ctx.events
        if x.file == e.file and x.fields.get("sig") == "deepspeed-launcher-exit"
    }
    return [0] if named == {"0"} else []  # one worker: on one node, local rank 0 is rank 0


def _spawned_process(ctx: Context, e: Event) -> list[int]:
    """The child torch.multiprocessing.spawn names above the traceback the root belongs to
    (``-- Process 3 terminated with the following error:``): the launchers that spawn one
    process per GPU (detectron2, fairseq, mmcv) pass the child's index as its local rank,
    the global rank when the logs show no second node."""
    if e.rank is not None or ctx.doc["job"].get("nodes") not in (None, 1):
        return []
    above = [
        x
        for x in ctx.kinds("exception_chain")
        if x.file == e.file and x.line < e.line and _SPAWNED_CHILD.search(x.text)
    ]
    if not above:
        return []
    m = _SPAWNED_CHILD.search(max(above, key=lambda x: x.line).text)
    return [int(m.group("n"))] if m else []


def _slurm_host(ctx: Context, e: Event) -> list[str]:
    """SLURM's own lines in the same output file name the node ("*** JOB 42 ON cn-a07
    CANCELLED …"): a scheduler-reported failure without a host happened there."""
    if ctx.doc["job"].get("nodes") not in (None, 1) or e.rank is not None:
        return []
    hosts = {
        str(x.fields["host"])
        for x in ctx.events
        if x.file == e.file and x.kind.startswith(("slurm_", "node_fail")) and x.fields.get("host")
    }
    return sorted(hosts) if len(hosts) == 1 else []


def _died_after(ctx: Context, e: Event) -> bool:
    """The rank of ``e`` died of its own exception after it (not of the watchdog's abort)."""
    for x in ctx.events:
        if x.kind not in ("python_exception", "segfault") or x.file != e.file or x.line <= e.line:
            continue
        msg = str(x.fields.get("message", ""))
        if x.fields.get("type") in _ECHO_TYPES or "NCCL" in msg or "Watchdog" in msg:
            continue
        if x.rank is None or e.rank is None or x.rank == e.rank:
            return True
    return False


def _launcher_rank(ctx: Context, e: Event) -> int | None:
    """The rank a launcher's exit report names: its own rank, else the local rank it
    names (torchrun's ``local_rank: N``, deepspeed's ``--local_rank=N``) when the job ran
    on one node, where the local rank is the global one."""
    if e.rank is not None:
        return e.rank
    local = str(e.fields.get("local_rank", ""))
    if local.isdigit() and ctx.doc["job"].get("nodes") == 1:
        return int(local)
    return None


def _single_node(ctx: Context) -> str | None:
    """The one host every rank of the job runs on, when the logs say so: a world size
    declared by the job or NCCL (not guessed from the ranks seen) whose ranks all map to
    that host."""
    job = ctx.doc["job"]
    hosts = job.get("hosts") or {}
    world = job.get("world_size")
    if len(hosts) != 1 or not world or job.get("world_size_source") not in _WORLD_DECLARED:
        return None
    host, ranks = next(iter(hosts.items()))
    return host if len(set(ranks)) == world else None


_WORLD_DECLARED = {"WORLD_SIZE", "world size", "Lightning MEMBER", "NCCL nranks"}


def _decided_by(v: Verdict) -> str | None:
    if v.shape == "none":
        return None
    if v.root is not None and "sig" in v.root.fields:
        return f"signature {v.root.fields['sig']}"
    if v.root is not None and v.root.kind == "python_exception":
        t = str(v.root.fields.get("type", ""))
        rule = exception_rule(t, str(v.root.fields.get("message", "")))
        return f"exception table: {t} → {rule.category} ({rule.why})"
    if v.root is not None:
        return f"rule on {v.root.kind} lines"
    return "rule on metrics"


@dataclass
class Verdict:
    shape: str = "none"
    category: str = "UNKNOWN"
    confidence: float = 0.0
    root: Event | None = None
    root_label: str = ""
    culprit_ranks: list[int] = field(default_factory=list)
    culprit_hosts: list[str] = field(default_factory=list)
    scope: str = "unknown"
    chain: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


def _earlier(a: str | None, b: str | None, seconds: float = 60.0) -> bool:
    """True when ``a`` is at least ``seconds`` before ``b`` (ISO strings, same year)."""
    gap = seconds_between(a, b)
    return gap is not None and gap >= seconds


def _host_spelling(ctx: Context, hosts: list[str]) -> list[str]:
    """Host names are case-insensitive: a node a scheduler's node list spells with capitals
    (srun's ``Node-01-01``) is the machine that names itself in lower case elsewhere in
    the job (slurmstepd's ``node-01-01``); report that one spelling."""
    if all(h == h.lower() for h in hosts):
        return hosts
    lower = {e.host for e in ctx.events if e.host and e.host == e.host.lower()}
    return [h.lower() if h.lower() in lower else h for h in hosts]


def _by_time(causes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Earliest first, to the second: a stamp without a fraction ("18:11:41") is no earlier
    than one with it ("18:11:41.302"); within a second the stronger line, then the one
    printed first."""
    return sorted(
        causes,
        key=lambda c: (
            (etime(c["event"]) or "9999")[:19],
            -c["strength"],
            c["event"].file,
            c["event"].line,
        ),
    )


def _pick_cause(
    specific: list[dict[str, Any]], network: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """The earliest strong specific cause; a network cause only when clearly earlier
    (network errors are usually the echo of a peer that died)."""
    if specific:
        pick = _by_time([c for c in specific if c["strength"] >= 0.75] or specific)[0]
        if network:
            first_net = _by_time(network)[0]
            if _earlier(etime(first_net["event"]), etime(pick["event"])):
                return first_net
        return pick
    return _by_time(network)[0] if network else None


def _slow_metrics(ctx: Context, met: dict[str, Any]) -> bool:
    return bool(
        met.get("slowdown")
        or met.get("slow_hosts")
        or (met.get("throughput_drop") or 0) >= ctx.options.throughput_drop
    )


@dataclass
class _Situation:
    """What the decision rules look at, gathered once."""

    causes: list[dict[str, Any]]
    nccl: dict[str, Any]
    met: dict[str, Any]
    succeeded: bool
    fatal: bool
    specific: list[dict[str, Any]]  # strong causes other than the network
    network: list[dict[str, Any]]  # strong network causes
    exhausted: list[Event]
    stragglers: list[int]
    # catalogued "a process ended" symptoms (mpirun's signal report, nccl-tests' failure,
    # an abort): a failure happened even when no line names its cause
    ended: list[Event]

    @classmethod
    def of(cls, ctx: Context) -> _Situation:
        causes = ctx.facts.causes
        strong = [c for c in causes if c["strength"] >= 0.5]
        return cls(
            ended=_ended_symptoms(ctx),
            causes=causes,
            nccl=ctx.facts.nccl,
            met=ctx.facts.metrics,
            succeeded=bool(ctx.by_kind.get("run_succeeded")),
            fatal=any(ctx.by_kind.get(k) for k in FATAL),
            specific=[c for c in strong if c["category"] != "NETWORK"],
            network=[c for c in strong if c["category"] == "NETWORK"],
            exhausted=ctx.facts.retry_exhausted,
            stragglers=ctx.facts.nccl.get("stragglers", []),
        )


class _Chain:
    """Steps of the root-cause chain; an evidence line is quoted once."""

    def __init__(self) -> None:
        self.steps: list[dict[str, Any]] = []

    def add(self, e: Event | None, what: str, rank: int | None = None) -> None:
        if e is None:
            return
        if any(
            c["evidence"]
            and c["evidence"][0]["line"] == e.line
            and c["evidence"][0]["file"] == e.file
            for c in self.steps
        ):
            return
        self.steps.append(
            {
                "time": etime(e),
                "rank": e.rank if rank is None else rank,
                "event": what,
                "evidence": [evidence(e)],
            }
        )

    def in_time_order(self) -> list[dict[str, Any]]:
        """In time order; steps without any time keep their place after the root."""
        chain = self.steps

        def second(c: dict[str, Any]) -> str:
            # to the second (stamps differ in precision); a tie keeps the order of the steps
            return (c["time"] or "9999")[:19]

        if chain and chain[0]["time"]:
            chain.sort(key=second)
            return chain
        rest = chain[1:]
        rest.sort(key=second)
        return chain[:1] + rest


class VerdictAnalyzer:
    name = "verdict"
    phase = "root_cause"
    order = 90
    reads = (
        "events",
        "doc.job",
        "facts.causes",
        "facts.nccl",
        "facts.metrics",
        "facts.retry_exhausted",
        "facts.torchrun_first",
        "facts.rank_host",
        "facts.job_start",
        "facts.last_step",
        "facts.chain",
    )
    writes = (
        "doc.triage",
        "doc.root_cause",
        "doc.timeline",
        "doc.recommendations",
        "facts.culprit_ranks",
        "facts.culprit_hosts",
        "findings",
    )

    def run(self, ctx: Context) -> None:
        v = self._decide(ctx)
        v.culprit_hosts = _host_spelling(ctx, v.culprit_hosts)
        job = ctx.doc["job"]
        world = job.get("world_size") or len(job.get("ranks_seen", []))
        v.scope = self._scope(ctx, v, world)
        when = self._when(ctx, v)
        severity = {
            "crash": "CRITICAL",
            "hang": "CRITICAL",
            "diverge": "CRITICAL",
            "slow": "WARNING",
        }.get(v.shape, "OK")
        v.chain = self._chain(ctx, v)
        t = ctx.doc["triage"]
        t.update(
            shape=v.shape,
            category=v.category,
            severity=severity,
            scope=v.scope,
            when=when,
            confidence=round(v.confidence, 2),
        )
        t["summary"] = summary(ctx, v)
        ctx.facts.culprit_ranks = sorted(set(v.culprit_ranks))
        ctx.facts.culprit_hosts = sorted(set(v.culprit_hosts))
        rc = {
            "category": v.category,
            "summary": t["summary"] if v.shape != "none" else "",
            "chain": v.chain,
            "trigger": v.root_label or None,
            "decided_by": "; ".join(
                x
                for x in (v.extra.get("decided_by") or _decided_by(v), v.extra.get("shape_rule"))
                if x
            )
            or None,
        }
        timeline = self._timeline(ctx)
        apply_chain(ctx, t, rc, timeline)
        ctx.doc["root_cause"] = rc
        ctx.doc["recommendations"] = recommendations(ctx, v)
        ctx.doc["timeline"] = timeline
        if v.root is not None and v.shape != "none":
            ctx.add_finding(
                phase="root_cause",
                kind="root_cause",
                title=f"Root cause: {v.root_label}",
                detail=t["summary"],
                confidence=v.confidence,
                ranks=v.culprit_ranks,
                hosts=v.culprit_hosts,
                evidence_events=[v.root],
                category=v.category,
            )

    # -- decision ---------------------------------------------------------
    # The verdict is the first rule, in this order, that applies (``_DECISION_RULES`` at the
    # end of the class): a finished job is healthy or slow; a cause logged by some rank beats
    # the NCCL state; without a cause the metrics, the collectives' state and the way the
    # processes ended decide.
    def _decide(self, ctx: Context) -> Verdict:
        s = _Situation.of(ctx)
        for _name, rule in _DECISION_RULES:
            v = rule(self, ctx, s)
            if v is not None:
                return v
        return Verdict(shape="none", category="UNKNOWN", confidence=0.5)

    def _rule_finished(self, ctx: Context, s: _Situation) -> Verdict | None:
        if not s.succeeded or s.fatal:
            return None
        if _slow_metrics(ctx, s.met):
            return self._slow(ctx, s.met)
        return Verdict(shape="none", category="UNKNOWN", confidence=0.8)

    def _rule_no_exit_after_finish(self, ctx: Context, s: _Situation) -> Verdict | None:
        # Training printed that it finished, then only the scheduler ended the job (time
        # limit, scancel): the processes hung at exit (a teardown that never returned). The
        # time limit is what ended the hang, not what cut the training short.
        kills = ctx.kinds(*_SCHEDULER_ENDS)
        if not s.succeeded or not kills:
            return None
        if any(ctx.by_kind.get(k) for k in FATAL - _SCHEDULER_ENDS):
            return None
        if [c for c in s.causes if c["strength"] >= 0.5 and c["event"].kind not in _SCHEDULER_ENDS]:
            return None
        done = ctx.kinds("run_succeeded")[0]
        kill = kills[0]
        t_done, t_kill = etime(done), etime(kill)
        before = (
            done.line < kill.line
            if done.file == kill.file
            else (t_done is not None and t_kill is not None and t_done <= t_kill)
        )
        if not before:
            return None
        return Verdict(
            shape="hang",
            category="SOFTWARE",
            confidence=0.6,
            root=done,
            root_label="training finished but the processes never exited; the scheduler ended them",
            extra={
                "decided_by": "rule: the run printed that training finished, then only the "
                "scheduler ended the job"
            },
        )

    def _rule_causes_on_stragglers(self, ctx: Context, s: _Situation) -> Verdict | None:
        # every specific cause sits on a straggler: the job hung waiting for it
        if s.stragglers and not [
            c
            for c in s.specific
            if c["category"] not in ("DATA", "STORAGE_IO", "SOFTWARE")
            or c["event"].rank not in s.stragglers
        ]:
            return self._straggler(ctx, s.stragglers)
        return None

    def _rule_earliest_cause(self, ctx: Context, s: _Situation) -> Verdict | None:
        pick = _pick_cause(s.specific, s.network)
        return self._from_cause(ctx, pick, s.causes) if pick is not None else None

    def _rule_nan_in_metrics(self, ctx: Context, s: _Situation) -> Verdict | None:
        if s.met.get("nan_step") is None:
            return None
        return Verdict(
            shape="diverge",
            category="NUMERICAL",
            confidence=0.8,
            root_label="loss became NaN/Inf in the metrics",
        )

    def _rule_retries_exhausted(self, ctx: Context, s: _Situation) -> Verdict | None:
        if not s.exhausted:
            return None
        e = s.exhausted[0]
        return Verdict(
            shape="crash",
            category="STORAGE_IO",
            confidence=0.6,
            root=e,
            root_label="retries exhausted",
            culprit_ranks=[e.rank] if e.rank is not None else [],
        )

    def _rule_stragglers(self, ctx: Context, s: _Situation) -> Verdict | None:
        return self._straggler(ctx, s.stragglers) if s.stragglers else None

    def _rule_all_in_collective(self, ctx: Context, s: _Situation) -> Verdict | None:
        if not s.nccl.get("all_in_collective"):
            return None
        rows = [r for r in s.nccl["rows"] if r["role"] == "initiator"]
        return Verdict(
            shape="hang",
            category="NETWORK",
            confidence=0.55,
            root=rows[0]["_ev"] if rows else None,
            root_label="a collective every rank entered never completed",
        )

    def _rule_slow(self, ctx: Context, s: _Situation) -> Verdict | None:
        if _slow_metrics(ctx, s.met) or s.met.get("stragglers"):
            return self._slow(ctx, s.met)
        return None

    def _rule_preprocessing(self, ctx: Context, s: _Situation) -> Verdict | None:
        return self._preprocessing_hang(ctx, s.causes)

    def _rule_watchdog_hung(self, ctx: Context, s: _Situation) -> Verdict | None:
        if not ctx.by_kind.get("watchdog_hang") or ctx.by_kind.get("watchdog_timeout"):
            return None
        return Verdict(
            shape="hang",
            category="SOFTWARE",
            confidence=0.45,
            root=ctx.kinds("watchdog_hang")[0],
            root_label="the NCCL watchdog thread itself stopped making progress (a NCCL/CUDA "
            "call hung inside the process)",
            extra={"decided_by": "rule: heartbeat monitor fired without a collective timeout"},
        )

    def _rule_uncaught(self, ctx: Context, s: _Situation) -> Verdict | None:
        return self._uncaught(ctx, s.fatal)

    def _rule_activity(self, ctx: Context, s: _Situation) -> Verdict | None:
        act = activity_hang(ctx)  # what the job was doing when the collective stalled
        return Verdict(**act) if act is not None else None

    def _rule_first_collective(self, ctx: Context, s: _Situation) -> Verdict | None:
        # The first collective of a process group is where NCCL opens its connections (P2P
        # between the GPUs of a node, the NICs between nodes). When every watchdog that fired
        # waited there, nothing on that group ever completed, no rank is silent or behind and
        # no rank logged a fault, the connection never carried a byte: the interconnect.
        # A one-element collective (a barrier, a metric sync) is excluded: at the first
        # barrier a rank still busy elsewhere (a download, a preprocessing) looks the same.
        rows = [r for r in s.nccl.get("rows", []) if r.get("role") == "initiator"]
        if not rows or s.nccl.get("silent") or s.stragglers or s.nccl.get("ahead"):
            return None
        for r in rows:
            ev = r.get("_ev")
            if r.get("seq") != 1 or (r.get("last_completed") or 0) > 0 or ev is None:
                return None
            if r.get("op") == "BARRIER" or _ONE_ELEMENT.search(ev.text):
                return None
        ev = quotable([r["_ev"] for r in rows])[0]
        host = _single_node(ctx)
        return Verdict(
            shape="hang",
            category="HARDWARE" if host else "NETWORK",
            confidence=0.35,
            root=ev,
            root_label="the first collective of its process group never completed: "
            + (
                f"the GPUs of {host} could not reach each other peer-to-peer (every rank is on "
                "that node)"
                if host
                else "the connections NCCL opens for it (GPU peer-to-peer within a node, the "
                "network between nodes) did not carry it"
            ),
            culprit_hosts=[host] if host else [],
            extra={
                "first_collective": True,
                "decided_by": "rule: every watchdog fired in the first collective (seq 1) of its "
                "group, nothing on it ever completed and no rank logged a fault"
                + ("; every rank on one node: GPU peer-to-peer" if host else ""),
            },
        )

    def _rule_unexplained_timeout(self, ctx: Context, s: _Situation) -> Verdict | None:
        if not (ctx.by_kind.get("watchdog_timeout") or ctx.by_kind.get("watchdog_failure")):
            return None
        ev = quotable(ctx.kinds("watchdog_timeout", "watchdog_failure"))[0]
        network_said = any(
            ctx.by_kind.get(k) for k in ("network_error", "nccl_error", "connection_error")
        )
        return Verdict(
            shape="hang",
            category="UNKNOWN" if network_said else "SOFTWARE",
            confidence=0.3,
            root=ev,
            root_label="collective timeout with no rank explaining it"
            + ("" if network_said else ": most often ranks that took different code paths"),
            culprit_ranks=s.nccl.get("silent", [])[:32],
            extra={
                "decided_by": "rule: a collective timed out and no rank logged a fault of "
                "its own (no NCCL/network, device or process error) — PyTorch's own hint: "
                "collectives issued in a different order or on some ranks only"
            },
        )

    def _rule_sigkill(self, ctx: Context, s: _Situation) -> Verdict | None:
        if not (s.fatal or s.ended):
            return None
        killed = [
            e
            for e in ctx.kinds("torchrun_failure", "torchrun_failed")
            if e.fields.get("exitcode") == -9
        ] + [
            e
            for e in s.ended
            if str(e.fields.get("signal")) in ("9", "SIGKILL")
            or str(e.fields.get("exitcode")) == "-9"
            or e.fields.get("how") == "Killed"  # a shell's or srun's report of SIGKILL
        ]
        if not killed:
            return None
        e = killed[0]
        rank = _launcher_rank(ctx, e)
        host = e.host or _report_host(s.ended, e)
        return Verdict(
            shape="crash",
            category="OOM",
            confidence=0.6,
            root=e,
            root_label="a worker was killed with SIGKILL (signal 9, exit code -9), most often by the "
            "host's OOM killer",
            culprit_ranks=[rank] if rank is not None else [],
            culprit_hosts=[host] if host else [],
            extra={"decided_by": "rule: killed by SIGKILL (signal 9 / exit code -9) → OOM killer"},
        )

    def _rule_failed_unexplained(self, ctx: Context, s: _Situation) -> Verdict | None:
        if not (s.fatal or s.ended):
            return None
        fatal = ctx.kinds(*FATAL)
        root = ctx.facts.torchrun_first or (fatal[0] if fatal else s.ended[0])
        # a symptom that names the rank that ended (mpirun, srun) names the culprit; one that
        # names only the node it lost (Open MPI's daemon, Grid Engine's shepherd) names that
        named = root in s.ended and root.rank is not None
        lost = root in s.ended and root.rank is None and root.fields.get("host")
        return Verdict(
            shape="crash",
            category="UNKNOWN",
            confidence=0.3,
            root=root,
            root_label="processes failed without a recognised cause",
            culprit_ranks=[root.rank] if named and root.rank is not None else [],
            culprit_hosts=[root.host] if named and root.host else [lost] if lost else [],
        )

    def _rule_waited_unexplained(self, ctx: Context, s: _Situation) -> Verdict | None:
        # a catalogued "waited on a peer" symptom (Gloo's or the store's timeout, category
        # None, shape hang) and nothing else: the job hung, on peers the logs do not show. A
        # notice that a wait is long (severity warning: vLLM's after 60 s, XLA's after 10 s)
        # is a hang only when it repeats or is where its log stops — a slow start that goes
        # on prints it once and then its progress
        waits, notices = [], {}
        for e in ctx.events:
            sig = BY_ID.get(str(e.fields["sig"])) if "sig" in e.fields else None
            if sig is None or sig.category is not None or sig.shape != "hang":
                continue
            if sig.severity == "warning":
                notices.setdefault((e.file, sig.id), []).append(e)
            else:
                waits.append(e)
        if notices:
            last_line = {r.name: r.lines for r in ctx.results}
            for seen in notices.values():
                if len(seen) > 1 or seen[-1].line >= last_line.get(seen[-1].file, 0) - 1:
                    waits.extend(seen)
            waits.sort(key=lambda e: (e.file, e.line))
        if not waits:
            return None
        # the ranks such a line names as the ones that never came (Horovod's "missing ranks")
        missing = sorted(
            {int(r) for e in waits for r in re.findall(r"\d+", str(e.fields.get("missing", "")))}
        )
        return Verdict(
            shape="hang",
            category="UNKNOWN",
            confidence=0.3,
            root=next((e for e in waits if e.fields.get("missing")), waits[0]),
            root_label="a process waited on peers that never took part",
            culprit_ranks=missing[:64],
        )

    def _preprocessing_hang(self, ctx: Context, causes: list[dict[str, Any]]) -> Verdict | None:
        """Ranks waited at the first collectives (a barrier) while the main process was still
        preprocessing the dataset: a data-preparation hang on that process."""
        prep = [c for c in causes if c["event"].fields.get("sig") == "dataset-preprocessing"]
        if not prep:
            return None
        waits = ctx.kinds("watchdog_timeout", "watchdog_failure")
        early = [e for e in waits if (e.fields.get("seq") or 0) <= 8]
        store = [
            e
            for e in ctx.kinds("python_exception")
            if "store->get" in str(e.fields.get("message", ""))
            or "Socket Timeout" in str(e.fields.get("message", ""))
        ]
        if not early and not store:
            return None
        last = max((c["event"] for c in prep), key=lambda e: (e.file, e.line))
        if int(last.fields.get("pct", "0")) >= 100:
            return None
        rank = last.rank if last.rank is not None else 0  # the main process prints the bar
        return Verdict(
            shape="hang",
            category="DATA",
            confidence=0.6,
            root=last,
            root_label="dataset preprocessing on the main process outlasted the collective timeout",
            culprit_ranks=[rank],
            extra={
                "decided_by": "rule: first collectives timed out during dataset preprocessing",
                # where the waiting ranks gave up: the proof that they waited on it
                "symptom": min(early + store, key=lambda e: (etime(e) or "9999", e.file, e.line)),
            },
        )

    def _uncaught(self, ctx: Context, fatal: bool) -> Verdict | None:
        """A log that ends in an uncaught exception is a crash: the exception-type table
        decides the category when no signature did (the last exception of the file that
        failed first: the outermost of a chained traceback)."""
        lines = {r.name: r.lines for r in ctx.results}
        ok_files = {e.file for e in ctx.by_kind.get("run_succeeded", [])}
        by_file: dict[str, list[Event]] = {}
        for e in ctx.kinds("python_exception"):
            t = str(e.fields.get("type", ""))
            msg = str(e.fields.get("message", ""))
            if t in _ECHO_TYPES or _ECHO_WORDS.search(msg) or e.file in ok_files:
                continue
            near_end = lines.get(e.file, 0) - e.line <= _TAIL_LINES
            if near_end or fatal:
                by_file.setdefault(e.file, []).append(e)
        if not by_file:
            return None
        first_file = min(by_file, key=lambda f: (etime(by_file[f][0]) or "9999", f))
        evs = sorted(by_file[first_file], key=lambda e: e.line)
        e = _first_traceback_end(ctx, first_file, evs)
        t = str(e.fields.get("type", ""))
        rule = exception_rule(t, str(e.fields.get("message", "")))
        rank_host = ctx.facts.rank_host
        host = rank_host.get(e.rank) if e.rank is not None else None
        everyone = rule.category == "SOFTWARE" and _same_on_every_rank(e)
        # a timeout waiting on peers that the process raised is the hang being detected
        waited = bool(_WAIT_TIMEOUT.search(e.text))
        return Verdict(
            shape="hang" if waited else "crash",
            category=rule.category,
            confidence=min(rule.confidence, 0.6),
            root=e,
            root_label=f"uncaught {t} ({rule.why})",
            culprit_ranks=[e.rank] if e.rank is not None and not everyone else [],
            culprit_hosts=[host or e.host] if (host or e.host) and not everyone else [],
            extra={"decided_by": f"exception table: {t} → {rule.category} ({rule.why})"},
        )

    def _from_cause(
        self, ctx: Context, pick: dict[str, Any], causes: list[dict[str, Any]]
    ) -> Verdict:
        e: Event = pick["event"]
        cat = pick["category"]
        same = [c["event"] for c in causes if c["category"] == cat and c["event"].kind == e.kind]
        # a cause may name its ranks itself (the odd ones out: analyzers/odd_one_out.py)
        ranks = pick.get("ranks") or sorted({x.rank for x in same if x.rank is not None})
        hosts = sorted({x.host for x in same if x.host})
        sig = BY_ID.get(str(e.fields.get("sig")))
        shape, shape_rule = self._cause_shape(ctx, pick, sig)
        v = Verdict(
            shape=shape, category=cat, confidence=pick["strength"], root=e, root_label=pick["label"]
        )
        if shape_rule and shape == ("crash" if shape_rule.startswith("crash") else "hang"):
            v.extra["shape_rule"] = shape_rule
        if pick.get("action"):  # a rule over several lines may say what to do (failures.py)
            v.extra["action"] = pick["action"]
        self._cause_culprits(ctx, v, pick, causes, sig, ranks, hosts)
        return v

    def _cause_shape(self, ctx: Context, pick: dict[str, Any], sig: Any) -> tuple[str, str | None]:
        """How the job ended because of the picked cause, and the crash/hang rule that said so."""
        e: Event = pick["event"]
        cat = pick["category"]
        shape_rule = None
        if cat == "NUMERICAL":
            shape = "diverge"
        elif sig is not None and sig.shape in ("crash", "hang", "diverge"):
            shape = sig.shape  # the message itself says how the job ended
        else:
            ended = exit_evidence(ctx, e)
            if ended is not None and _alive_after_nccl_return(ctx, ended):
                ended = None
            shape = "crash" if ended is not None else "hang"
            lost = ended is not None and ended.kind == "xid" and ended.fields.get("xid") == 79
            shape_rule = (
                f"crash: the GPU fell off the bus ({ended.file}:{ended.line}), the processes "
                "on it lost their device"
                if lost and ended is not None
                else f"crash: a process ended ({ended.file}:{ended.line})"
                if ended is not None
                else "hang: no line says a process exited or was killed because of it"
            )
        if e.kind in NON_FATAL and ctx.by_kind.get("watchdog_timeout") and not _died_after(ctx, e):
            shape = "hang"  # the rank blocked (no crash of its own); the others hung on it
        shape = pick.get("shape") or shape  # a cause may say how the job ended (odd_one_out.py)
        return shape, shape_rule

    def _cause_culprits(
        self,
        ctx: Context,
        v: Verdict,
        pick: dict[str, Any],
        causes: list[dict[str, Any]],
        sig: Any,
        ranks: list[int],
        hosts: list[str],
    ) -> None:
        """Who to blame depends on the category: a host for hardware, nobody for a shared
        program error, the rank itself otherwise."""
        e: Event = pick["event"]
        cat = pick["category"]
        if cat == "HARDWARE":
            rank_host = ctx.facts.rank_host
            on_host = sorted(r for r, h in rank_host.items() if h in hosts)
            errs = sorted(
                {
                    x.rank
                    for x in ctx.kinds("cuda_error", "ecc_error", "nccl_error")
                    if x.host in hosts and x.rank is not None
                }
            )
            hw_ranks = sorted(
                {
                    c["event"].rank
                    for c in causes
                    if c["category"] == "HARDWARE" and c["event"].rank is not None
                }
            )
            v.culprit_ranks = ranks or hw_ranks or errs or on_host
            v.culprit_hosts = hosts
        elif cat == "NETWORK":
            causes_same = [c["event"] for c in causes if c["category"] == cat]
            _network_culprits(ctx, v, sig, ranks, hosts, causes_same)
        elif (
            cat == "NUMERICAL"
            and sig is not None
            and ("rank" in e.fields or _local_few(ctx, sig, ranks))
        ):
            # a per-rank check named (or, for a check of the local graph only some ranks
            # logged, printed under) the rank whose own values went non-finite
            v.culprit_ranks = ranks[:64]
            v.culprit_hosts = hosts
        elif (
            (sig is not None and sig.shared)
            or (cat == "SOFTWARE" and not pick.get("ranks") and _same_on_every_rank(e))
            or (e.kind == "collective_mismatch" and not pick.get("ranks") and _mutual_mismatch(ctx))
        ):
            # a program or configuration error raised in Python (an assertion on shapes, an
            # import, a state dict that does not fit), or a limit every rank shares (a
            # signature's ``shared``): every rank runs the same code with the same settings,
            # the rank whose output shows it is only the one that was printed; likewise a
            # collective mismatch both sides report without a majority (odd_one_out.py)
            v.culprit_ranks, v.culprit_hosts = [], []
        elif cat in ("NUMERICAL", "INFRA") or _same_oom_on_several_ranks(causes, e, ranks):
            # several ranks failing the very same allocation: the model and batch do not fit
            # any GPU of the job (its memory budget), no rank is the one at fault
            v.culprit_ranks = []
            node_named = e.kind == "node_fail" or ("sig" in e.fields and "host" in e.fields)
            v.culprit_hosts = hosts if cat == "INFRA" and node_named else []
        else:
            if not ranks and e.fields.get("around_rank") is not None:
                ranks = [int(e.fields["around_rank"])]  # NCCL names the rank to check
            if not ranks:
                ranks = _failed_tasks(ctx, e)  # srun names the task a kill or exit ended
            if not ranks:
                ranks = _sole_worker(ctx, e)  # a launcher of one worker names it
            if not ranks:
                ranks = _spawned_process(ctx, e)  # mp.spawn re-raised this child's error
            v.culprit_ranks = ranks[:64]
            v.culprit_hosts = (
                sorted({ctx.facts.rank_host.get(r) for r in ranks[:64]} - {None})
                or hosts
                or _slurm_host(ctx, e)
            )

    def _straggler(self, ctx: Context, stragglers: list[int]) -> Verdict:
        rows = [r for r in ctx.facts.nccl["rows"] if r["role"] == "straggler"]
        on = set(stragglers)
        symptoms = [e for e in ctx.events if e.kind in DATA_SYMPTOMS and e.rank in on]
        symptoms += [
            e
            for e in ctx.by_kind.get("python_exception", [])
            if e.rank in on and "DataLoader" in str(e.fields)
        ]
        # only what happened around the stall counts: the collective started timeout_ms before the watchdog fired
        timeouts = [
            e for e in ctx.kinds("watchdog_timeout") if e.time and e.fields.get("timeout_ms")
        ]
        if timeouts:
            t = timeouts[0]
            symptoms = [
                e
                for e in symptoms
                if etime(e) is None
                or (seconds_between(etime(e), t.time) or 0) <= t.fields["timeout_ms"] / 1000 + 600
            ]
        rank_host = ctx.facts.rank_host
        hosts = sorted({rank_host[r] for r in stragglers if r in rank_host})
        if symptoms:
            symptoms.sort(key=lambda e: (etime(e) or "9999", e.line))
            return Verdict(
                shape="hang",
                category="DATA",
                confidence=0.8,
                root=symptoms[0],
                root_label="data loading stalled on the straggler rank",
                culprit_ranks=stragglers,
                culprit_hosts=hosts,
                extra={"straggler_row": rows[0]},
            )
        return Verdict(
            shape="hang",
            category="UNKNOWN",
            confidence=0.45,
            root=rows[0]["_ev"],
            root_label="a rank stuck outside NCCL, for a reason the logs do not show",
            culprit_ranks=stragglers,
            culprit_hosts=hosts,
            extra={"straggler_row": rows[0]},
        )

    def _slow(self, ctx: Context, met: dict[str, Any]) -> Verdict:
        sd = met.get("slowdown")  # declared by analyzers/slowdown.py
        if sd and sd.get("finding"):
            return Verdict(
                shape="slow",
                category=sd["category"],
                confidence=sd["confidence"],
                root_label=sd["label"],
                culprit_ranks=list(sd["ranks"]),
                culprit_hosts=list(sd["hosts"]),
                extra={"finding": sd["finding"]},
            )
        slow = met.get("slow_hosts")
        f = next((f for f in ctx.findings if f["kind"] == "slow_network_hosts"), None)
        if slow and f:
            return Verdict(
                shape="slow",
                category="NETWORK",
                confidence=f["confidence"],
                root_label="slow communication on a subset of nodes",
                culprit_hosts=list(slow),
                extra={"finding": f},
            )
        strag = met.get("stragglers") or []
        f2 = next((f for f in ctx.findings if f["kind"] == "straggler"), None)
        if strag and len(strag) <= 8:
            return Verdict(
                shape="slow",
                category="UNKNOWN",
                confidence=0.5,
                root_label="straggler rank(s) slow every step",
                culprit_ranks=[s["rank"] for s in strag],
                extra={"finding": f2},
            )
        return Verdict(
            shape="slow",
            category="UNKNOWN",
            confidence=0.5,
            root_label="throughput dropped",
            extra={
                "finding": next((f for f in ctx.findings if f["kind"] == "throughput_drop"), None)
            },
        )

    # -- presentation -------------------------------------------------------
    def _scope(self, ctx: Context, v: Verdict, world: int) -> str:
        if v.shape == "none":
            return "unknown"
        if v.category in ("NUMERICAL", "INFRA") and not v.culprit_hosts:
            return "all_ranks"
        if v.category == "NETWORK" and not v.culprit_ranks and not v.culprit_hosts:
            return "all_ranks"
        n = len(v.culprit_ranks)
        if v.culprit_hosts and not n:
            hosts = ctx.doc["job"].get("hosts", {})
            n = sum(len(hosts.get(h, [])) for h in v.culprit_hosts) or 2
        if n == 1:
            return "one_rank"
        if world and n >= 0.9 * world:
            return "all_ranks"
        return "some_ranks" if n else "unknown"

    def _when(self, ctx: Context, v: Verdict) -> str:
        if v.shape == "none":
            return "unknown"
        if v.shape == "slow":
            met = ctx.facts.metrics
            step = (met.get("slowdown") or {}).get("onset_step") or met.get("drop_step")
            return "unknown" if step is None else ("immediately" if step <= 5 else "after_warmup")
        start = ctx.facts.job_start
        at = etime(v.root) if v.root is not None else None
        if v.shape == "hang":
            timeouts = ctx.kinds("watchdog_timeout")
            if timeouts and timeouts[0].time:
                at = timeouts[0].time
                ms = timeouts[0].fields.get("timeout_ms")
                if ms and start:
                    gap = seconds_between(start, at)
                    if gap is not None:
                        return self._bucket(ctx, gap - ms / 1000.0, None)
        if v.root is not None and not v.root.time:
            # an untimed line (a Python traceback): the collective the others waited on started
            # timeout_ms before their watchdog fired, which is when this rank stopped
            timeouts = [
                e for e in ctx.kinds("watchdog_timeout") if e.time and e.fields.get("timeout_ms")
            ]
            if timeouts and start:
                gap = seconds_between(start, timeouts[0].time)
                if gap is not None:
                    return self._bucket(ctx, gap - timeouts[0].fields["timeout_ms"] / 1000.0, None)
        gap = seconds_between(start, at)
        step = (v.root.fields.get("step") if v.root is not None else None) or ctx.facts.last_step
        if v.shape == "slow":
            step = ctx.facts.metrics.get("drop_step") or step
        return self._bucket(ctx, gap, step)

    def _bucket(self, ctx: Context, gap: float | None, step: int | None) -> str:
        o = ctx.options
        if gap is not None:
            if gap < o.immediate_seconds and (step is None or step <= o.immediate_steps):
                return "immediately"
            return "after_hours" if gap >= o.hours_seconds else "after_warmup"
        if step is not None:
            return "immediately" if step <= o.immediate_steps else "after_warmup"
        return "unknown"

    def _chain(self, ctx: Context, v: Verdict) -> list[dict[str, Any]]:
        """The root-cause chain: the root and what it led to, then how the others waited
        and how the job ended, in time order."""
        if v.shape == "none":
            return []
        chain = _Chain()
        self._chain_root(ctx, v, chain)
        self._chain_aftermath(ctx, v, chain)
        if v.shape == "slow" and v.extra.get("finding"):
            f = v.extra["finding"]
            chain.steps.append(
                {"time": None, "rank": None, "event": f["title"], "evidence": f["evidence"][:2]}
            )
        return chain.in_time_order()

    def _chain_root(self, ctx: Context, v: Verdict, chain: _Chain) -> None:
        """The root, the reading or wrapped error that shows it, and where its series ended."""
        chain.add(v.root, v.root_label)
        if v.root is not None and v.root.kind == "gpu_reading" and chain.steps:
            # a GPU's event is its first table line: quote the reading that is wrong too
            lines = v.root.fields.get("lines") or {}
            for name in ("lost", "sensor_errors"):
                if name in lines and lines[name][0] != v.root.line:
                    ln, txt = lines[name]
                    chain.steps[0]["evidence"].append(
                        {"file": v.root.file, "line": ln, "text": txt}
                    )
        if v.root is not None and "sig" not in v.root.fields:
            # a wrapper ("Caught OSError in DataLoader worker") re-raises the real error below
            for e in ctx.events:
                s = BY_ID.get(str(e.fields.get("sig"))) if "sig" in e.fields else None
                if (
                    s is not None
                    and s.category == v.category
                    and e.file == v.root.file
                    and 0 < e.line - v.root.line <= 60
                ):
                    chain.add(e, s.meaning.split(":")[0].rstrip("."))
                    break
        if v.root is not None and "sig" in v.root.fields:
            # a repeated message (loss scale falling, a port retried): where the series ended
            same = [
                e
                for e in ctx.events
                if e.file == v.root.file and e.fields.get("sig") == v.root.fields["sig"]
            ]
            if len(same) > 1:
                chain.add(max(same, key=lambda e: e.line), f"{v.root_label} (last occurrence)")
            root_sig = BY_ID.get(str(v.root.fields["sig"]))
            if root_sig is not None and root_sig.severity != "fatal":
                # the series ended in a fatal message of the same kind (loss scale at its floor)
                for e in ctx.events:
                    s = BY_ID.get(str(e.fields.get("sig"))) if "sig" in e.fields else None
                    if s is not None and s.severity == "fatal" and s.category == v.category:
                        chain.add(e, s.meaning.split(":")[0].rstrip("."))
                        break

    def _chain_aftermath(self, ctx: Context, v: Verdict, chain: _Chain) -> None:
        """How the other ranks waited on the root and how the job ended."""
        sym = v.extra.get("symptom")
        if sym is not None:
            chain.add(sym, "the waiting ranks gave up (collective or store timeout)")
        row = v.extra.get("straggler_row")
        if row is not None:
            chain.add(
                row["_ev"],
                f"rank {row['rank']} never entered collective {row['seq']} (last enqueued = last completed = {row['last_completed']})",
                row["rank"],
            )
        timeouts = quotable(ctx.kinds("watchdog_timeout", "watchdog_failure"))
        if timeouts:
            chain.add(
                timeouts[0],
                f"watchdog timeout: {len({e.rank for e in timeouts})} rank(s) gave up waiting in the collective",
            )
        blocking = ctx.kinds("blocking_wait_timeout")
        if blocking:
            chain.add(
                blocking[0], "the main thread's blocking wait gave up: the timeout reached Python"
            )
        firsts = ctx.kinds("dump_first")
        if firsts:
            chain.add(firsts[0], "first rank to signal the flight-recorder dump (initiator)")
        for kind, what in (
            ("slurm_time_limit", "SLURM cancelled the job at its time limit"),
            ("fatal_terminate", "process aborted after dumping debug info"),
            ("teardown", "watchdog took the process down"),
        ):
            evs = ctx.kinds(kind)
            if evs and (v.root is None or evs[0] is not v.root):
                chain.add(evs[-1] if kind == "teardown" else evs[0], what)
        first = ctx.facts.torchrun_first
        if first is not None:
            chain.add(
                first,
                f"torchrun reports rank {first.rank} failed (exit code {first.fields.get('exitcode')})",
            )

    def _timeline(self, ctx: Context) -> list[dict[str, Any]]:
        seen: set[tuple[str, Any]] = set()
        per_kind: dict[str, int] = {}
        # kinds with 8 lines already, or never shown: one look-up skips their other lines
        done = {"nccl_progress", "fr_status", "metrics_row"}
        out = []
        for e in ctx.events:
            if e.kind in done:
                continue
            key = (e.kind, e.rank)
            if key in seen:
                continue
            seen.add(key)
            per_kind[e.kind] = n = per_kind.get(e.kind, 0) + 1
            if n == 8:
                done.add(e.kind)
            out.append(
                {
                    "time": etime(e),
                    "rank": e.rank,
                    "file": e.file,
                    "line": e.line,
                    "event": e.kind,
                    "text": e.text[:300],
                }
            )
        out.sort(key=lambda x: (x["time"] or "9999", x["file"], x["line"]))
        return out[: ctx.options.max_timeline]


# (name, rule) in the order the analyst asks; the first rule that returns a verdict decides
_DECISION_RULES: tuple[tuple[str, Callable[..., Verdict | None]], ...] = (
    ("the job finished: healthy or slow", VerdictAnalyzer._rule_finished),
    (
        "finished training, then only the scheduler ended it",
        VerdictAnalyzer._rule_no_exit_after_finish,
    ),
    ("every specific cause is on a straggler", VerdictAnalyzer._rule_causes_on_stragglers),
    ("the earliest logged cause", VerdictAnalyzer._rule_earliest_cause),
    ("NaN/Inf in the metrics", VerdictAnalyzer._rule_nan_in_metrics),
    ("retries exhausted", VerdictAnalyzer._rule_retries_exhausted),
    ("a straggler in the collectives", VerdictAnalyzer._rule_stragglers),
    ("every rank inside one collective", VerdictAnalyzer._rule_all_in_collective),
    ("slow steps in the metrics", VerdictAnalyzer._rule_slow),
    ("dataset preprocessing outlasted the timeout", VerdictAnalyzer._rule_preprocessing),
    ("the watchdog thread itself hung", VerdictAnalyzer._rule_watchdog_hung),
    ("an uncaught exception ended the log", VerdictAnalyzer._rule_uncaught),
    ("the job's last activity before the stall", VerdictAnalyzer._rule_activity),
    ("the first collective of a group never completed", VerdictAnalyzer._rule_first_collective),
    ("a collective timeout no rank explains", VerdictAnalyzer._rule_unexplained_timeout),
    ("a worker killed by SIGKILL", VerdictAnalyzer._rule_sigkill),
    ("processes failed without a cause", VerdictAnalyzer._rule_failed_unexplained),
    ("a process waited on peers that never came", VerdictAnalyzer._rule_waited_unexplained),
)


register_analyzer(VerdictAnalyzer())
