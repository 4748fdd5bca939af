"""Benchmark the analysis engine against ripgrep on a generated ~1 GiB, 1,024-rank job.

    .venv/bin/python bench/engine/run.py [--ranks 1024] [--mib 1024] [--out bench/out/engine]

Measures, in the same run and on the same files (page cache warm for both):
- ripgrep with the engine's own pattern set (``-f patterns.txt``, ``-n``), at -j1
  and at its default thread count;
- the engine's scan (``parse_artifact`` on every file: prefilter + precise parse
  + head/tail facts) at the same thread counts (one process per thread);
- end-to-end ``triage --format json`` (a fresh process: parse + analyze + render)
  against ripgrep's default run;
- peak RSS of the triage process tree.
Prints a Markdown table for docs/performance.md. Needs ``rg`` (apt-get install ripgrep).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from multiprocessing import get_context
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from apps.analysis.engine import parse_artifact  # noqa: E402
from apps.analysis.engine.patterns import write_pattern_file  # noqa: E402
from apps.analysis.engine.scan import get_scanner  # noqa: E402
from apps.analysis.engine.testing.generate import generate  # noqa: E402


def _parse_one(path: str) -> int:
    with open(path, "rb") as f:
        r = parse_artifact(f, name=os.path.basename(path))
    return len(r.events)


def engine_scan(files: list[str], jobs: int) -> tuple[float, int]:
    t0 = time.perf_counter()
    if jobs == 1:
        n = sum(_parse_one(f) for f in files)
    else:
        with ProcessPoolExecutor(jobs, mp_context=get_context("fork")) as pool:
            n = sum(pool.map(_parse_one, files, chunksize=4))
    return time.perf_counter() - t0, n


def prefilter_only(files: list[str]) -> float:
    sc = get_scanner()
    t0 = time.perf_counter()
    for f in files:
        with open(f, "rb") as fh:
            while True:
                b = fh.read(8 << 20)
                if not b:
                    break
                sc.line_spans(b)
    return time.perf_counter() - t0


def rg(files: list[str], patterns: Path, jobs: int | None, out: Path) -> tuple[float, int]:
    cmd = ["rg", "-n", "--no-messages", "-f", str(patterns)]
    if jobs:
        cmd += ["-j", str(jobs)]
    t0 = time.perf_counter()
    with open(out, "wb") as fh:  # a real file: rg takes shortcuts when stdout is /dev/null
        subprocess.run([*cmd, *files], stdout=fh, check=False)
    dt = time.perf_counter() - t0
    with open(out, "rb") as fh:
        lines = sum(1 for _ in fh)
    return dt, lines


def triage_e2e(target: Path, out: Path) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    with open(out, "wb") as fh:
        subprocess.run(
            [sys.executable, "-m", "apps.analysis.engine.cli", str(target), "--format", "json"],
            stdout=fh,
            check=True,
            cwd=ROOT,
        )
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return dt, max(peak, before) / 1024.0


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=1024)
    p.add_argument("--mib", type=int, default=1024)
    p.add_argument("--out", default=str(ROOT / "bench" / "out" / "engine"))
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    if not shutil.which("rg"):
        print("ripgrep (rg) is needed: apt-get install -y ripgrep", file=sys.stderr)
        return 2
    out = Path(a.out)
    job = out / f"job-{a.ranks}"
    if not (job / "manifest.json").exists():
        t0 = time.perf_counter()
        generate("data_stall", job, ranks=a.ranks, target_bytes=a.mib << 20, steps=60)
        print(f"generated in {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    files = sorted(str(f) for f in job.iterdir() if f.name != "manifest.json")
    total = sum(os.path.getsize(f) for f in files)
    mb = total / 1e6
    patterns = write_pattern_file(out / "patterns.txt")
    for f in files:  # warm the page cache for everyone
        with open(f, "rb") as fh:
            while fh.read(16 << 20):
                pass
    cpus = os.cpu_count() or 1

    def best(fn, *args):
        runs = [fn(*args) for _ in range(a.repeat)]
        return min(runs, key=lambda r: r[0] if isinstance(r, tuple) else r)

    rg1, rg1_lines = best(rg, files, patterns, 1, out / "rg.out")
    rgd, _ = best(rg, files, patterns, None, out / "rg.out")
    pf = min(prefilter_only(files) for _ in range(a.repeat))
    en1, events = best(engine_scan, files, 1)
    end, _ = best(engine_scan, files, cpus)
    e2e, rss = min(
        (triage_e2e(job, out / "triage.json") for _ in range(a.repeat)), key=lambda r: r[0]
    )

    rows = [
        ("ripgrep -j1 (same patterns, -n)", rg1, f"{rg1_lines} matching lines"),
        (f"ripgrep default threads ({cpus})", rgd, ""),
        (
            "engine prefilter only, 1 thread (" + get_scanner().name + ")",
            pf,
            "candidate lines, no parsing",
        ),
        ("engine scan, 1 process", en1, f"{events} events kept"),
        (f"engine scan, {cpus} processes", end, ""),
        (f"triage end to end ({cpus} processes, JSON)", e2e, f"peak RSS {rss:.0f} MB"),
    ]
    print(
        f"\n### {datetime.now(UTC):%Y-%m-%d}, {platform.node()} ({cpus} cores, {platform.processor() or platform.machine()}), "
        f"{len(files)} files, {mb:.0f} MB, {a.ranks} ranks\n"
    )
    print("| run | seconds | MB/s | note |")
    print("|---|---|---|---|")
    for name, sec, note in rows:
        print(f"| {name} | {sec:.2f} | {mb / sec:.0f} | {note} |")
    print()
    print(f"- scan vs ripgrep, 1 thread: **{rg1 / en1:.2f}x** ripgrep's throughput (target >= 2x)")
    print(f"- scan vs ripgrep, {cpus} threads: **{rgd / end:.2f}x**")
    print(f"- end-to-end triage / ripgrep default: **{e2e / rgd:.2f}x** the time (target <= 1.5x)")
    print(f"- peak RSS of triage: **{rss:.0f} MB** (target ≤ 300 MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
