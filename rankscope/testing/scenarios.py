"""Failure scenarios for the generator. Each writes the lines a real job of that kind prints
and records in ``job.expected`` what a correct triage concludes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING

from . import formats as F
from .formats import T0

if TYPE_CHECKING:
    from .generate import Job


def _stop_all(job: Job, step: int) -> None:
    for r in range(job.spec.ranks):
        job.stop_step[r] = step


def data_stall(job: Job) -> None:
    """One rank blocks in its data loader; everyone else times out in the next broadcast."""
    s = job.spec
    n = s.ranks
    culprit = s.extra.get("culprit", (n * 3) // 5 + 0)
    seq = 3 * s.steps + 101
    _stop_all(job, s.steps)
    t_stall = job.fail_time
    job.healthy_retries(max(4, n // 8), [r for r in range(n) if r != culprit])
    if s.symptom:
        shard = "shard-000871.tar"
        job.log(
            culprit,
            t_stall - timedelta(seconds=40),
            "W",
            f"GET ais://train/{shard} failed: Read timed out. (read timeout=None); retrying 1/5",
            "ais_client.py:214",
        )
        job.log(
            culprit,
            t_stall + timedelta(seconds=300),
            "W",
            f"DataLoader worker 3 has not produced a batch for 300 s (waiting on ais://train/{shard})",
            "data_pipeline.py:188",
        )
    t_fire = t_stall + timedelta(milliseconds=F.TIMEOUT_MS)
    others = [r for r in range(n) if r not in (culprit, 0)]
    # rank 0 is the broadcast root: its send completed, it is waiting in the next all-reduce
    job.timeouts(others, seq, "BROADCAST", seq, seq - 1, t_fire)
    job.timeouts([0], seq + 1, "ALLREDUCE", seq + 1, seq, t_fire + timedelta(seconds=1))
    first = others[0]
    obs = F.observed(s.version, culprit)
    if obs:
        job.log(culprit, t_fire + timedelta(seconds=2), "E", obs, "ProcessGroupNCCL.cpp:1794")
    rec = F.received(s.version, culprit, first, seq - 1, seq - 1)
    if rec:
        job.log(culprit, t_fire + timedelta(seconds=2), "E", rec, "ProcessGroupNCCL.cpp:1805")
    failed = {r: (t_fire + timedelta(seconds=62), -6) for r in range(n) if r != culprit}
    failed[culprit] = (t_fire + timedelta(seconds=70), -15)
    job.torchrun_failures(failed)
    job.expected = {
        "shape": "hang",
        "category": "DATA" if s.symptom else "UNKNOWN",
        "culprit_ranks": [culprit],
        "straggler_ranks": [culprit] if s.version in ("2.8", "2.5") else [],
        "initiator_ranks": sorted([*others, 0]),
        "notified_ranks": [culprit] if s.version in ("2.8", "2.5") else [],
        "culprit_hosts": [job.host(culprit)],
    }


def fabric(job: Job) -> None:
    """The IB fabric fails under an all-reduce every rank has entered: no culprit rank."""
    s = job.spec
    n = s.ranks
    seq = 3 * s.steps + 57
    _stop_all(job, s.steps)
    t = job.fail_time
    job.healthy_retries(max(4, n // 16))
    for r in range(n):
        tr = t + timedelta(milliseconds=job.rng.randrange(0, 3000))
        peer = (
            f"10.0.{(job.node(r) + 1) % job.nodes // 250}.{(job.node(r) + 1) % job.nodes % 250 + 1}"
        )
        if job.local(r) in (0, 4):
            job.out(
                r,
                tr,
                F.nccl_line(
                    job.host(r),
                    job.pids[r],
                    job.local(r),
                    F.ib_completion(peer, "10.0.0.9"),
                    "WARN",
                    "transport/net_ib.cc:1738",
                ),
            )
            job.out(
                r,
                tr,
                F.nccl_line(
                    job.host(r), job.pids[r], job.local(r), "transport/net_ib.cc:1740 -> 6"
                ),
            )
        for i, msg in enumerate(F.async_exception(r, seq, "ALLREDUCE")):
            if i == 0:
                job.log(r, tr, "E", msg, "ProcessGroupNCCL.cpp:1912")
            else:
                job.out(r, tr, msg)
        job.out(r, tr, F.ib_completion(peer, "10.0.0.9"))
    t_fire = t + timedelta(seconds=5)
    job.timeouts(list(range(n)), seq, "ALLREDUCE", seq, seq - 1, t_fire)
    job.torchrun_failures({r: (t_fire + timedelta(seconds=62), -6) for r in range(n)})
    job.expected = {
        "shape": "crash",
        "category": "NETWORK",
        "culprit_ranks": [],
        "straggler_ranks": [],
        "initiator_ranks": list(range(n)),
    }


def oom(job: Job) -> None:
    """One rank's CUDA OOM; the others time out in the next all-reduce."""
    s = job.spec
    n = s.ranks
    culprit = s.extra.get("culprit", 5)
    seq = 3 * s.steps + 12
    _stop_all(job, s.steps)
    t = job.fail_time
    job.healthy_retries(max(4, n // 16))
    for line in [
        "Traceback (most recent call last):",
        '  File "/workspace/megatron/training/training.py", line 1102, in train_step',
        "    losses_reduced = forward_backward_func(",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 5 has a total capacity of 79.10 GiB of which 1.12 GiB is free. Including non-PyTorch memory, this process has 77.97 GiB memory in use. Of the allocated memory 74.20 GiB is allocated by PyTorch, and 2.31 GiB is reserved by PyTorch but unallocated.",
    ]:
        job.out(culprit, t, line)
    t_fire = t + timedelta(milliseconds=F.TIMEOUT_MS)
    others = [r for r in range(n) if r != culprit]
    job.timeouts(others, seq, "ALLREDUCE", seq, seq - 1, t_fire)
    failed = {r: (t_fire + timedelta(seconds=62), -6) for r in others}
    failed[culprit] = (t + timedelta(seconds=3), 1)
    job.torchrun_failures(failed)
    job.expected = {
        "shape": "crash",
        "category": "OOM",
        "culprit_ranks": [culprit],
        "culprit_hosts": [job.host(culprit)],
    }


def xid(job: Job) -> None:
    """Xid 79 (GPU fell off the bus) on one node, seen in its kernel log and its ranks' CUDA errors."""
    s = job.spec
    n = s.ranks
    node = s.extra.get("node", min(3, job.nodes - 1))
    gpu_rank = node * s.per_node + 5
    seq = 3 * s.steps + 31
    _stop_all(job, s.steps)
    t = job.fail_time
    kern = [
        f"[{(t - timedelta(hours=3)):%a %b %d %H:%M:%S %Y}] mlx5_core 0000:0c:00.0: mlx5_port_module_event:1131: Port module event: module 0, Cable plugged",
        f"[{t:%a %b %d %H:%M:%S %Y}] NVRM: GPU at PCI:0000:b5:00: GPU-7f3c2a10-59d1-4c1e-9b1e-2c7d9a51e0aa",
        f"[{t:%a %b %d %H:%M:%S %Y}] NVRM: Xid (PCI:0000:b5:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
        f"[{t:%a %b %d %H:%M:%S %Y}] NVRM: GPU 0000:b5:00.0: GPU has fallen off the bus.",
    ]
    job.extra_files[f"dmesg-{job.hosts[node]}.log"] = "\n".join(kern) + "\n"
    job.out(
        gpu_rank, t + timedelta(seconds=1), "RuntimeError: CUDA error: unspecified launch failure"
    )
    job.out(
        gpu_rank,
        t + timedelta(seconds=1),
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
    )
    t_fire = t + timedelta(milliseconds=F.TIMEOUT_MS)
    others = [r for r in range(n) if r != gpu_rank]
    job.timeouts(others, seq, "ALLREDUCE", seq, seq - 1, t_fire)
    failed = {r: (t_fire + timedelta(seconds=62), -6) for r in others}
    failed[gpu_rank] = (t + timedelta(seconds=2), 1)
    job.torchrun_failures(failed)
    job.expected = {
        "shape": "crash",
        "category": "HARDWARE",
        "culprit_hosts": [job.hosts[node]],
        "culprit_ranks": [gpu_rank],
    }


def nan(job: Job) -> None:
    """The loss goes NaN; Megatron's grad-norm check stops every rank a few steps later."""
    s = job.spec
    n = s.ranks
    nan_from = s.extra.setdefault("nan_from_step", max(10, s.steps - 10))
    _stop_all(job, s.steps)
    t = job.fail_time
    for r in range(0, n, max(1, n // 4)):
        job.out(
            r,
            t,
            f"RuntimeError: Rank {r}: found NaN in local grad norm in backward pass before data-parallel communication collective. Device: {job.local(r)}, node: {job.host(r)}",
        )
    job.torchrun_failures({r: (t + timedelta(seconds=2), 1) for r in range(0, n, max(1, n // 4))})
    job.expected = {"shape": "diverge", "category": "NUMERICAL", "nan_from_step": nan_from}


def time_limit(job: Job) -> None:
    """SLURM stops a healthy job at its time limit."""
    s = job.spec
    _stop_all(job, s.steps)
    t = job.fail_time + timedelta(seconds=30)
    job.healthy_retries(max(4, s.ranks // 16))
    for node in range(job.nodes):
        job.agent(
            node,
            t,
            f"slurmstepd: error: *** STEP {s.job_id}.0 ON {job.hosts[node]} CANCELLED AT {t:%Y-%m-%dT%H:%M:%S} DUE TO TIME LIMIT ***",
        )
        job.agent(
            node,
            t,
            f"W{t:%m%d %H:%M:%S}.000000 {40000 + node} torch/distributed/elastic/agent/server/api.py:704] Received Signals.SIGTERM death signal, shutting down workers",
        )
        for lr in range(s.per_node):
            r = node * s.per_node + lr
            if r < s.ranks:
                job.agent(
                    node,
                    t,
                    f"W{t:%m%d %H:%M:%S}.000000 {40000 + node} torch/distributed/elastic/multiprocessing/api.py:897] Sending process {job.pids[r]} closing signal SIGTERM",
                )
    job.agent(
        0,
        t,
        f"slurmstepd: error: *** JOB {s.job_id} ON {job.hosts[0]} CANCELLED AT {t:%Y-%m-%dT%H:%M:%S} DUE TO TIME LIMIT ***",
    )
    job.out(
        3,
        t + timedelta(seconds=1),
        "[W TCPStore.cpp:141] [c10d] recvValue failed on SocketImpl(fd=42, addr=[node-00]:45678, remote=[node-00]:29500): Connection reset by peer",
    )
    job.expected = {"shape": "crash", "category": "INFRA", "culprit_ranks": []}


def mismatch(job: Job) -> None:
    """Ranks call different collectives (TORCH_DISTRIBUTED_DEBUG=DETAIL catches it)."""
    s = job.spec
    bad = s.extra.get("culprit", 3)
    _stop_all(job, s.steps)
    t = job.fail_time
    fp = "CollectiveFingerPrint(SequenceNumber={seq}, OpType={op}, TensorShape=[1024], TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, layout=Strided (default), requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt)))"
    seq = 3 * s.steps + 3
    for r in (0, bad):
        other = bad if r == 0 else 0
        mine, theirs = ("BROADCAST", "ALLREDUCE") if r == bad else ("ALLREDUCE", "BROADCAST")
        job.out(
            r,
            t,
            f"RuntimeError: Detected mismatch between collectives on ranks. Rank {r} is running collective: {fp.format(seq=seq, op=mine)}, but Rank {other} is running collective: {fp.format(seq=seq, op=theirs)}.Collectives differ in the following aspects: \tOp type: {mine}vs {theirs}",
        )
    job.torchrun_failures({r: (t + timedelta(seconds=1), 1) for r in (0, bad)})
    job.expected = {"shape": "crash", "category": "SOFTWARE"}


def slow_network(job: Job) -> None:
    """Metrics only: AllReduce slows down on a subset of nodes while compute stays equal."""
    s = job.spec
    slow_nodes = s.extra.get("slow_nodes") or [n for n in (1, 5, 11) if n < job.nodes]
    steps = max(s.steps, 120)
    start = steps // 3
    rows = ["step,rank,host,timestamp,step_time_ms,compute_ms,allreduce_ms,tokens_per_sec,loss"]
    for step in range(1, steps + 1):
        ts = T0 + timedelta(seconds=60 + step * 7)
        slow_now = step >= start
        step_ms = 11200 if slow_now else 7000
        for r in range(s.ranks):
            node = job.node(r)
            comm = 7100 if slow_now and node in slow_nodes else 2900
            comm += job.rng.uniform(-40, 40)
            comp = 4100 + job.rng.uniform(-30, 30)
            rows.append(
                f"{step},{r},{job.host(r)},{ts:%Y-%m-%dT%H:%M:%S},{step_ms + job.rng.uniform(-50, 50):.1f},{comp:.1f},{comm:.1f},{142000 * 7000 / step_ms:.0f},{2.9 - step * 0.001:.4f}"
            )
    job.extra_files["metrics.csv"] = "\n".join(rows) + "\n"
    job.healthy_retries(4)
    job.expected = {
        "shape": "slow",
        "category": "NETWORK",
        "culprit_hosts": [job.hosts[n] for n in slow_nodes],
        "culprit_ranks": [],
    }


def retry_noise(job: Job) -> None:
    """A run that finished, with connection resets that all recovered on the first retry."""
    s = job.spec
    job.healthy_retries(max(20, s.ranks // 2))
    t = job.fail_time + timedelta(seconds=30)
    job.out(s.ranks - 1, t, "[after training is done] datetime: 2026-11-21 13:00:30")
    job.out(0, t, "Training completed: 60 steps.")
    for node in range(job.nodes):
        job.agent(
            node,
            t + timedelta(seconds=5),
            f"I{t:%m%d %H:%M:%S}.000000 {40000 + node} torch/distributed/elastic/agent/server/api.py:879] [default] worker group successfully finished. Waiting 300 seconds for other agents to finish.",
        )
        job.agent(
            node,
            t + timedelta(seconds=6),
            f"I{t:%m%d %H:%M:%S}.000000 {40000 + node} torch/distributed/elastic/agent/server/api.py:932] Local worker group finished (SUCCEEDED). Waiting 300 seconds for other agents to finish",
        )
    job.expected = {"shape": "none", "severity": "OK"}


def healthy(job: Job) -> None:
    """A healthy, still-running job (bulk for benchmarks)."""
    job.healthy_retries(max(8, job.spec.ranks // 4))
    job.expected = {"shape": "none"}


SCENARIOS: dict[str, Callable[[Job], None]] = {
    "data_stall": data_stall,
    "fabric": fabric,
    "oom": oom,
    "xid": xid,
    "nan": nan,
    "time_limit": time_limit,
    "mismatch": mismatch,
    "slow_network": slow_network,
    "retry_noise": retry_noise,
    "healthy": healthy,
}
