"""S3 ingest memory benchmark: a large upload streamed into a real S3 API in parts.

    .venv/bin/python bench/ingest/s3_multipart.py --sizes-mib 256 1024

Starts SeaweedFS (``weed server -s3`` on loopback, as the tests do). For each size and
each way of writing, a fresh process generates a log of that size on disk and streams
it through ``apps.ingest.services.store_stream`` (sha256 on the way) into the store,
then prints its peak RSS over its RSS before the upload:

- ``parts``: Rankscope's writer (``apps/ingest/storage.py``): one part of
  ``RANKSCOPE_S3_PART_BYTES`` (16 MiB) in memory at a time;
- ``django-storages``: the baseline, ``default_storage.save`` of django-storages'
  S3 backend (boto3's managed transfer: 8 MiB chunks, up to 10 threads);
- ``filesystem``: the local-disk backend, for reference.

Also aborts an upload cut off half-way and checks nothing is left in the store.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(mode: str, size_mib: int, workdir: str) -> dict:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "apps.settings")
    os.environ["RANKSCOPE_VAR_DIR"] = workdir
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{workdir}/db.sqlite3")
    if mode == "filesystem":
        os.environ["RANKSCOPE_STORAGE"] = "filesystem"
    import django

    django.setup()
    from django.core.files import File
    from django.core.files.storage import default_storage

    from apps.ingest import services

    sys.path.insert(0, str(ROOT / "bench" / "ingest"))
    from memory import _write_log

    src = Path(workdir) / "big.log"
    _write_log(src, size_mib << 20)
    key = f"bench/{mode}-{size_mib}-{time.time_ns()}"
    base = _rss_mib()
    t0 = time.monotonic()
    with src.open("rb") as f:
        if mode == "django-storages":
            default_storage.save(key, File(f, name="big.log"))
            size = src.stat().st_size
        else:
            key, size, _ = services.store_stream(key=key, head=b"", stream=f)
    seconds = time.monotonic() - t0
    peak = _rss_mib()
    stored = default_storage.size(key)
    default_storage.delete(key)
    return {
        "mode": mode,
        "size_mib": round(size / 2**20),
        "stored_ok": stored == size,
        "rss_before_mib": round(base, 1),
        "upload_peak_rss_mib": round(peak, 1),
        "upload_extra_mib": round(peak - base, 1),
        "seconds": round(seconds, 1),
        "mib_per_s": round(size / 2**20 / seconds, 1),
    }


def interrupted(env: dict[str, str], workdir: str) -> dict:
    """An upload whose client vanishes after 40 MiB: no object, no open upload."""
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "apps.settings")
    os.environ["RANKSCOPE_VAR_DIR"] = workdir
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{workdir}/db.sqlite3")
    import io

    import django

    django.setup()
    from apps.ingest import services

    class Gone(io.RawIOBase):
        left = 40 << 20

        def readable(self) -> bool:
            return True

        def readinto(self, b) -> int:
            if self.left <= 0:
                raise ConnectionResetError("client went away")
            n = min(len(b), self.left)
            b[:n] = b"x" * n
            self.left -= n
            return n

    with contextlib.suppress(ConnectionResetError):
        services.store_stream(key="bench/cut", head=b"", stream=io.BufferedReader(Gone()))
    return {"cut_after_mib": 40}


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sizes-mib", type=int, nargs="+", default=[256, 1024])
    p.add_argument("--modes", nargs="+", default=["parts", "django-storages", "filesystem"])
    p.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    p.add_argument("--workdir", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        print(json.dumps(child(a.child[0], int(a.child[1]), a.workdir)))
        return 0

    from tests.objectstore import SeaweedFS

    store = SeaweedFS().start()
    prefix = f"bench-{time.time_ns()}"
    env = dict(os.environ, **store.env(prefix))
    try:
        for size in a.sizes_mib:
            for mode in a.modes:
                with tempfile.TemporaryDirectory(prefix="rs-bench-s3-") as tmp:
                    out = subprocess.run(
                        [sys.executable, __file__, "--child", mode, str(size), "--workdir", tmp],
                        check=True,
                        capture_output=True,
                        text=True,
                        cwd=ROOT,
                        env=env,
                    )
                    print(out.stdout.strip().splitlines()[-1], flush=True)
        with tempfile.TemporaryDirectory(prefix="rs-bench-s3-") as tmp:
            interrupted(store.env(prefix), tmp)
        print(
            json.dumps(
                {
                    "interrupted_upload": "cut after 40 MiB",
                    "objects_left": len(store.keys(prefix)),
                    "open_multipart_uploads": len(store.uploads(prefix)),
                }
            )
        )
    finally:
        store.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
