"""Ingest memory benchmark: store (hash while streaming) and parse a huge log in bounded memory.

    .venv/bin/python bench/ingest/memory.py --sizes-mib 256 2048

For each size, a fresh process generates a multi-rank log of that size on disk,
streams it into Django storage through ``apps.ingest.services.store_stream`` (sha256
computed on the way), then parses it from storage with ``engine.parse_artifact`` —
the exact path of the parse task. It prints the peak RSS of each phase. If memory
were proportional to file size, the 2 GiB row would be 8x the 256 MiB row.
No database is needed: only storage (a temporary directory) and the engine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _write_log(path: Path, size: int) -> None:
    block = []
    for step in range(1, 201):
        for rank in range(64):
            block.append(
                f"[rank{rank}]:[I1121 10:{step % 60:02d}:00.000000 4242 train.py:10] "
                f"iteration {step}/ 500000 | lm loss 2.{step:03d} | elapsed time per iteration (ms): 812.5\n"
            )
    chunk = "".join(block).encode()
    with path.open("wb") as f:
        written = 0
        while written < size:
            f.write(chunk)
            written += len(chunk)
        f.write(
            b"[rank37]:[E1121 11:00:00.000000 4242 ProcessGroupNCCL.cpp:616] [PG ID 0 PG GUID "
            b"0(default_pg) Rank 37] Watchdog caught collective operation timeout: WorkNCCL("
            b"SeqNum=4201, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
            b"600011 milliseconds before timing out.\n"
        )


def child(size_mib: int, workdir: str) -> dict:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "apps.settings")
    os.environ["RANKSCOPE_VAR_DIR"] = workdir
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{workdir}/db.sqlite3")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.files.storage import default_storage

    import rankscope as engine
    from apps.ingest.services import store_stream

    src = Path(workdir) / "big.log"
    _write_log(src, size_mib << 20)
    base = _rss_mib()
    t0 = time.monotonic()
    with src.open("rb") as f:
        key, size, _sha = store_stream(key="bench/big", head=b"", stream=f)
    t_store = time.monotonic() - t0
    rss_store = _rss_mib()
    src.unlink()  # only the stored copy is left
    t0 = time.monotonic()
    with default_storage.open(key, "rb") as fp:
        result = engine.parse_artifact(fp, name="big.log")
    t_parse = time.monotonic() - t0
    rss_parse = _rss_mib()
    return {
        "size_mib": round(size / 2**20),
        "baseline_rss_mib": round(base, 1),
        "store_peak_rss_mib": round(rss_store, 1),
        "store_s": round(t_store, 1),
        "parse_peak_rss_mib": round(rss_parse, 1),
        "parse_s": round(t_parse, 1),
        "lines": result.lines,
        "ranks": len(result.ranks),
        "events": sum(result.event_counts.values()),
        "error": result.error,
    }


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sizes-mib", type=int, nargs="+", default=[256, 2048])
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    p.add_argument("--workdir", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.workdir)))
        return 0
    rows = []
    for size in a.sizes_mib:
        with tempfile.TemporaryDirectory(prefix="rs-bench-ingest-") as tmp:
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(size), "--workdir", tmp],
                check=True,
                capture_output=True,
                text=True,
                cwd=ROOT,
            )
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
