"""A job as a home-grown trainer on a SLURM cluster leaves it (independent of the other generators).

- Log: one merged ``srun -l`` file (``slurm-<job>.out``): every line starts with the task
  number (``  12: ``); the trainer logs with ISO-8601 times carrying the site's UTC
  offset (``+02:00``); rank 0 prints ``step N | loss … | tokens/s … | step_time …s``
  every 10 steps; NCCL INFO lines name the host of each task.
- Per-step metrics, one of two layouts:
  ``jsonl`` — one JSON-lines file per rank, ``metrics/rank_<r>.jsonl``, keys
  ``iteration``, ``global_rank``, ``node``, ``local_rank``, ``ts`` (ISO with offset),
  ``fwd_bwd_ms``, ``allreduce_ms``, ``dataloader_ms``, ``gpu_temp_c``,
  ``sm_clock_mhz``, ``loss``;
  ``parquet_wide`` — one Parquet file, a row per step and a column per rank and measure
  (``rank12/compute_ms``, ``rank12/comm_ms``, ``rank12/data_ms``), no host column (hosts
  come from the log).
- ``topology.csv`` (``hostname,leaf``) for the ``network`` scenario: the two slow hosts
  are the only ones on their leaf switch.
- ``missing``: ranks with no metrics at all.

Timing model: the compute of a rank is its own; the all-reduce of every rank lasts the
link time of its host plus the wait for the slowest rank's compute + data wait.

Scenarios: ``network``, ``thermal``, ``data``, ``iterlog`` (no metrics file: the slowdown
is only in the log's step lines), ``healthy``. ``write_job`` returns the truth.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

TZ = timezone(timedelta(hours=2))
START = datetime(2026, 3, 4, 9, 0, 0, tzinfo=TZ)


def write_job(
    out: Path,
    scenario: str,
    *,
    seed: int = 0,
    hosts_n: int = 4,
    per_host: int = 4,
    steps: int = 300,
    layout: str = "jsonl",
    missing: tuple[int, ...] = (),
) -> dict[str, Any]:
    rnd = random.Random(1000 + seed)  # noqa: S311 — reproducible fixtures, not secrets
    out.mkdir(parents=True, exist_ok=True)
    hosts = [f"gpu-node-{i + 3}" for i in range(hosts_n)]
    world = hosts_n * per_host
    node_of = {r: hosts[r // per_host] for r in range(world)}
    onset = int(steps * rnd.uniform(0.4, 0.6))
    truth: dict[str, Any] = {"scenario": scenario, "world": world, "onset_step": onset}
    slow, bad = _fault(truth, rnd, scenario, hosts, node_of, missing)
    records, step_times = _simulate(
        truth, rnd, scenario, hosts, per_host, node_of, missing, steps, onset, slow, bad
    )
    if scenario != "iterlog":
        _write_metrics(out, records, layout, steps, per_host)
    if scenario == "network":
        _topology(out, hosts, slow)
    _log(out, hosts, per_host, node_of, missing, step_times, scenario)
    return truth


def _fault(
    truth: dict[str, Any],
    rnd: random.Random,
    scenario: str,
    hosts: list[str],
    node_of: dict[int, str],
    missing: tuple[int, ...],
) -> tuple[list[str], int | None]:
    """Pick the scenario's slow hosts or bad rank and record them in ``truth``."""
    slow: list[str] = []
    bad: int | None = None
    hosts_n = len(hosts)
    if scenario == "network":
        i = rnd.randrange(0, hosts_n - 1, 2) if hosts_n > 2 else 0
        slow = hosts[i : i + 2]
        truth.update(category="NETWORK", shape="slow", hosts=slow, switch="leaf-x")
    elif scenario in ("thermal", "data"):
        bad = rnd.choice([r for r in range(len(node_of)) if r not in missing and r != 0])
        truth.update(
            category="HARDWARE" if scenario == "thermal" else "DATA",
            shape="slow",
            hosts=[node_of[bad]],
            ranks=[bad],
        )
    elif scenario == "iterlog":
        truth.update(category="UNKNOWN", shape="slow", hosts=[], ranks=[])
    return slow, bad


def _simulate(
    truth: dict[str, Any],
    rnd: random.Random,
    scenario: str,
    hosts: list[str],
    per_host: int,
    node_of: dict[int, str],
    missing: tuple[int, ...],
    steps: int,
    onset: int,
    slow: list[str],
    bad: int | None,
) -> tuple[dict[int, list[dict[str, Any]]], list[float]]:
    """Run the timing model step by step: every reporting rank's records and the step times."""
    world = len(node_of)
    records: dict[int, list[dict[str, Any]]] = {r: [] for r in range(world) if r not in missing}
    wall = START
    step_times = []
    for s in range(1, steps + 1):
        ramp = min(1.0, max(0.0, (s - onset) / 12)) if s >= onset else 0.0
        comp = _own_times(rnd, world, scenario, bad, ramp)
        worst = max(c + d for c, d in comp.values())
        link = {
            h: 0.30 * rnd.uniform(0.97, 1.03) * (2.6 if h in slow and s >= onset else 1.0)
            for h in hosts
        }
        if scenario == "iterlog" and s >= onset:
            worst *= 1.45
        st = worst + max(link.values())
        step_times.append(st)
        wall += timedelta(seconds=st)
        for r in records:
            hot = r == bad and scenario == "thermal"
            rec = _record(rnd, s, r, node_of[r], per_host, wall, comp[r], link, worst, ramp, hot)
            rec["loss"] = round(2.9 - 0.8 * s / steps + rnd.uniform(-0.01, 0.01), 4)
            records[r].append(rec)
        if s == onset:
            truth["onset_time_utc"] = wall.astimezone(UTC_).strftime("%Y-%m-%dT%H:%M")
    return records, step_times


def _own_times(
    rnd: random.Random, world: int, scenario: str, bad: int | None, ramp: float
) -> dict[int, tuple[float, float]]:
    """One step's compute and data wait of every rank (the bad rank's grow with the ramp)."""
    comp = {}
    for r in range(world):
        c = 1.40 * rnd.uniform(0.98, 1.02)
        d = 0.012 * rnd.uniform(0.7, 1.3)
        if r == bad and scenario == "thermal":
            c *= 1 + 0.7 * ramp
        if r == bad and scenario == "data":
            d += 1.6 * ramp
        comp[r] = (c, d)
    return comp


def _record(
    rnd: random.Random,
    s: int,
    r: int,
    node: str,
    per_host: int,
    wall: datetime,
    own: tuple[float, float],
    link: dict[str, float],
    worst: float,
    ramp: float,
    hot: bool,
) -> dict[str, Any]:
    """One rank's metrics row for step ``s`` (without ``loss``, drawn after it)."""
    c, d = own
    temp = 58 + rnd.uniform(-1.5, 1.5) + (31 * ramp if hot else 0)
    clock = 1755 + rnd.uniform(-10, 10) - (650 * ramp if hot else 0)
    return {
        "iteration": s,
        "global_rank": r,
        "node": node,
        "local_rank": r % per_host,
        "ts": wall.isoformat(timespec="milliseconds"),
        "fwd_bwd_ms": round(c * 1000, 2),
        "allreduce_ms": round((link[node] + worst - (c + d)) * 1000, 2),
        "dataloader_ms": round(d * 1000, 2),
        "gpu_temp_c": round(temp, 1),
        "sm_clock_mhz": round(clock),
    }


def _write_metrics(
    out: Path,
    records: dict[int, list[dict[str, Any]]],
    layout: str,
    steps: int,
    per_host: int,
) -> None:
    """The per-step metrics in the chosen layout (and, with Parquet, the nvidia-smi loops)."""
    if layout == "jsonl":
        d = out / "metrics"
        d.mkdir(exist_ok=True)
        for r, rs in records.items():
            with open(d / f"rank_{r:05d}.jsonl", "w") as f:
                f.write(json.dumps({"event": "run_start", "config": {"lr": 2e-4}}) + "\n")
                for rec in rs:
                    f.write(json.dumps(rec) + "\n")
    else:
        _parquet_wide(out / "step_metrics.parquet", records, steps)
        _nvidia_smi_loops(out, records, per_host)


def _topology(out: Path, hosts: list[str], slow: list[str]) -> None:
    """``topology.csv``: the slow hosts alone on ``leaf-x``, the others two to a leaf."""
    lines = ["hostname,leaf"]
    for h in hosts:
        lines.append(f"{h},{'leaf-x' if h in slow else 'leaf-' + str(hosts.index(h) // 2)}")
    (out / "topology.csv").write_text("\n".join(lines) + "\n")


UTC_ = UTC


def _parquet_wide(path: Path, records: dict[int, list[dict[str, Any]]], steps: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    first = next(iter(records.values()))
    cols: dict[str, Any] = {
        "step": pa.array([x["iteration"] for x in first], pa.int64()),
        "time": pa.array([x["ts"] for x in first]),
    }
    for r, rs in records.items():
        cols[f"rank{r}/compute_ms"] = pa.array([x["fwd_bwd_ms"] for x in rs])
        cols[f"rank{r}/comm_ms"] = pa.array([x["allreduce_ms"] for x in rs])
        cols[f"rank{r}/data_ms"] = pa.array([x["dataloader_ms"] for x in rs])
    pq.write_table(pa.table(cols), path)


def _nvidia_smi_loops(out: Path, records: dict[int, list[dict[str, Any]]], per_host: int) -> None:
    """``nvidia-smi --query-gpu=timestamp,index,temperature.gpu,clocks.sm,power.draw,power.limit
    --format=csv -l 10`` on each host, one file per host (the log's own clock: local time)."""
    by_host: dict[str, list[str]] = {}
    for rs in records.values():
        for x in rs[::10]:
            ts = datetime.fromisoformat(x["ts"]).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
            by_host.setdefault(x["node"], []).append(
                (
                    ts,
                    x["local_rank"],
                    f"{ts}, {x['local_rank']}, {round(x['gpu_temp_c'])}, "
                    f"{x['sm_clock_mhz']} MHz, {640 + x['local_rank']:.2f} W, 700.00 W",
                )
            )
    for h, rows in by_host.items():
        rows.sort()
        head = "timestamp, index, temperature.gpu, clocks.sm [MHz], power.draw [W], power.limit [W]"
        (out / f"nvidia-smi-{h}.csv").write_text(head + "\n" + "\n".join(x[2] for x in rows) + "\n")


def _log(
    out: Path,
    hosts: list[str],
    per_host: int,
    node_of: dict[int, str],
    missing: tuple[int, ...],
    step_times: list[float],
    scenario: str,
) -> None:
    lines: list[str] = []
    for r in range(len(node_of)):
        if r in missing:
            continue
        h = node_of[r]
        pid = 3100 + r
        lines.append(
            f"{r:>3}: {h}:{pid}:{pid} [{r % per_host}] NCCL INFO NCCL version 2.20.5+cuda12.3"
        )
        lines.append(
            f"{r:>3}: {h}:{pid}:{pid} [{r % per_host}] NCCL INFO NCCL_IB_HCA set by environment to mlx5_0,mlx5_1"
        )
        lines.append(
            f"{r:>3}: {h}:{pid}:{pid + 40} [{r % per_host}] NCCL INFO comm 0x5601{r:04x} rank {r} nranks {len(node_of)} "
            f"cudaDev {r % per_host} nvmlDev {r % per_host} busId {r % per_host + 1}b000 commId 0x77aa - Init COMPLETE"
        )
    wall = START
    tokens = 4096 * 64
    for s, st in enumerate(step_times, start=1):
        wall += timedelta(seconds=st)
        if s % 10 == 0:
            lines.append(
                f"  0: {wall.isoformat(timespec='seconds')} INFO trainer: step {s} | loss {2.9 - 0.8 * s / len(step_times):.4f} "
                f"| tokens/s {tokens / st:,.1f} | step_time {st:.3f}s"
            )
    if scenario != "iterlog":
        lines.append(f"  0: {wall.isoformat(timespec='seconds')} INFO trainer: training finished")
    (out / "slurm-771234.out").write_text("\n".join(lines) + "\n")
