"""Benchmark the offline triage against ripgrep, on generated jobs of two layouts and sizes.

    .venv/bin/python bench/engine/run.py [--sizes 360,1024] [--repeat 3] [--out DIR]

For each job — one file per node (torchrun's ``[rankN]:`` prefixes, 8 ranks a file) and
one file per rank (``rank_N.log``, no prefix), of ~360 MiB (512 ranks) and ~1 GiB
(1,024 ranks), the ``data_stall`` scenario — measures in the same run and on the same
files (page cache warm for both):
- ripgrep with the engine's own prefilter pattern set (``-f patterns.txt``) at its
  default thread count, as ``-n`` (matching lines with line numbers, what the engine
  produces) and as ``-c`` (counts only); the faster of the two is the baseline; output
  goes to a real file (ripgrep may stop at the first match when stdout is /dev/null);
- the documented command end to end, ``python -m rankscope triage DIR --format json``
  in a fresh process (imports, parse in a pool, analysis, JSON), with bytecode allowed
  as an installed package has it, and the peak RSS of its process tree;
- the cost of a candidate line: the engine's parse in one process, minus the same parse
  with the reading of candidate lines switched off (``TextLogParser._line`` returning at
  once), divided by the prefilter's candidate lines — the marginal cost, same run, same
  bytes;
- the work of a file beyond the prefilter: the parse with candidate lines switched off,
  minus the prefilter alone over the same bytes read the same way (mapped), per file
  (kind detection, head/tail facts, side readers, line numbers, the result).
And for the per-node 360 MiB job compressed with zstd and gzip: the triage end to end on
the compressed files and each decompressor's throughput alone (one thread).
The machine is shared: each round runs every contender back to back (interleaved, so
load hits them alike) and each keeps its best of ``--repeat`` rounds; CPU seconds
(user+sys) and the load average are printed next to wall time. Prints Markdown for
docs/performance.md. Needs ``rg`` (apt-get install ripgrep).
"""

from __future__ import annotations

import argparse
import gzip
import mmap
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

import zstandard

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from rankscope import parse_artifact  # noqa: E402
from rankscope.parsers import textlog  # noqa: E402
from rankscope.patterns import write_pattern_file  # noqa: E402
from rankscope.scan import get_scanner  # noqa: E402
from rankscope.sources import read_one  # noqa: E402
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
    """The prefilter alone, each file mapped as the parse maps it (read when it is not)."""
    sc = get_scanner()
    buf = bytearray(2 << 20)
    view = memoryview(buf)
    n = 0
    c0, t0 = _cpu(), time.perf_counter()
    for f in files:
        with open(f, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if textlog.MAP_MIN <= size <= textlog.MAP_MAX:
                with (
                    mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm,
                    memoryview(mm) as whole,
                ):
                    n += len(sc.line_spans(whole))
                continue
            while k := fh.readinto(buf):
                n += len(sc.line_spans(view[:k]))
    return time.perf_counter() - t0, _cpu() - c0, n


def engine_scan_without_lines(files: list[str]) -> tuple[float, float, int]:
    """``engine_scan`` in one process with candidate lines not read (``_line`` returns)."""
    real = textlog.TextLogParser._line

    def skip(self, block, limit, s, e, *args, **kwargs):  # type: ignore[no-untyped-def]
        return e

    textlog.TextLogParser._line = skip  # type: ignore[method-assign]
    try:
        return engine_scan(files, 1)
    finally:
        textlog.TextLogParser._line = real  # type: ignore[method-assign]


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
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    c0, t0 = _cpu(), time.perf_counter()
    with open(out, "wb") as fh:
        done = subprocess.run(
            [sys.executable, "-m", "rankscope", "triage", str(target), "--format", "json"],
            stdout=fh,
            cwd=ROOT,
            env=env,
            check=False,
        )
    dt, cpu = time.perf_counter() - t0, _cpu() - c0
    if done.returncode not in (0, 1):
        raise SystemExit(f"triage failed on {target} with exit status {done.returncode}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return dt, cpu, max(peak, before) / 1024.0


def decompress_only(files: list[str]) -> tuple[float, float, int]:
    """Read every compressed file through the engine's own decompressing reader."""
    n = 0
    c0, t0 = _cpu(), time.perf_counter()
    for f in files:
        for _name, stream in read_one(Path(f), os.path.basename(f)):
            while chunk := stream.read(4 << 20):
                n += len(chunk)
    return time.perf_counter() - t0, _cpu() - c0, n


def make_job(out: Path, layout: str, mib: int) -> Path:
    ranks = 512 if mib <= 512 else 1024
    job = out / f"job-{layout}-{mib}"
    if not (job / "manifest.json").exists():
        t0 = time.perf_counter()
        style = "per_rank" if layout == "rank" else "torchrun"
        generate("data_stall", job, ranks=ranks, target_bytes=mib << 20, steps=60, style=style)
        print(f"generated {job.name} in {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    return job


def compressed_copy(job: Path, codec: str) -> Path:
    dest = job.with_name(f"{job.name}-{codec}")
    if not (dest / "done").exists():
        dest.mkdir(exist_ok=True)
        for f in sorted(job.iterdir()):
            if f.name == "manifest.json":
                continue
            data = f.read_bytes()
            if codec == "zst":
                (dest / f"{f.name}.zst").write_bytes(
                    zstandard.ZstdCompressor(level=3).compress(data)
                )
            else:
                (dest / f"{f.name}.gz").write_bytes(gzip.compress(data, compresslevel=6))
        (dest / "done").write_text("")
    return dest


def logs(job: Path) -> list[str]:
    return sorted(str(f) for f in job.iterdir() if f.name not in ("manifest.json", "done"))


def warm(files: list[str]) -> None:
    for f in files:
        with open(f, "rb") as fh:
            while fh.read(16 << 20):
                pass


def best(v: list[tuple]) -> tuple:
    return min(v, key=lambda r: r[0])


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="360,1024", help="job sizes in MiB")
    p.add_argument("--layouts", default="node,rank")
    p.add_argument("--out", default=str(ROOT / "bench" / "out" / "engine"))
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    if not shutil.which("rg"):
        print("ripgrep (rg) is needed: apt-get install -y ripgrep", file=sys.stderr)
        return 2
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    patterns = write_pattern_file(out / "patterns.txt")
    cpus = os.cpu_count() or 1
    load0 = os.getloadavg()[0]
    jobs = [
        (layout, int(mib), make_job(out, layout, int(mib)))
        for mib in a.sizes.split(",")
        for layout in a.layouts.split(",")
    ]
    print(
        f"\n### {datetime.now(UTC):%Y-%m-%d}, {platform.node()} ({cpus} cores, "
        f"{platform.processor() or platform.machine()}), ripgrep "
        f"{subprocess.run(['rg', '--version'], capture_output=True, text=True).stdout.split()[1]}"
        f", best of {a.repeat} interleaved rounds\n"
    )
    print(
        "| job | files | MB | ripgrep -n s | ripgrep -c s | triage s (CPU s) | triage / ripgrep "
        "| peak RSS MB | candidate lines | µs per candidate line | ms per file beyond the "
        "prefilter |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for layout, mib, job in jobs:
        files = logs(job)
        mb = sum(os.path.getsize(f) for f in files) / 1e6
        warm(files)
        runs: dict[str, list[tuple]] = {}
        for _ in range(a.repeat):  # interleaved rounds: load on the shared machine hits all alike
            runs.setdefault("rg-n", []).append(rg(files, patterns, None, out / "rg.out", "-n"))
            runs.setdefault("rg-c", []).append(rg(files, patterns, None, out / "rg.out", "-c"))
            runs.setdefault("e2e", []).append(triage_e2e(job, out / "triage.json"))
        for _ in range(a.repeat):  # interleaved as above; CPU seconds compared
            runs.setdefault("pf", []).append(prefilter_only(files))
            runs.setdefault("en1", []).append(engine_scan(files, 1))
            runs.setdefault("en0", []).append(engine_scan_without_lines(files))
        pf, en1, en0 = (min(runs[k], key=lambda r: r[1]) for k in ("pf", "en1", "en0"))
        rgn, rgc, e2e = best(runs["rg-n"]), best(runs["rg-c"]), best(runs["e2e"])
        base = min(rgn[0], rgc[0])
        per_line = max(0.0, en1[1] - en0[1]) / max(pf[2], 1) * 1e6
        per_file = max(0.0, en0[1] - pf[1]) / len(files) * 1e3
        name = f"one file per {layout}, {mib} MiB"
        print(
            f"| {name} | {len(files)} | {mb:.0f} | {rgn[0]:.2f} | {rgc[0]:.2f} | "
            f"{e2e[0]:.2f} ({e2e[1]:.2f}) | **{e2e[0] / base:.2f}x** | {e2e[2]:.0f} | {pf[2]} | "
            f"{per_line:.1f} | {per_file:.2f} |"
        )
    node = next((j for layout, mib, j in jobs if layout == "node" and mib == 360), None)
    if node is not None:
        print(
            "\n| compressed job (one file per node, 360 MiB) | MB on disk | decompress alone MB/s "
            "(1 thread) | triage s | triage / ripgrep on the plain files |"
        )
        print("|---|---|---|---|---|")
        plain = logs(node)
        base = best([rg(plain, patterns, None, out / "rg.out", "-n") for _ in range(a.repeat)])[0]
        raw = sum(os.path.getsize(f) for f in plain) / 1e6
        for codec in ("zst", "gz"):
            cjob = compressed_copy(node, codec)
            cfiles = logs(cjob)
            warm(cfiles)
            dec = best([decompress_only(cfiles) for _ in range(a.repeat)])
            e2e = best([triage_e2e(cjob, out / "triage.json") for _ in range(a.repeat)])
            disk = sum(os.path.getsize(f) for f in cfiles) / 1e6
            print(
                f"| {codec} | {disk:.0f} | {raw / dec[0]:.0f} | {e2e[0]:.2f} | {e2e[0] / base:.2f}x |"
            )
    print(f"\nload average {load0:.1f} → {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
