"""Benchmark the analysis engine against ripgrep on a generated ~1 GiB, 1,024-rank job.

    .venv/bin/python bench/engine/run.py [--ranks 1024] [--mib 1024] [--repeat 5] [--out DIR]

Measures, in the same run and on the same files (page cache warm for both):
- ripgrep with the engine's own pattern set (``-f patterns.txt``), at -j1 and at its
  default thread count, each time both as ``-n`` (matching lines with line numbers, what
  the engine produces) and as ``-c`` (counts only); the faster of the two is the baseline;
  output goes to a real file (ripgrep may stop at the first match when stdout is /dev/null);
- the engine's scan (``parse_artifact`` on every file: prefilter + precise parse
  + head/tail facts) at the same thread counts (one process per thread, pool start included);
- end-to-end ``python -m rankscope triage DIR --format json`` (a fresh process:
  imports, parse, analyze, render) against ripgrep's default run;
- peak RSS of the triage process tree.
The machine is shared: every round runs all contenders back to back (interleaved, so load
hits them alike) and each keeps its best of ``--repeat`` rounds; CPU seconds (user+sys) and
the load average are printed next to wall time. Prints a Markdown table for
docs/performance.md. Needs ``rg`` (apt-get install ripgrep).
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

from rankscope import parse_artifact  # noqa: E402
from rankscope.patterns import write_pattern_file  # noqa: E402
from rankscope.scan import get_scanner  # noqa: E402
from rankscope.testing.generate import generate  # noqa: E402


def _parse_one(path: str) -> int:
    with open(path, "rb") as f:
        r = parse_artifact(f, name=os.path.basename(path))
    return len(r.events)


def _cpu() -> float:
    """CPU seconds (user+sys) of this process and its reaped children so far."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + ch.ru_utime + ch.ru_stime


def engine_scan(files: list[str], jobs: int) -> tuple[float, float, int]:
    c0, t0 = _cpu(), time.perf_counter()
    if jobs == 1:
        n = sum(_parse_one(f) for f in files)
    else:
        with ProcessPoolExecutor(jobs, mp_context=get_context("fork")) as pool:
            n = sum(pool.map(_parse_one, files, chunksize=4))
    return time.perf_counter() - t0, _cpu() - c0, n


def prefilter_only(files: list[str]) -> tuple[float, float, int]:
    sc = get_scanner()
    buf = bytearray(2 << 20)
    view = memoryview(buf)
    n = 0
    c0, t0 = _cpu(), time.perf_counter()
    for f in files:
        with open(f, "rb") as fh:
            while k := fh.readinto(buf):
                n += len(sc.line_spans(view[:k]))
    return time.perf_counter() - t0, _cpu() - c0, n


def rg(
    files: list[str], patterns: Path, jobs: int | None, out: Path, mode: str = "-n"
) -> tuple[float, float, int]:
    cmd = ["rg", mode, "--no-messages", "-f", str(patterns)]
    if jobs:
        cmd += ["-j", str(jobs)]
    c0, t0 = _cpu(), time.perf_counter()
    with open(out, "wb") as fh:  # a real file: rg may take shortcuts when stdout is /dev/null
        subprocess.run([*cmd, *files], stdout=fh, check=False)
    dt, cpu = time.perf_counter() - t0, _cpu() - c0
    with open(out, "rb") as fh:
        if mode == "-c":
            lines = sum(int(ln.rsplit(b":", 1)[1]) for ln in fh if b":" in ln)
        else:
            lines = sum(1 for _ in fh)
    return dt, cpu, lines


def triage_e2e(target: Path, out: Path) -> tuple[float, float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    c0, t0 = _cpu(), time.perf_counter()
    with open(out, "wb") as fh:
        subprocess.run(
            [sys.executable, "-m", "rankscope", "triage", str(target), "--format", "json"],
            stdout=fh,
            check=True,
            cwd=ROOT,
        )
    dt, cpu = time.perf_counter() - t0, _cpu() - c0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return dt, cpu, max(peak, before) / 1024.0


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=1024)
    p.add_argument("--mib", type=int, default=1024)
    p.add_argument("--out", default=str(ROOT / "bench" / "out" / "engine"))
    p.add_argument("--repeat", type=int, default=5)
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
    load0 = os.getloadavg()[0]

    runs: dict[str, list[tuple]] = {}

    def add(key: str, r: tuple) -> None:
        runs.setdefault(key, []).append(r)

    for _ in range(a.repeat):  # interleaved rounds: load on the shared machine hits all alike
        add("rg1-n", rg(files, patterns, 1, out / "rg.out", "-n"))
        add("rg1-c", rg(files, patterns, 1, out / "rg.out", "-c"))
        add("en1", engine_scan(files, 1))
        add("rgd-n", rg(files, patterns, None, out / "rg.out", "-n"))
        add("rgd-c", rg(files, patterns, None, out / "rg.out", "-c"))
        add("end", engine_scan(files, cpus))
        add("pf", prefilter_only(files))
        add("e2e", triage_e2e(job, out / "triage.json"))
    load1 = os.getloadavg()[0]
    b = {k: min(v, key=lambda r: r[0]) for k, v in runs.items()}
    rg1 = min(b["rg1-n"], b["rg1-c"], key=lambda r: r[0])
    rgd = min(b["rgd-n"], b["rgd-c"], key=lambda r: r[0])
    en1, end, pf, e2e = b["en1"], b["end"], b["pf"], b["e2e"]

    rows = [
        ("ripgrep -j1, -n (same patterns)", b["rg1-n"], f"{b['rg1-n'][2]} matching lines"),
        ("ripgrep -j1, -c", b["rg1-c"], f"{b['rg1-c'][2]} counted"),
        (f"ripgrep default threads ({cpus}), -n", b["rgd-n"], ""),
        (f"ripgrep default threads ({cpus}), -c", b["rgd-c"], ""),
        (
            "engine prefilter only, 1 thread (" + get_scanner().name + ")",
            pf,
            f"{pf[2]} candidate lines, no parsing",
        ),
        ("engine scan, 1 process", en1, f"{en1[2]} events kept"),
        (f"engine scan, {cpus} processes", end, "pool start included"),
        (f"triage end to end ({cpus} processes, JSON)", e2e, f"peak RSS {e2e[2]:.0f} MB"),
    ]
    print(
        f"\n### {datetime.now(UTC):%Y-%m-%d}, {platform.node()} ({cpus} cores, "
        f"{platform.processor() or platform.machine()}), {len(files)} files, {mb:.0f} MB, "
        f"{a.ranks} ranks, best of {a.repeat} interleaved rounds, load {load0:.1f} → {load1:.1f}\n"
    )
    print("| run | wall s | MB/s | CPU s | note |")
    print("|---|---|---|---|---|")
    for name, r, note in rows:
        print(f"| {name} | {r[0]:.2f} | {mb / r[0]:.0f} | {r[1]:.2f} | {note} |")
    print()
    print(
        f"- scan vs ripgrep (faster of -n/-c), 1 thread: **{rg1[0] / en1[0]:.2f}x** ripgrep's "
        f"throughput (target >= 2x); CPU seconds {rg1[1] / en1[1]:.2f}x"
    )
    print(f"- scan vs ripgrep, {cpus} threads: **{rgd[0] / end[0]:.2f}x**")
    print(
        f"- end-to-end triage / ripgrep default: **{e2e[0] / rgd[0]:.2f}x** the time "
        "(target <= 1.5x)"
    )
    print(f"- peak RSS of triage: **{e2e[2]:.0f} MB** (target ≤ 300 MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
