"""A job as a SLURM cluster with W&B and DCGM exporters leaves it (independent of ``generate``).

Written without looking at how the engine reads anything: file names, columns and
units are those of the tools named.

- Logs: one file per node (``logs/<host>.log``), every line prefixed ``[rankN]:`` the way
  ``torchrun --tee`` + ``--log-dir`` merges them, with NCCL INFO banners (version,
  ``NCCL_*`` from the environment) and Megatron-style timers; hosts ``cn-a01…`` (UTC).
- Per-step metrics: one W&B history export per rank, ``wandb/run-rank_<r>.csv``, with
  W&B's ``_step``/``_timestamp`` (epoch s) and Megatron's TensorBoard timer names in
  seconds (``forward-backward-time``, ``grads-all-reduce-time``, ``batch-generator-time``,
  ``iteration-time``), plus ``train/loss`` and ``lr`` (a column no alias knows).
- GPU telemetry: a Prometheus range query over dcgm-exporter saved as CSV,
  ``dcgm.csv``: ``timestamp`` (epoch ms), ``Hostname``, ``gpu``, ``__name__``, ``value``
  (one row per sample and field: ``DCGM_FI_DEV_GPU_TEMP``, ``DCGM_FI_DEV_SM_CLOCK``,
  ``DCGM_FI_DEV_POWER_USAGE``).
- ``missing``: ranks that left no metrics and no log lines (a node whose copy failed).

Timing model (synchronous data parallel): each rank's own work = forward-backward +
batch wait; the all-reduce of a rank lasts its link's time plus the wait for the slowest
rank's own work; the step of every rank lasts the slowest own work + the slowest link.

Scenarios: ``network`` (the all-reduce on two hosts rises ``factor`` x from ``onset``,
compute flat), ``thermal`` (one GPU heats, its clock falls, its compute grows), ``data``
(one rank's batch wait grows), ``version`` (one host runs another NCCL build),
``mismatch`` (one rank enqueues another collective; the job hangs), ``healthy``.
``write_job`` returns the truth a correct triage concludes.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path
from typing import Any

T0 = 1_770_000_000  # epoch seconds of step 0 (UTC)


def write_job(
    out: Path,
    scenario: str,
    *,
    seed: int = 0,
    nodes: int = 6,
    gpus: int = 8,
    steps: int = 240,
    missing: tuple[int, ...] = (),
    factor: float = 3.0,
) -> dict[str, Any]:
    rnd = random.Random(seed)  # noqa: S311 — reproducible fixtures, not secrets
    out.mkdir(parents=True, exist_ok=True)
    hosts = [f"cn-a{i + 1:02d}" for i in range(nodes)]
    world = nodes * gpus
    onset = rnd.randint(steps // 3, steps // 2)
    host_of = {r: hosts[r // gpus] for r in range(world)}
    truth: dict[str, Any] = {"scenario": scenario, "world": world, "onset_step": onset}
    slow_hosts, culprit = _fault(truth, rnd, scenario, hosts, gpus, host_of, missing)
    alive = [r for r in range(world) if r not in missing]
    rows, temps = _simulate(
        rnd, scenario, gpus, steps, onset, factor, host_of, alive, slow_hosts, culprit
    )
    _write_wandb(out, rows)
    _write_dcgm(out, temps)
    _logs(out, scenario, hosts, gpus, alive, host_of, culprit, truth, rnd, steps, onset)
    return truth


def _fault(
    truth: dict[str, Any],
    rnd: random.Random,
    scenario: str,
    hosts: list[str],
    gpus: int,
    host_of: dict[int, str],
    missing: tuple[int, ...],
) -> tuple[list[str], int | None]:
    """Pick the scenario's slow hosts, culprit rank or odd host and record them in ``truth``."""
    slow_hosts: list[str] = []
    culprit: int | None = None
    world = len(host_of)
    if scenario == "network":
        a = rnd.randrange(len(hosts) - 1)
        slow_hosts = [hosts[a], hosts[a + 1]]
        truth.update(category="NETWORK", shape="slow", hosts=slow_hosts, ranks=None)
    elif scenario in ("thermal", "data", "mismatch"):
        culprit = rnd.choice([r for r in range(world) if r not in missing])
        cat = {"thermal": "HARDWARE", "data": "DATA", "mismatch": "SOFTWARE"}[scenario]
        truth.update(
            category=cat,
            shape="slow" if scenario != "mismatch" else "hang",
            hosts=[host_of[culprit]],
            ranks=[culprit],
            gpu=culprit % gpus,
        )
    elif scenario == "version":
        odd_host = rnd.choice(hosts)
        truth.update(
            odd_version_ranks=[r for r in range(world) if host_of[r] == odd_host],
            odd_host=odd_host,
        )
    return slow_hosts, culprit


Samples = dict[tuple[str, int], list[tuple[int, float, float, float]]]


def _simulate(
    rnd: random.Random,
    scenario: str,
    gpus: int,
    steps: int,
    onset: int,
    factor: float,
    host_of: dict[int, str],
    alive: list[int],
    slow_hosts: list[str],
    culprit: int | None,
) -> tuple[dict[int, list[dict[str, Any]]], Samples]:
    """Run the timing model: every live rank's W&B rows and, every other step, its GPU samples."""
    world = len(host_of)
    fb = {r: 0.82 * rnd.uniform(0.98, 1.02) for r in range(world)}
    rows: dict[int, list[dict[str, Any]]] = {r: [] for r in alive}
    temps: Samples = {}
    t = float(T0)
    for s in range(1, steps + 1):
        heat = 0.0
        if scenario == "thermal" and s >= onset:
            heat = min(1.0, (s - onset) / 20)
        own, link = {}, {}
        for r in range(world):
            own[r] = _own_time(rnd, fb[r], s, onset, heat, scenario, r == culprit)
            base = 0.21 * rnd.uniform(0.97, 1.03)
            link[r] = base * (factor if host_of[r] in slow_hosts and s >= onset else 1.0)
        slowest = max(c + w for c, w in own.values())
        step_time = slowest + max(link.values())
        t += step_time
        for r in alive:
            c, w = own[r]
            rows[r].append(
                {
                    "_step": s,
                    "_timestamp": round(t, 3),
                    "_runtime": round(t - T0, 3),
                    "forward-backward-time": round(c, 5),
                    "batch-generator-time": round(w, 5),
                    "grads-all-reduce-time": round(link[r] + slowest - (c + w), 5),
                    "iteration-time": round(step_time, 5),
                    "train/loss": round(3.2 - s / steps + rnd.uniform(-0.02, 0.02), 4),
                    "lr": 3e-4,
                }
            )
        if s % 2 == 0:
            _sample_gpus(temps, rnd, t, heat, scenario, gpus, host_of, alive, culprit)
    return rows, temps


def _own_time(
    rnd: random.Random,
    fb: float,
    s: int,
    onset: int,
    heat: float,
    scenario: str,
    is_culprit: bool,
) -> tuple[float, float]:
    """One rank's compute and batch wait at step ``s`` (the culprit's grow after the onset)."""
    comp = fb * rnd.uniform(0.985, 1.015)
    wait = 0.004 * rnd.uniform(0.5, 1.5)
    if is_culprit and scenario == "thermal":
        comp *= 1 + 0.55 * heat
    if is_culprit and scenario == "data" and s >= onset:
        wait += 0.9 * min(1.0, (s - onset + 1) / 5)
    return comp, wait


def _sample_gpus(
    temps: Samples,
    rnd: random.Random,
    t: float,
    heat: float,
    scenario: str,
    gpus: int,
    host_of: dict[int, str],
    alive: list[int],
    culprit: int | None,
) -> None:
    """One DCGM sample (temperature, SM clock, power) of every live rank's GPU at time ``t``."""
    for r in alive:
        hot = r == culprit and scenario == "thermal"
        temp = 63 + rnd.uniform(-2, 2) + (26 * heat if hot else 0)
        clock = 1980 - (720 * heat if hot else 0) + rnd.uniform(-15, 15)
        power = 640 + rnd.uniform(-25, 25)
        temps.setdefault((host_of[r], r % gpus), []).append((int(t * 1000), temp, clock, power))


def _write_wandb(out: Path, rows: dict[int, list[dict[str, Any]]]) -> None:
    """One W&B CSV export per live rank under ``wandb/``."""
    wandb = out / "wandb"
    wandb.mkdir(exist_ok=True)
    cols = list(next(iter(rows.values()))[0])
    for r, rs in rows.items():
        with open(wandb / f"run-rank_{r:03d}.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols)
            w.writeheader()
            w.writerows(rs)


def _write_dcgm(out: Path, temps: Samples) -> None:
    """``dcgm.csv``: the GPU samples as a Prometheus long-format export."""
    with open(out / "dcgm.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["timestamp", "Hostname", "gpu", "modelName", "__name__", "value"])
        for (h, g), samples in sorted(temps.items()):
            for ts, temp, clock, power in samples:
                w.writerow([ts, h, g, "NVIDIA H100 80GB HBM3", "DCGM_FI_DEV_GPU_TEMP", round(temp)])
                w.writerow(
                    [ts, h, g, "NVIDIA H100 80GB HBM3", "DCGM_FI_DEV_SM_CLOCK", round(clock)]
                )
                w.writerow(
                    [ts, h, g, "NVIDIA H100 80GB HBM3", "DCGM_FI_DEV_POWER_USAGE", round(power, 3)]
                )


def _stamp(epoch: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _logs(
    out: Path,
    scenario: str,
    hosts: list[str],
    gpus: int,
    alive: list[int],
    host_of: dict[int, str],
    culprit: int | None,
    truth: dict[str, Any],
    rnd: random.Random,
    steps: int,
    onset: int,
) -> None:
    logs = out / "logs"
    logs.mkdir(exist_ok=True)
    per_host: dict[str, list[str]] = {h: [] for h in hosts}
    odd = set(truth.get("odd_version_ranks", []))
    for r in alive:
        h = host_of[r]
        pid = 40000 + r
        nv = "2.19.3+cuda12.2" if r in odd else "2.21.5+cuda12.4"
        per_host[h] += [
            f"[rank{r}]:{h}:{pid}:{pid} [{r % gpus}] NCCL INFO Bootstrap : Using ib0:10.4.{hosts.index(h)}.1<0>",
            f"[rank{r}]:{h}:{pid}:{pid} [{r % gpus}] NCCL INFO NCCL version {nv}",
            f"[rank{r}]:{h}:{pid}:{pid} [{r % gpus}] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ib0",
            f"[rank{r}]:{h}:{pid}:{pid} [{r % gpus}] NCCL INFO NCCL_IB_TIMEOUT set by environment to 20.",
            f"[rank{r}]:{h}:{pid}:{pid + 17} [{r % gpus}] NCCL INFO comm 0x7f3a{r:04x} rank {r} nranks {truth['world']} cudaDev {r % gpus} nvmlDev {r % gpus} busId {0x18 + r % gpus:x}000 commId 0x51ab - Init COMPLETE",
        ]
    last = steps if scenario != "mismatch" else onset
    t = T0
    for s in range(10, last + 1, 10):
        t += 10 * 1.1
        r0 = alive[-1]  # Megatron prints iteration lines on the last rank
        per_host[host_of[r0]].append(
            f"[rank{r0}]: [{_stamp(t)}] iteration {s:8d}/ {steps:8d} | consumed samples: {s * 256:10d} | "
            f"learning rate: 3.000000E-04 | global batch size:   256 | lm loss: {3.2 - s / steps:.6E} | "
            f"loss scale: 1.0 | grad norm: 0.412 | number of skipped iterations:   0 | number of nan iterations:   0 |"
        )
    if scenario == "mismatch":
        seq = 4000 + onset * 3
        numel = 25_165_824
        for r in alive:
            op, nin = ("ALLREDUCE", numel) if r != culprit else ("ALLGATHER", numel // 8)
            nout = nin if op == "ALLREDUCE" else numel
            per_host[host_of[r]].append(
                f"[rank{r}]:[E{_stamp(t + 600)[5:7]}{_stamp(t + 600)[8:10]} {_stamp(t + 600)[11:]}.{rnd.randint(100000, 999999)} ProcessGroupNCCL.cpp:616] "
                f"[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, "
                f"NumelIn={nin}, NumelOut={nout}, Timeout(ms)=600000) ran for 600{rnd.randint(10, 99)} milliseconds before timing out."
            )
    for h, lines in per_host.items():
        if lines:
            (logs / f"{h}.log").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":  # pragma: no cover
    import argparse
    import json

    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("scenario")
    p.add_argument("out", type=Path)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--missing", type=int, nargs="*", default=[])
    a = p.parse_args()
    print(json.dumps(write_job(a.out, a.scenario, seed=a.seed, missing=tuple(a.missing)), indent=1))
