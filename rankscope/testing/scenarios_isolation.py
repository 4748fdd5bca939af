"""Generated inputs for the isolation / root-cause / resolution analyzers.

Each function returns ``{name: bytes}`` for one scenario, in the real formats:
worker logs (glog envelope, ``[rankN]:`` prefixes), AIStore target/proxy logs,
nvidia-smi ``-q``/table/CSV, nccl-tests tables, topology and bisection uploads,
per-step metrics CSV. Parameters vary the shape (hosts, offsets, codes) so tests
do not depend on one fixture's exact text.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

T0 = datetime(2025, 5, 14, 20, 0, 0)


def _glog(level: str, t: datetime, src: str = "ProcessGroupNCCL.cpp:1794") -> str:
    return f"[{level}{t:%m%d %H:%M:%S}.{t.microsecond:06d} {src}]"


def worker_cascade(
    *,
    rank: int = 5,
    world: int = 8,
    trigger_line: str | None = None,
    start: datetime = T0,
    trigger_after_s: int = 600,
    timeout_ms: int = 1_800_000,
    host_prefix: str = "node",
) -> dict[str, bytes]:
    """One file per node (4 ranks each): a trigger on ``rank``, then the NCCL timeout cascade."""
    per_node = 4
    files: dict[str, list[str]] = {}
    t_trig = start + timedelta(seconds=trigger_after_s)
    t_hang = t_trig + timedelta(seconds=5)
    t_to = t_hang + timedelta(milliseconds=timeout_ms)
    for r in range(world):
        node = f"{host_prefix}-{r // per_node:02d}"
        out = files.setdefault(f"error-1234-{node}.out", [])
        out.append(
            f"[rank{r}]:{start:%Y-%m-%d %H:%M:%S} INFO  world size {world} WORLD_SIZE={world}"
        )
        out.append(
            f"[rank{r}]:{node}:1234:1234 [{r % per_node}] NCCL INFO comm 0x1 rank {r} nRanks {world} nNodes 2 localRanks 4"
        )
        for s in range(1, 4):
            out.append(f"[rank{r}]: iteration {s}/ 1000 | lm loss: 2.{9 - s}")
        if r == rank:
            out.append(
                f"[rank{r}]:{t_trig:%Y-%m-%d %H:%M:%S} "
                + (
                    trigger_line
                    or "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 79.10 GiB"
                )
            )
            out.append(f"[rank{r}]:Traceback (most recent call last):")
            continue
        out.append(
            f"[rank{r}]:{_glog('E', t_to)} [PG ID 0 PG GUID 0(default_pg) Rank {r}] Watchdog caught collective operation timeout: "
            f"WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)={timeout_ms}) ran for {timeout_ms + 12} milliseconds before timing out."
        )
        out.append(
            f"[rank{r}]:{_glog('E', t_to + timedelta(seconds=1))} [PG ID 0 PG GUID 0(default_pg) Rank {r}] First PG on this rank to signal dumping."
        )
        out.append(
            f"[rank{r}]:{_glog('F', t_to + timedelta(seconds=2))} To avoid data inconsistency, we are taking the entire process down."
        )
    death = t_to + timedelta(seconds=30)
    first = sorted(files)[0]
    files[first].append(f"srun: error: {host_prefix}-00: task 0: Exited with exit code 1")
    files[first].append(
        f"slurmstepd: error: *** JOB 1234 ON {host_prefix}-00 CANCELLED AT {death:%Y-%m-%dT%H:%M:%S} ***"
    )
    return {k: ("\n".join(v) + "\n").encode() for k, v in files.items()}


def aistore_target(
    *,
    idx: int = 1,
    start: datetime = T0,
    offset_hours: int = 0,
    death: datetime | None = None,
    chain: bool = True,
    restart_at: datetime | None = None,
) -> dict[str, bytes]:
    """AIS target log(s) on a clock ``offset_hours`` from the workers; GETs stop at ``death``."""
    shift = timedelta(hours=offset_hours)
    s = start + shift
    name = f"aistarget.ais-target-{idx}.INFO.{s:%m%d-%H%M%S}.1"
    lines = [
        f"Started up at {s:%Y/%m/%d %H:%M:%S}, host ais-target-{idx}, go1.24.3 for linux/amd64",
        f"I {s:%H:%M:%S}.000001 common:233 {s:%d %b %y %H:%M} UTC =====================",
    ]
    end = (death or start + timedelta(hours=1)) + shift
    t = s
    get_n = err = batch_err = 0
    step = timedelta(minutes=3)
    fail_at = end - timedelta(minutes=20)
    while t <= end + timedelta(minutes=9):
        running = t <= end
        if running:
            get_n += 1000
        if chain and fail_at <= t <= end:
            err += 40
            batch_err += 7
        lines.append(
            f"I {t:%H:%M:%S}.785011 {{err.get.n:{err},get.n:{get_n},err.getbatch.n:{batch_err},get.bps:2190}}"
        )
        if chain and fail_at <= t < fail_at + step:
            lines.append(
                f"W {t + timedelta(seconds=5):%H:%M:%S}.100000 space:88 resource pressure: load=critical, dsk=critical, mem=low"
            )
            lines.append(
                f"E {t + timedelta(seconds=20):%H:%M:%S}.200000 bundle:301 shared-dm: stream terminated: write tcp: broken pipe"
            )
            lines.append(
                f"E {t + timedelta(seconds=40):%H:%M:%S}.300000 xs:512 x-get-batch[Xa1]: out-of-bounds index 17 (recv'd len=0)"
            )
            lines.append(
                f"W {t + timedelta(seconds=50):%H:%M:%S}.400000 dm:77 shared-dm: xid Xa1 not found, dropping recv"
            )
        t += step
    files = {name: ("\n".join(lines) + "\n").encode()}
    if restart_at is not None:
        r = restart_at + shift
        files[f"aistarget.ais-target-{idx}.INFO.{r:%m%d-%H%M%S}.1"] = (
            f"Started up at {r:%Y/%m/%d %H:%M:%S}, host ais-target-{idx}, go1.24.3 for linux/amd64\n"
            f"I {r:%H:%M:%S}.000001 daemon:311 Version 3.28\n"
        ).encode()
    return files


def client_loader_error(rank: int, at: datetime) -> str:
    return f"[rank{rank}]:{at:%Y-%m-%d %H:%M:%S} ERROR AISBatchLoaderError: batch returned 31 of 32 objects (iterator exhausted prematurely)"


def nvidia_smi_q(
    *, host: str = "node-01", gpus: int = 2, bad_gpu: int | None = 1, temp_bad: int = 91
) -> dict[str, bytes]:
    out = [
        "==============NVSMI LOG==============",
        "",
        "Timestamp                                 : Wed May 14 20:00:00 2025",
        "Driver Version                            : 535.104.05",
        f"Attached GPUs                             : {gpus}",
    ]
    for g in range(gpus):
        bad = g == bad_gpu
        out += [
            f"GPU 00000000:{0x18 + g:02X}:00.0",
            "    Product Name                          : NVIDIA H100 80GB HBM3",
            f"    Minor Number                          : {g}",
            "    FB Memory Usage",
            "        Total                             : 81559 MiB",
            "        Used                              : 70000 MiB",
            "    Clocks Event Reasons",
            "        Idle                              : Not Active",
            f"        HW Slowdown                       : {'Active' if bad else 'Not Active'}",
            "    ECC Errors",
            "        Volatile",
            "            SRAM Correctable              : 0",
            "            SRAM Uncorrectable            : 0",
            "            DRAM Correctable              : 2",
            f"            DRAM Uncorrectable            : {3 if bad else 0}",
            "    Remapped Rows",
            "        Correctable Error                 : 0",
            f"        Uncorrectable Error               : {1 if bad else 0}",
            f"        Pending                           : {'Yes' if bad else 'No'}",
            "        Remapping Failure Occurred        : No",
            "    Temperature",
            f"        GPU Current Temp                  : {temp_bad if bad else 45} C",
            "        GPU Slowdown Temp                 : 89 C",
            "        GPU Shutdown Temp                 : 92 C",
            "    GPU Power Readings",
            "        Power Draw                        : 350.00 W",
            "        Current Power Limit               : 700.00 W",
            "    Clocks",
            "        SM                                : 1980 MHz",
            "    Max Clocks",
            "        SM                                : 1980 MHz",
        ]
    return {f"nvidia-smi-{host}.txt": ("\n".join(out) + "\n").encode()}


def nvidia_smi_csv(*, host: str = "node-02", temps: tuple[int, ...] = (40, 88)) -> dict[str, bytes]:
    rows = [
        "index, name, temperature.gpu, power.draw [W], power.limit [W], ecc.errors.uncorrected.volatile.total, memory.total [MiB]"
    ]
    rows += [
        f"{i}, NVIDIA H100, {t}, 300.00 W, 700.00 W, 0, 81559 MiB" for i, t in enumerate(temps)
    ]
    return {f"nvidia-smi-{host}.csv": ("\n".join(rows) + "\n").encode()}


def nccl_tests(
    *, hosts: list[str], busbw: float, test: str = "all_reduce_perf", with_root: bool = True
) -> bytes:
    lines = [
        f"# {test} -b 8 -e 8G -f 2 -g 1",
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    r = 0
    for h in hosts:
        for d in range(8):
            lines.append(
                f"#  Rank {r:2d} Group  0 Pid  {4000 + r} on {h:>10} device  {d} [0x{0x18 + d:02x}] NVIDIA H100 80GB HBM3"
            )
            r += 1
    root = "    root" if with_root else ""
    lines += [
        "#",
        "#                                                              out-of-place                       in-place",
        f"#       size         count      type   redop{root}     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
    ]
    size = 1 << 20
    while size <= 8 << 30:
        bw = busbw * min(1.0, size / (256 << 20))
        alg = bw / 1.875
        t_us = size / (alg * 1e3) if alg else 0
        rc = "      -1" if with_root else ""
        lines.append(
            f"{size:>12} {size // 4:>13}     float     sum{rc} {t_us:8.1f} {alg:7.2f} {bw:7.2f}      0 {t_us:8.1f} {alg:7.2f} {bw:7.2f}      0"
        )
        size *= 4
    lines += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {busbw * 0.8:.4f}", "#"]
    return ("\n".join(lines) + "\n").encode()


def topology_csv(mapping: dict[str, tuple[str, str]]) -> bytes:
    return (
        "host,switch,rack\n" + "".join(f"{h},{s},{r}\n" for h, (s, r) in mapping.items())
    ).encode()


def topology_json(mapping: dict[str, str]) -> bytes:
    return json.dumps(mapping, indent=2).encode()


def bisection_csv(variable: str, trials: list[tuple[float, str]]) -> bytes:
    return (
        "variable,value,outcome,note\n"
        + "".join(f"{variable},{v:g},{o},trial {i}\n" for i, (v, o) in enumerate(trials))
    ).encode()


def metrics_csv(
    *,
    ranks: int = 8,
    steps: int = 200,
    hosts_per: int = 4,
    slow_comm_hosts: tuple[int, ...] = (),
    mem_shape: str = "flat",
    nan_at: int | None = None,
    spike_at: int | None = None,
    slow_from: int | None = None,
    loss_shape: str = "falling",
) -> bytes:
    """Per-rank per-step metrics: step,rank,host,step_time,compute_time,comm_time,loss,grad_norm,mem_allocated."""
    rows = ["step,rank,host,step_time,compute_time,comm_time,loss,grad_norm,mem_allocated"]
    for s in range(1, steps + 1):
        for r in range(ranks):
            h = r // hosts_per
            comp = 4.1 + 0.01 * ((s * 7 + r) % 5)
            comm = 2.9 * (2.4 if h in slow_comm_hosts else 1.0) + 0.01 * ((s + r) % 3)
            st = comp + comm
            if slow_from is not None and s >= slow_from:
                st *= 1.3
            if loss_shape == "falling":
                loss = 3.0 - 1.5 * s / steps
            elif loss_shape == "flat":
                loss = 2.0 + 0.0001 * ((s * 13) % 7)
            else:
                loss = 2.0 + 0.3 * s / steps
            gn = 1.0 + 0.05 * ((s + r) % 4)
            if spike_at is not None and s == spike_at:
                gn = 80.0
            if nan_at is not None and s >= nan_at:
                loss = float("nan")
            if mem_shape == "flat":
                mem = 60.0 + 0.01 * (s % 2)
            elif mem_shape == "staircase":
                mem = 40.0 + 4.0 * (s // 40)
            else:
                mem = 40.0 + 0.15 * s
            rows.append(
                f"{s},{r},node-{h:02d},{st:.4f},{comp:.4f},{comm:.4f},{loss},{gn:.3f},{mem:.3f}"
            )
    return ("\n".join(rows) + "\n").encode()
