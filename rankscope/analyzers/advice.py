"""The one-sentence summary and the recommendations, per root-cause category."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..signatures import BY_ID, Signature
from . import Context

if TYPE_CHECKING:
    from ..model import Event
    from .verdict import Verdict


XID_NAMES = {
    79: "GPU has fallen off the bus",
    48: "double-bit ECC error",
    63: "ECC page retirement / row remapping",
    64: "ECC page retirement / row remapping failure",
    74: "NVLink error",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}


def _ranks(rs: list[int], limit: int = 4) -> str:
    rs = sorted(set(rs))
    if not rs:
        return ""
    head = ", ".join(map(str, rs[:limit]))
    return (
        f"rank {head}"
        if len(rs) == 1
        else f"ranks {head}" + (f" (+{len(rs) - limit})" if len(rs) > limit else "")
    )


def _where(v: Verdict) -> str:
    r = _ranks(v.culprit_ranks)
    h = ", ".join(v.culprit_hosts[:3])
    if r and h:
        return f"{r} on {h}"
    if h:
        return f"host{'s' if len(v.culprit_hosts) > 1 else ''} {h}"
    return r


def _cap(text: str) -> str:
    """First letter up, the rest as written (host names keep their case)."""
    return text[:1].upper() + text[1:]


def _stuck(ctx: Context) -> str:
    rows = [r for r in ctx.facts.nccl.get("rows", []) if r["role"] == "initiator" and r["op"]]
    if not rows:
        return "the collective"
    r = rows[0]
    return f"{r['op']} seq {r['seq']}"


# what to do about a decomposed slowdown, by category (analyzers/slowdown.py)
SLOW_ACTION = {
    "NETWORK": "test those hosts' links with nccl-tests (all_reduce_perf between them and a healthy pair) and drain them if confirmed.",
    "HARDWARE": "check that GPU's cooling and power (nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER) and drain the node if it keeps throttling.",
    "DATA": "look at those ranks' input pipeline (workers, shared memory, the files they read).",
    "STORAGE_IO": "check the file system or object store those ranks read from (latency, errors, throttling).",
    "UNKNOWN": "compare those ranks' GPUs and nodes with their peers (clocks, temperature, CPU load).",
    "SOFTWARE": "look for what the program keeps from step to step (tensors or losses kept in a list, a growing graph or cache, host memory rising) and what changed in its software or settings; compare with a known-good configuration.",
    "NETWORK_ALL": "run nccl-tests across the job's nodes (all_reduce_perf, then pairs) to find the slow links, and check the fabric's switch counters and congestion for that time.",
    "COMPUTE_ALL": "compare what changed for every rank at that step: model or sequence length, batch size, a new data shard, or something every node shares (cooling, CPU frequency policy).",
    "UNLOCATED": "upload per-rank step metrics (compute, communication and data-wait times) or GPU telemetry (DCGM, nvidia-smi) from the same period to tell which ranks and which part of the step slowed.",
}


def _catalogue_root(v: Verdict) -> Signature | None:
    """The catalogue entry that read the root-cause line, unless a structural reader's
    own wording (a CUDA OOM with its sizes, the kernel's OOM killer) says more."""
    root = v.root
    if root is None or root.kind in ("cuda_oom", "host_oom_kill"):
        return None
    return BY_ID.get(str(root.fields.get("sig") or ""))


def summary(ctx: Context, v: Verdict) -> str:
    n_timeout = len({e.rank for e in ctx.kinds("watchdog_timeout", "watchdog_failure")})
    after = f"; {n_timeout} other rank(s) then timed out in {_stuck(ctx)}" if n_timeout else ""
    where = _where(v)
    root = v.root
    f = root.fields if root is not None else {}
    if v.shape == "none":
        return _no_failure_summary(ctx)
    slow = _slowdown_summary(ctx, v)
    if slow is not None:
        return slow
    if v.category == "OOM":
        return _oom_summary(v, where, after)
    if v.category == "HARDWARE" and v.extra.get("first_collective"):
        return f"The first collective of its process group never completed ({_stuck(ctx)}) with every rank on {', '.join(v.culprit_hosts)} and no rank logging an error: the GPUs could not reach each other peer-to-peer — rerun with NCCL_P2P_DISABLE=1 to confirm; check PCIe ACS/IOMMU settings and run p2pBandwidthLatencyTest on that node."
    if v.category == "HARDWARE":
        xid = f" with Xid {f['xid']}" if f.get("xid") else ""
        name = (
            XID_NAMES.get(f.get("xid"))
            or str(f.get("detail", "")).rsplit(",", 1)[-1].strip(" .")[:60]
        )
        det = f" ({name})" if name else ""
        # a host fault (memory, CPU, a PCIe device that is not a GPU) is no GPU failure
        host_fault = root is not None and "sig" in f and "GPU" not in v.root_label
        what = "Hardware failure" if host_fault else "GPU failure"
        return f"{what}{xid}{det} on {', '.join(v.culprit_hosts) or where or 'one node'}{after} — drain that node, restart from the last checkpoint without it."
    if v.category == "NETWORK":
        return _network_summary(ctx, v, after)
    if v.category == "NUMERICAL":
        step = f.get("step") or ctx.facts.metrics.get("nan_step")
        at = f" at step {step}" if step is not None else ""
        return f"Training diverged: loss became NaN/Inf{at} — restart from the last checkpoint before it with a lower learning rate or tighter gradient clipping, and check that step's data."
    if v.category == "INFRA":
        if root and root.kind == "slurm_time_limit":
            return "SLURM stopped the job at its time limit (not a training failure) — resume from the last checkpoint with a longer limit or more frequent checkpoints."
        if v.extra.get("action"):
            return f"{_cap(v.root_label)}{after} — {v.extra['action'][0].lower()}{v.extra['action'][1:]}"
        sig = _catalogue_root(v)
        if sig is not None:  # a known message: its own action (a rendezvous, a port in use)
            return f"{_cap(v.root_label)}{after} — {sig.action[0].lower()}{sig.action[1:]}"
        return f"The scheduler/infrastructure ended the job ({v.root_label}) — resubmit from the last checkpoint; ask the cluster team about {', '.join(v.culprit_hosts) or 'the node'}."
    if v.category == "SOFTWARE" and root and root.kind == "run_succeeded" and v.shape == "hang":
        return "Training finished but the processes never exited until the scheduler ended the job — the results are complete; dump a lingering process's stacks (py-spy dump) and check the shutdown path (a profiler, a non-daemon thread, destroy_process_group waiting on a peer)."
    if v.category == "SOFTWARE" and (
        (root and root.kind == "collective_mismatch") or "a different collective" in v.root_label
    ):
        return "Ranks issued different collectives (a code path diverged between ranks) — fix the rank-dependent branch around the reported collective, then rerun."
    if v.category == "DATA" and root and root.kind == "collective_mismatch":
        return "Ranks entered the same collective with batches of different sizes (an uneven split of the data: a last partial batch, a collate that drops samples, uneven shards) — give every rank the same batch size (drop_last=True, pad the last batch, or pad before gathering), then rerun."
    if v.category == "DATA" and v.shape == "crash":
        return f"{_cap(where) or 'A rank'} failed on its input data ({v.root_label}){after} — find the sample or file the traceback names, fix or drop it, then restart from the last checkpoint."
    if v.category == "DATA":
        return f"{_cap(where)} stalled in data loading and never joined {_stuck(ctx)}{after} — check that rank's data reads/storage (add a read timeout), then restart from the last checkpoint."
    if v.category == "STORAGE_IO":
        return f"Storage I/O failed on {where or 'the job'} ({v.root_label}){after} — check the file system/object store, then restart from the last checkpoint."
    if v.category == "SOFTWARE":
        return f"{_cap(where) or 'A rank'} failed with {v.root_label}{after} — read that rank's traceback first; restart after the fix."
    if v.shape == "hang" and v.culprit_ranks:
        return f"{_cap(where)} never entered {_stuck(ctx)} (stuck outside NCCL, reason not in the logs){after} — take a py-spy dump of that rank next time; restart from the last checkpoint."
    if v.shape == "slow":
        return f"Training slowed ({v.root_label}{' on ' + where if where else ''}) — compare per-rank step times and check the slowest ranks' GPUs and nodes."
    return f"The job failed ({v.root_label}); the logs do not show a cause — look at the first error of each rank in the findings."


def _no_failure_summary(ctx: Context) -> str:
    noise = next((x for x in ctx.findings if x["kind"] == "retry_noise"), None)
    if noise:
        return f"No failure found: {noise['title'].split(':')[0]} — noise, no action needed."
    return "No failure found in these files."


def _slowdown_summary(ctx: Context, v: Verdict) -> str | None:
    """A slowdown the step metrics decomposed (the action depends on where it is), or one
    a single log shows without a step series (nccl-tests, NCCL's transport)."""
    decomposed = v.extra.get("finding") if v.shape == "slow" else None
    if not decomposed:
        return None
    if decomposed.get("kind") == "slowdown_decomposed":
        action = SLOW_ACTION.get(v.category, SLOW_ACTION["UNKNOWN"])
        everywhere = not (v.culprit_ranks or v.culprit_hosts)
        if everywhere and v.category == "NETWORK":
            action = SLOW_ACTION["NETWORK_ALL"]
        elif everywhere and v.category == "UNKNOWN":
            part = (ctx.facts.metrics.get("slowdown") or {}).get("part")
            action = SLOW_ACTION["COMPUTE_ALL" if part == "compute" else "UNLOCATED"]
        return f"Training slowed: {decomposed['title']} — {action}"
    if ctx.facts.metrics.get("slowdown", {}).get("finding") is decomposed:
        return f"Slow: {decomposed['title']} — {decomposed.get('detail') or ''}".rstrip(" —")
    return None


def _sigkilled(root: Event | None) -> bool:
    """A launcher's report that a worker died of SIGKILL (torchrun's exit code -9, a
    spawned process 'terminated with signal SIGKILL'): the kill is the host's doing."""
    if root is None:
        return False
    if root.kind in ("torchrun_failure", "torchrun_failed"):
        return root.fields.get("exitcode") == -9
    return "signal SIGKILL" in root.text


def _oom_summary(v: Verdict, where: str, after: str) -> str:
    root = v.root
    f = root.fields if root is not None else {}
    sig = _catalogue_root(v)
    if sig is not None:
        # a memory-limit kill (cgroup, container, scheduler) is not a GPU running out
        at = f" ({where})" if where else ""
        return f"{sig.meaning.rstrip('.')}{at}{after} — {sig.action}"
    if root and root.kind == "host_oom_kill":
        return f"{_cap(where) or 'A process'} ran out of host memory: the kernel's OOM killer ended it{after} — lower host memory use (data-loader workers, pinned buffers, CPU offload) or ask for more, and confirm with dmesg / the cgroup's memory.events; restart from the last checkpoint."
    if _sigkilled(root):
        return f"{_cap(where) or 'A worker'} was killed by SIGKILL, most often the kernel's OOM killer (host memory, or the job's/container's memory limit){after} — confirm with dmesg on the node, `sacct` MaxRSS or the cgroup's memory.events, then lower host memory use or ask for more; restart from the last checkpoint."
    what = (
        "ran out of GPU memory (CUDA OOM"
        + (f", tried to allocate {f['tried']}" if f.get("tried") else "")
        + ")"
    )
    return f"{_cap(where) or 'A rank'} {what}{after} — lower per-GPU memory (micro-batch, activation checkpointing) and restart from the last checkpoint."


def _network_summary(ctx: Context, v: Verdict, after: str) -> str:
    root = v.root
    if v.shape == "slow":
        return f"Training slowed: communication is slow on {', '.join(v.culprit_hosts[:6])} while compute is equal — test those nodes' links with nccl-tests and drain them if confirmed."
    if v.extra.get("first_collective"):
        return f"The first collective of its process group never completed ({_stuck(ctx)}) and no rank logged an error: the connections NCCL opens for it did not carry it — rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET to see the transports; try NCCL_P2P_DISABLE=1 (GPU peer-to-peer within a node: PCIe ACS/IOMMU) and NCCL_IB_DISABLE=1 or NCCL_SOCKET_IFNAME (between nodes); run nccl-tests on the same nodes."
    sig = _catalogue_root(v)
    if sig is not None and not v.extra.get("all_in_collective"):
        # a known message names its own link (a store, a socket, a verbs call): say that
        on = f" on {', '.join(v.culprit_hosts[:4])}" if v.culprit_hosts else ""
        return f"{_cap(v.root_label)}{on}{after} — {sig.action[0].lower()}{sig.action[1:]}"
    if v.extra.get("all_in_collective"):
        scope = "every rank was inside the collective, no rank is to blame"
    elif v.culprit_hosts:
        scope = f"errors on {', '.join(v.culprit_hosts[:4])}"
    elif root is not None and root.host:
        scope = f"reported on {root.host}; a peer process that died looks the same"
    else:
        scope = "reported by NCCL; a peer process that died looks the same"
    sig = _catalogue_root(v)
    if sig is not None and sig.category == "NETWORK":
        # a catalogued line says what failed (a Gloo mesh, an unreachable address, an
        # EFA provider) and what to check: not the generic fabric advice
        where = f" ({root.host})" if root is not None and root.host else ""
        return f"{sig.meaning.rstrip('.')}{where} — {sig.action}"
    return f"NCCL network failure in {_stuck(ctx)} ({scope}) — check the IB/RoCE fabric (links, switches, NIC counters) and restart from the last checkpoint."


_HOST_OOM_ACTION = "Confirm the kill (dmesg on the node, `sacct` MaxRSS, the cgroup's memory.events), then lower host memory use — fewer data-loader workers, smaller prefetch and pinned buffers, no CPU offload — or ask for more memory."
_MEMORY_PREVENTION = "Track each rank's peak memory against its limit (GPU allocated/reserved per step, host RSS against the job's or container's limit) and alert before it is reached."
_HOST_MEMORY_PREVENTION = "Track each node's peak host memory (sacct MaxRSS, the cgroup's memory.peak) against the job's limit and alert before it is reached."

_RECS: dict[str, list[tuple[str, str]]] = {
    "OOM": [
        (
            "immediate",
            "Restart from the last checkpoint with a smaller micro-batch or activation checkpointing on {failing_rank_s} stage.",
        ),
        (
            "structural",
            "Balance memory across pipeline stages / ranks; set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True if fragmentation shows.",
        ),
        (
            "prevention",
            "Track max allocated/reserved memory per rank each step and alert before 95%.",
        ),
    ],
    "HARDWARE": [
        (
            "immediate",
            "Drain {nodes}, run GPU diagnostics (dcgmi diag -r 3), restart from the last checkpoint without it.",
        ),
        (
            "prevention",
            "Alert on Xid/ECC events from the kernel log and check GPUs before jobs start (epilog/prolog health checks).",
        ),
    ],
    "NETWORK": [
        (
            "immediate",
            "Run nccl-tests (all_reduce_perf) across {affected_nodes} and check IB port counters (ibdiagnet, perfquery); restart excluding bad nodes.",
        ),
        (
            "structural",
            "Ask the network team to inspect the links/switches common to the affected nodes.",
        ),
        (
            "prevention",
            "Add periodic nccl-tests health checks and alert on NCCL bus bandwidth drops.",
        ),
    ],
    "NUMERICAL": [
        (
            "immediate",
            "Restart from the last checkpoint before the first NaN step with a lower learning rate or stronger gradient clipping; skip or inspect that step's batch.",
        ),
        (
            "prevention",
            "Alert on loss spikes and gradient-norm jumps; keep checkpoints frequent enough to roll back.",
        ),
    ],
    "INFRA": [
        (
            "immediate",
            "Resubmit from the last checkpoint (with a longer time limit if the job hit it).",
        ),
        (
            "prevention",
            "Checkpoint on SIGTERM / before the time limit; use job dependencies for long runs.",
        ),
    ],
    "SOFTWARE": [
        (
            "immediate",
            "Read the first error's traceback{on_ranks}; fix and rerun from the last checkpoint.",
        ),
        (
            "prevention",
            "Run with TORCH_DISTRIBUTED_DEBUG=DETAIL in a short smoke test after code changes to catch collective mismatches.",
        ),
    ],
    "DATA": [
        (
            "immediate",
            "Inspect {straggler_rank_s} data shard and storage reads; restart from the last checkpoint.",
        ),
        (
            "structural",
            "Put a timeout on data reads (e.g. HTTP/object-store reads in the data loader) and retry or skip the sample instead of blocking the rank.",
        ),
        (
            "prevention",
            "Log per-rank data-loading time per step so a stalling rank is visible before the NCCL timeout.",
        ),
    ],
    "STORAGE_IO": [
        (
            "immediate",
            "Check the storage system's health (disk pressure, errors) around the failure time; restart from the last checkpoint.",
        ),
        ("prevention", "Alert on storage error counters; retry with backoff on reads."),
    ],
    "UNKNOWN": [
        (
            "immediate",
            "Look at the first error of each rank (findings) and the ranks without NCCL state; enable TORCH_NCCL_TRACE_BUFFER_SIZE and py-spy dumps for the next run.",
        ),
    ],
}


# training finished, then the processes hung at exit until the scheduler ended them
_NO_EXIT_ACTION = (
    "The results are complete: keep the last checkpoint. Next run, dump a lingering "
    "process's stacks (py-spy dump --pid …) and check the shutdown path (a profiler, a "
    "non-daemon thread, destroy_process_group waiting on a peer)."
)


def _targets(v: Verdict) -> dict[str, str]:
    """What the generic actions' placeholders say: the culprit node(s) and rank the verdict
    names, or what to look for when the logs name none (a dmesg excerpt without a host, a
    single-process log). Several ranks keep the generic words rather than a list."""
    hosts = ", ".join(v.culprit_hosts[:4]) + (" …" if len(v.culprit_hosts) > 4 else "")
    ranks = ", ".join(str(r) for r in v.culprit_ranks[:4]) + (
        " …" if len(v.culprit_ranks) > 4 else ""
    )
    one = f"rank {ranks}'s" if len(v.culprit_ranks) == 1 else ""
    word = "ranks" if len(v.culprit_ranks) > 1 else "rank"
    return {
        "nodes": hosts or "the node whose logs show it",
        "affected_nodes": f"{hosts} and a healthy node" if hosts else "the affected nodes",
        "on_ranks": f" on {word} {ranks}" if ranks else "",
        "failing_rank_s": one or "the failing rank's",
        "straggler_rank_s": one or "the straggler rank's",
    }


def recommendations(ctx: Context, v: Verdict) -> list[dict[str, Any]]:
    if v.shape == "none":
        return []
    targets = _targets(v)
    recs = [
        {"kind": k, "text": t.format_map(targets)}
        for k, t in _RECS.get(v.category, _RECS["UNKNOWN"])
    ]
    sig = _catalogue_root(v)
    host_oom = v.root is not None and (v.root.kind == "host_oom_kill" or _sigkilled(v.root))
    if v.category == "OOM" and (sig is not None or host_oom):
        # the catalogue entry's own action; the host-memory advice only for a kernel kill
        # (a catalogued OOM may be GPU, HBM or host memory)
        first = sig.action if sig is not None else _HOST_OOM_ACTION
        watch = _MEMORY_PREVENTION if sig is not None else _HOST_MEMORY_PREVENTION
        recs = [{"kind": "immediate", "text": first}, {"kind": "prevention", "text": watch}]
    elif sig is not None and v.shape != "slow":
        # a catalogued root cause: what to do first is its entry's action, not the
        # category's generic one (a rendezvous timeout is not a node to drain)
        recs = [{"kind": "immediate", "text": sig.action}] + [
            r for r in recs if r["kind"] != "immediate"
        ]
    if v.shape == "hang" and v.root is not None and v.root.kind == "run_succeeded":
        recs = [{"kind": "immediate", "text": _NO_EXIT_ACTION}]
    if v.shape == "slow" and v.category in SLOW_ACTION:
        recs = [
            {
                "kind": "immediate",
                "text": SLOW_ACTION[v.category][0].upper() + SLOW_ACTION[v.category][1:],
            }
        ]
    if v.shape == "slow" and v.category == "UNKNOWN":
        recs = [
            {
                "kind": "immediate",
                "text": "Compare per-rank step times; check the slowest ranks' GPU clocks/thermals and their nodes' network.",
            }
        ]
    return recs
