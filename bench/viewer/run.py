"""Evidence viewer benchmark: bytes fetched from storage per page view of a 512 MiB log.

    .venv/bin/python bench/viewer/run.py              # 512 MiB, 200 page views
    .venv/bin/python bench/viewer/run.py --size-mib 64 --views 50

Generates a rank log of that size (every line different), stores it the way an upload
does (``store_stream``: a multipart upload on S3) in a real S3 API (SeaweedFS on
loopback, as the tests start it) and on the filesystem, builds its line index the way
the parse task does (``lineindex.IndexingReader`` over the stored object), then opens
pages of 50 lines at random places, as a user following evidence links does, through
``apps.ingest.selectors.artifact_lines``. It counts bytes and requests the storage
layer fetched and checks every page shows the right lines.

Baseline, same run: the viewer before ranged reads, which opened the object with
``default_storage.open`` (django-storages' ``S3File`` downloads the whole object on
the first read) and seeked with the parse result's sparse index; its bytes are counted
from the S3 responses (botocore's ``after-call`` event).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

LINES_PER_PAGE = 50


def line_text(n: int) -> str:
    return (
        f"[rank{n % 64}]:[I1121 10:{n // 60 % 60:02d}:{n % 60:02d}.000000 4242 train.py:10] "
        f"iteration {n} | lm loss 2.{n % 997:03d} | tokens/s {100000 + n % 9973}"
    )


def write_log(path: Path, size: int) -> int:
    n = 0
    written = 0
    with path.open("wb") as f:
        while written < size:
            block = "".join(line_text(i) + "\n" for i in range(n + 1, n + 20001)).encode()
            f.write(block)
            written += len(block)
            n += 20000
    return n


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--size-mib", type=int, default=512)
    p.add_argument("--views", type=int, default=200)
    a = p.parse_args()

    from tests.objectstore import SeaweedFS

    tmp = Path(tempfile.mkdtemp(prefix="rs-bench-viewer-"))
    store = SeaweedFS(root=str(tmp / "seaweedfs")).start()
    prefix = f"bench-{time.time_ns()}"
    os.environ.update(store.env(prefix))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "apps.settings")
    os.environ["RANKSCOPE_VAR_DIR"] = str(tmp / "var")
    os.environ["DATABASE_URL"] = f"sqlite:///{tmp}/db.sqlite3"
    import django

    django.setup()
    from django.core.files.storage import default_storage
    from django.test import override_settings

    from apps.ingest import lineindex, selectors, services, storage
    from apps.ingest.models import Artifact

    try:
        src = tmp / "node-17.out"
        t0 = time.monotonic()
        total_lines = write_log(src, a.size_mib << 20)
        size = src.stat().st_size
        print(
            f"generated {size / 2**20:.0f} MiB, {total_lines:,} lines in {time.monotonic() - t0:.0f} s"
        )
        rng = random.Random(17)
        starts = [1, total_lines - LINES_PER_PAGE + 1] + [
            rng.randrange(1, total_lines - LINES_PER_PAGE) for _ in range(a.views - 2)
        ]

        backends = {
            "s3": None,
            "filesystem": {
                "default": {
                    "BACKEND": "django.core.files.storage.FileSystemStorage",
                    "OPTIONS": {"location": str(tmp / "media")},
                },
                "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
            },
        }
        rows = []
        for name, storages in backends.items():
            ctx = override_settings(STORAGES=storages) if storages else _nullcontext()
            with ctx:
                t0 = time.monotonic()
                with src.open("rb") as f:
                    key, _, _ = services.store_stream(key="incidents/b/a1", head=b"", stream=f)
                t_store = time.monotonic() - t0
                t0 = time.monotonic()
                with storage.open_stream(key) as fp:
                    indexing = lineindex.IndexingReader(fp)
                    while indexing.read(8 << 20):
                        pass
                index = indexing.payload()
                assert index is not None
                storage.save_stream(lineindex.key_for(key), _bytes(index), replace=True)
                t_index = time.monotonic() - t0
                artifact = Artifact(
                    storage_key=key, size=size, kind="rank_log", line_count=total_lines
                )
                per_view: list[int] = []
                requests: list[int] = []
                millis: list[float] = []
                for start in starts:
                    storage.fetched.reset()
                    t0 = time.monotonic()
                    page = selectors.artifact_lines(
                        artifact=artifact, start=start, count=LINES_PER_PAGE
                    )
                    millis.append((time.monotonic() - t0) * 1000)
                    assert [v.text for v in page.lines] == [
                        line_text(n) for n in range(start, start + LINES_PER_PAGE)
                    ], start
                    per_view.append(storage.fetched.bytes)
                    requests.append(storage.fetched.requests)
                rows.append(
                    {
                        "backend": name,
                        "how": "ranged (line index)",
                        "bytes_mean": statistics.mean(per_view),
                        "bytes_max": max(per_view),
                        "requests_mean": statistics.mean(requests),
                        "ms_median": statistics.median(millis),
                        "ms_p95": sorted(millis)[int(len(millis) * 0.95) - 1],
                    }
                )
                print(
                    f"{name}: stored in {t_store:.1f} s, index built in {t_index:.1f} s "
                    f"({len(index) / 1024:.0f} KiB)",
                    flush=True,
                )
                if name == "s3":
                    rows.append(_baseline(default_storage, key, starts[:5], size))
                default_storage.delete(key)
                default_storage.delete(lineindex.key_for(key))

        print()
        print(
            f"Page views of {LINES_PER_PAGE} lines in a {size / 2**20:.0f} MiB log ({len(starts)} views, random places):"
        )
        print()
        print(
            "| backend | how the viewer reads | bytes fetched per view (mean / max) | requests per view | latency median / p95 |"
        )
        print("|---|---|---|---|---|")
        for r in rows:
            print(
                f"| {r['backend']} | {r['how']} | {_h(r['bytes_mean'])} / {_h(r['bytes_max'])} | "
                f"{r['requests_mean']:.1f} | {r['ms_median']:.0f} ms / {r['ms_p95']:.0f} ms |"
            )
    finally:
        store.stop()
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def _baseline(default_storage, key: str, starts: list[int], size: int) -> dict:
    """The viewer before: ``default_storage.open`` + seek, counted at the S3 responses."""
    got = {"bytes": 0, "requests": 0}

    def count(http_response=None, parsed=None, **_kw) -> None:
        got["bytes"] += int((parsed or {}).get("ContentLength") or 0)
        got["requests"] += 1

    client = default_storage.connection.meta.client
    client.meta.events.register("after-call.s3.GetObject", count)
    per_view, requests, millis = [], [], []
    try:
        for _start in starts:
            got.update(bytes=0, requests=0)
            t0 = time.monotonic()
            with default_storage.open(key, "rb") as fp:
                # S3File fetches the whole object on the first read, wherever it seeks to
                for _ in range(LINES_PER_PAGE):
                    fp.readline()
            millis.append((time.monotonic() - t0) * 1000)
            per_view.append(got["bytes"])
            requests.append(got["requests"])
    finally:
        client.meta.events.unregister("after-call.s3.GetObject", count)
    return {
        "backend": "s3",
        "how": "baseline: default_storage.open + seek",
        "bytes_mean": statistics.mean(per_view),
        "bytes_max": max(per_view),
        "requests_mean": statistics.mean(requests),
        "ms_median": statistics.median(millis),
        "ms_p95": max(millis),
    }


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _bytes(data: bytes):
    import io

    return io.BytesIO(data)


def _h(n: float) -> str:
    if n >= 1 << 20:
        return f"{n / 2**20:.1f} MiB"
    return f"{n / 1024:.1f} KiB"


if __name__ == "__main__":
    raise SystemExit(main())
