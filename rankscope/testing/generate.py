"""Generate realistic multi-rank training-job logs for tests, benchmarks and the demo incident.

Usage::

    python -m rankscope.testing.generate SCENARIO OUTDIR --ranks 128 [--style torchrun]
        [--version 2.8] [--wrap 0] [--target-mib 0] [--no-symptom]

Scenarios: data_stall, fabric, oom, xid, nan, time_limit, mismatch, slow_network,
retry_noise, healthy. Styles: torchrun (one file per node, ``[rankN]:`` prefixes),
viewer (a log viewer's ``[80746]`` in front), pdsh (``host:`` in front), srun
(one file, ``srun -l`` labels, no rank prefix), per_rank (``rank_N.log``, no prefix).
The output holds what real jobs print (NCCL INFO banners, ``NCCL_IB_TIMEOUT``
env lines, Megatron iteration lines with ``number of nan iterations: 0``,
retries that recover) and ``manifest.json`` with what a correct triage says.
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from . import formats as F
from .formats import T0
from .scenarios import SCENARIOS


@dataclass
class Spec:
    scenario: str
    ranks: int = 128
    per_node: int = 8
    style: str = "torchrun"
    version: str = "2.8"
    steps: int = 60
    hours: float = 5.0
    wrap: int = 0
    symptom: bool = True
    seed: int = 0
    job_id: int = 4242
    target_bytes: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class Job:
    """Collects timed lines per output file; ``write`` merges them with the bulk training lines."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.rng = random.Random(spec.seed)  # noqa: S311 — reproducible fixtures, not secrets
        self.nodes = (spec.ranks + spec.per_node - 1) // spec.per_node
        width = 3 if self.nodes > 99 else 2
        self.hosts = [f"node-{i:0{width}d}" for i in range(self.nodes)]
        self.pids = {r: 41000 + r * 7 for r in range(spec.ranks)}
        self.lines: dict[str, list[tuple[float, int, str]]] = {}
        self._n = 0
        self.stop_step: dict[int, int] = {}  # rank → last step it logs
        self.fail_time = T0 + timedelta(hours=spec.hours)
        self.step_seconds = spec.hours * 3600 / max(1, spec.steps)
        self.expected: dict[str, Any] = {}
        self.extra_files: dict[str, str] = {}
        self.finished = False

    # -- topology ---------------------------------------------------------
    def node(self, rank: int) -> int:
        return rank // self.spec.per_node

    def host(self, rank: int) -> str:
        return self.hosts[self.node(rank)]

    def local(self, rank: int) -> int:
        return rank % self.spec.per_node

    def file_for(self, rank: int | None, node: int | None = None) -> str:
        s = self.spec
        if s.style == "srun":
            return f"slurm-{s.job_id}.out"
        if s.style == "per_rank" and rank is not None:
            return f"rank_{rank}.log"
        n = self.node(rank) if rank is not None else (node or 0)
        return f"error-{s.job_id}-{n}.out"

    # -- envelopes ----------------------------------------------------------
    def glog(self, level: str, t: datetime, src: str) -> str:
        if self.spec.version == "2.1":
            return f"[{level} {src}]"
        return f"[{level}{t:%m%d %H:%M:%S}.{t.microsecond:06d}{self.rng.randrange(1000):03d} {src}]"

    def wrap_rank(self, rank: int, body: str) -> str:
        s = self.spec
        if s.style == "srun":
            return f"{rank}: {body}"
        if s.style == "per_rank":
            return body
        line = f"[rank{rank}]:{body}"
        if s.style == "viewer":
            return f"[{80000 + rank}] {line}"
        if s.style == "pdsh":
            return f"{self.host(rank)}: {line}"
        return line

    def add(self, file: str, t: datetime, text: str) -> None:
        self._n += 1
        parts = [text]
        w = self.spec.wrap
        if w and len(text) > w:
            parts = [text[i : i + w] for i in range(0, len(text), w)]
        for p in parts:
            self.lines.setdefault(file, []).append((t.timestamp(), self._n, p))
            self._n += 1

    def log(
        self, rank: int, t: datetime, level: str, msg: str, src: str = "ProcessGroupNCCL.cpp:1794"
    ) -> None:
        """A c10/glog line from a rank."""
        self.add(self.file_for(rank), t, self.wrap_rank(rank, f"{self.glog(level, t, src)} {msg}"))

    def out(self, rank: int, t: datetime, text: str) -> None:
        """A plain stdout/stderr line from a rank (Python print, traceback)."""
        self.add(
            self.file_for(rank),
            t,
            self.wrap_rank(rank, f" {text}" if self.spec.style != "per_rank" else text),
        )

    def agent(self, node: int, t: datetime, text: str) -> None:
        """A line from the node's torchrun agent or slurmstepd (no rank prefix)."""
        s = self.spec
        file = self.file_for(node * s.per_node if s.style == "per_rank" else None, node)
        if s.style == "srun":
            text = f"{node * s.per_node}: {text}"
        self.add(file, t, text)

    # -- common blocks --------------------------------------------------------
    def startup(self) -> None:
        s = self.spec
        for r in range(s.ranks):
            t = T0 + timedelta(seconds=5 + self.rng.random())
            h, pid, lr = self.host(r), self.pids[r], self.local(r)
            if r == 0:
                self.out(
                    r,
                    t,
                    f"using world size: {s.ranks}, data-parallel size: {s.ranks // 8}, tensor-model-parallel size: 8, pipeline-model-parallel size: 1",
                )
                self.out(r, t, "> building GPT model (megatron.core) ...")
            self.log(
                r,
                t,
                "I",
                f"{F.pg_prefix(s.version, r)}ProcessGroupNCCL initialization options: size: {s.ranks}, global rank: {r}, TIMEOUT(ms): {F.TIMEOUT_MS}, USE_HIGH_PRIORITY_STREAM: 0",
                "ProcessGroupNCCL.cpp:915",
            )
            for what in (
                f"Bootstrap : Using ib0:10.0.{self.node(r) // 250}.{self.node(r) % 250 + 1}<0>",
                "NCCL_IB_TIMEOUT set by environment to 22.",
                "NCCL_IB_RETRY_CNT set by environment to 7.",
                "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.0.0.1<0>",
                "Using network IB",
                f"comm 0x55d0c8{r:04x} rank {r} nranks {s.ranks} cudaDev {lr} nvmlDev {lr} busId {18 + lr}000 commId 0x8a7c3e1f - Init COMPLETE",
            ):
                self.out(r, t, F.nccl_line(h, pid, lr, what))
            self.log(
                r,
                t,
                "I",
                f"{F.pg_prefix(s.version, r)}PGNCCL Watchdog environments: TORCH_NCCL_RETHROW_CUDA_ERRORS: 1, TORCH_NCCL_PROPAGATE_ERROR: 0, TORCH_NCCL_DESYNC_DEBUG: 0",
                "ProcessGroupNCCL.cpp:1025",
            )

    def healthy_retries(self, count: int, ranks: list[int] | None = None) -> None:
        """Idle keep-alive resets that recover on the first retry (noise)."""
        pool = ranks if ranks is not None else list(range(self.spec.ranks))
        for _ in range(count):
            r = self.rng.choice(pool)
            t = T0 + timedelta(seconds=self.rng.uniform(600, self.spec.hours * 3600 * 0.9))
            shard = f"shard-{self.rng.randrange(100000):06d}.tar"
            if self.rng.random() < 0.5:
                self.log(
                    r,
                    t,
                    "W",
                    f"Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection broken by 'ProtocolError('Connection aborted.', ConnectionResetError(104, 'Connection reset by peer'))': /v1/objects/train/{shard}",
                    "connectionpool.py:870",
                )
            else:
                self.log(
                    r,
                    t,
                    "W",
                    f"GET ais://train/{shard} failed: Connection reset by peer; retrying 1/5",
                    "ais_client.py:214",
                )
            self.log(
                r,
                t + timedelta(milliseconds=40),
                "I",
                f"GET ais://train/{shard} ok after 1 retry (7.9 MiB)",
                "ais_client.py:230",
            )

    def torchrun_failures(self, failed: dict[int, tuple[datetime, int]]) -> None:
        """One ChildFailedError summary per node, as each agent prints it."""
        by_node: dict[int, list[dict[str, Any]]] = {}
        for r, (t, code) in failed.items():
            by_node.setdefault(self.node(r), []).append(
                {
                    "time": t,
                    "host": self.host(r),
                    "rank": r,
                    "local_rank": self.local(r),
                    "exitcode": code,
                    "pid": self.pids[r],
                }
            )
        for n, fails in by_node.items():
            fails.sort(key=lambda f: (f["time"], f["rank"]))
            root = fails[0]
            t = max(f["time"] for f in fails) + timedelta(seconds=2)
            self.agent(
                n,
                t,
                f"E{t:%m%d %H:%M:%S}.{t.microsecond:06d} {self.pids[root['rank']] - 100} torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: {root['exitcode']}) local_rank: {root['local_rank']} (pid: {root['pid']}) of binary: /usr/bin/python3",
            )
            for line in [
                "Traceback (most recent call last):",
                '  File "/usr/local/bin/torchrun", line 8, in <module>',
                "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
            ]:
                self.agent(n, t, line)
            for line in F.torchrun_summary("pretrain_gpt.py", fails, root):
                self.agent(n, t, line)

    def timeouts(
        self,
        ranks: list[int],
        seq: int,
        op: str,
        enq: int,
        comp: int,
        t_fire: datetime,
        *,
        first_dump: bool = True,
    ) -> None:
        v = self.spec.version
        for r in ranks:
            t = t_fire + timedelta(milliseconds=self.rng.randrange(0, 4000))
            self.log(
                r,
                t,
                "E",
                F.watchdog_timeout(v, r, seq, op, F.TIMEOUT_MS + self.rng.randrange(1, 900)),
                "ProcessGroupNCCL.cpp:632",
            )
            fail = F.watchdog_failure(v, r, seq, enq, comp)
            if fail:
                self.log(r, t, "E", fail, "ProcessGroupNCCL.cpp:2268")
                self.log(r, t, "E", F.stack_not_found(), "ProcessGroupNCCL.cpp:2272")
            fd = F.first_dump(v, r) if first_dump else None
            if fd:
                self.log(r, t, "E", fd, "ProcessGroupNCCL.cpp:1596")
            t2 = t + timedelta(seconds=60)
            for msg in F.teardown(r):
                self.log(r, t2, "E", msg, "ProcessGroupNCCL.cpp:668")
            if v == "2.8":
                self.log(
                    r,
                    t2,
                    "F",
                    f"{F.pg_prefix(v, r)}Terminating the process after attempting to dump debug info, due to collective timeout or exception.",
                    "ProcessGroupNCCL.cpp:1610",
                )

    # -- output -----------------------------------------------------------------
    def _bulk(self, file: str, ranks: list[int]) -> Iterator[tuple[float, int, str]]:
        """Training-loop lines, in time order (generated lazily: the benchmark writes ~1 GiB)."""
        s = self.spec
        last_rank = s.ranks - 1
        nan_from = s.extra.get("nan_from_step")
        for step in range(1, s.steps + 1):
            t = T0 + timedelta(seconds=60 + step * self.step_seconds)
            stamp = f"{t:%m%d %H:%M:%S}.{t.microsecond:06d}000"
            ts = t.timestamp()
            for r in ranks:
                if step > self.stop_step.get(r, s.steps):
                    continue
                fwd = 4090 + (r * 37 + step * 11) % 25
                body = f"[I{stamp} train.py:412] step {step} done: fwd-bwd {fwd}.2 ms, optimizer 120.3 ms, dataloader wait 3.1 ms, mem allocated 61.2 GiB"
                yield (ts, 0, self.wrap_rank(r, body))
                if r == last_rank and step % 5 == 0:
                    bad = nan_from is not None and step >= nan_from
                    loss = "NAN" if bad else f"{2.9 - step * 0.001:.6E}"
                    nan_iters = (step - nan_from + 1) if bad else 0
                    yield (
                        ts,
                        1,
                        self.wrap_rank(
                            r, F.megatron_iteration(step, 500000, 1234.5, loss, nan_iters, t)
                        ),
                    )

    def write(self, outdir: Path) -> list[Path]:
        outdir.mkdir(parents=True, exist_ok=True)
        s = self.spec
        files: dict[str, list[int]] = {}
        for r in range(s.ranks):
            files.setdefault(self.file_for(r), []).append(r)
        paths = []
        for name, ranks in files.items():
            extra = sorted(self.lines.get(name, []))
            with open(outdir / name, "w", encoding="utf-8", newline="\n") as fh:
                for _t, _n, text in heapq.merge(extra, self._bulk(name, ranks)):
                    fh.write(text + "\n")
            paths.append(outdir / name)
        for name, content in self.extra_files.items():
            (outdir / name).write_text(content, encoding="utf-8")
            paths.append(outdir / name)
        manifest = {
            "spec": asdict(s),
            "expected": self.expected,
            "files": sorted(p.name for p in paths),
        }
        (outdir / "manifest.json").write_text(
            json.dumps(manifest, indent=2, default=str), encoding="utf-8"
        )
        return paths


def generate(
    scenario: str, outdir: str | Path, *, ranks: int = 128, **kwargs: Any
) -> dict[str, Any]:
    """Write one job's files into ``outdir``; return the manifest (with ``expected``)."""
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; one of {', '.join(sorted(SCENARIOS))}")
    spec = Spec(scenario=scenario, ranks=ranks, **kwargs)
    if spec.target_bytes:
        spec.steps = max(spec.steps, spec.target_bytes // (spec.ranks * 150))
    job = Job(spec)
    job.startup()
    SCENARIOS[scenario](job)
    job.write(Path(outdir))
    return json.loads((Path(outdir) / "manifest.json").read_text(encoding="utf-8"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("scenario", choices=sorted(SCENARIOS))
    p.add_argument("outdir")
    p.add_argument("--ranks", type=int, default=128)
    p.add_argument("--per-node", type=int, default=8)
    p.add_argument(
        "--style", default="torchrun", choices=["torchrun", "viewer", "pdsh", "srun", "per_rank"]
    )
    p.add_argument("--version", default="2.8", choices=["2.8", "2.5", "2.3", "2.1"])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--wrap", type=int, default=0, help="split lines longer than this many columns")
    p.add_argument(
        "--target-mib", type=int, default=0, help="add training lines until about this size"
    )
    p.add_argument(
        "--no-symptom", action="store_true", help="data_stall without a data-loader symptom"
    )
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    m = generate(
        a.scenario,
        a.outdir,
        ranks=a.ranks,
        per_node=a.per_node,
        style=a.style,
        version=a.version,
        steps=a.steps,
        wrap=a.wrap,
        target_bytes=a.target_mib << 20,
        symptom=not a.no_symptom,
        seed=a.seed,
    )
    print(json.dumps(m["expected"], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
