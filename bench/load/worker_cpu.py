"""The parse worker's CPU per file: a Celery worker of 2 processes parses N uploaded node logs.

The CPU seconds its processes use (user + system, from /proc), not wall time: on a machine
other work shares, the work done is what stays comparable between two trees. The node
logs are those of ``bench/load/run.py`` (~1 MB, ~7,500 iteration lines each); the uploads
are made in this process, before the measured files a few warm the worker's processes
(imports, scanner databases). The measured CPU includes the analysis the last parse
requests (a fraction of a second for 128 files).

    DATABASE_URL=… CELERY_BROKER_URL=… CACHE_URL=… .venv/bin/python bench/load/worker_cpu.py
    .venv/bin/python bench/load/worker_cpu.py --files 256 --code /path/to/other/checkout

``--code``: the checkout whose ``apps``/``rankscope`` the worker runs (this one by default).
Needs PostgreSQL and Redis; uses the database and broker the environment names.
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.load.run import cpu_seconds, node_log  # noqa: E402


def _own_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:13]) / os.sysconf("SC_CLK_TCK")


def _upload_all(incident, user, bodies: list[bytes], prefix: str) -> None:
    from apps.ingest import services
    from apps.ingest.models import Artifact

    for k, body in enumerate(bodies):
        services.artifact_upload(
            incident=incident, fileobj=io.BytesIO(body), name=f"{prefix}{k:04d}.log", actor=user
        )
    active = Artifact.objects.filter(
        incident=incident, parse_status__in=["pending", "queued", "parsing"]
    )
    while active.exists():
        time.sleep(0.2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=128)
    parser.add_argument("--size-kb", type=int, default=1024)
    parser.add_argument("--code", default=str(ROOT))
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "apps.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from apps.accounts.models import Team
    from apps.incidents.services import incident_create

    py = str(ROOT / ".venv" / "bin" / "python")
    celery = [py, "-m", "celery", "-A", "apps"]
    queues = ["-Q", "default,ingest,analysis"]
    subprocess.run([*celery, "purge", "-f", *queues], cwd=args.code, capture_output=True)
    log = (ROOT / "var" / "worker-cpu.log").open("wb")
    flags = ["--concurrency", "2", "--loglevel", "WARNING", "--without-gossip", "--without-mingle"]
    worker = subprocess.Popen(
        [*celery, "worker", *queues, *flags],
        cwd=args.code,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        time.sleep(8)
        stamp = time.time_ns()
        team = Team.objects.create(name=f"worker-cpu {stamp}")
        user = get_user_model().objects.create_user(f"worker-cpu-{stamp}")

        def incident(title: str):
            return incident_create(team=team, title=title, actor=user, job_id=f"{stamp}{title}")

        size = args.size_kb * 1024
        _upload_all(incident("warm"), user, [node_log(9000 + k, size, 0) for k in range(6)], "w")
        time.sleep(3)  # the warm-up's analysis
        bodies = [node_log(k, size, args.files * 3 // 5) for k in range(args.files)]
        main0, all0, wall = _own_cpu(worker.pid), cpu_seconds([worker.pid]), time.perf_counter()
        _upload_all(incident("measured"), user, bodies, "node")
        main1, all1 = _own_cpu(worker.pid), cpu_seconds([worker.pid])
        n = args.files
        print(
            f"{args.code}: {n} files of {size / 1e6:.2f} MB; worker CPU {all1 - all0:.1f} s = "
            f"{(all1 - all0) / n * 1000:.1f} ms a file (its main process "
            f"{(main1 - main0) / n * 1000:.1f} ms); wall {time.perf_counter() - wall:.1f} s, "
            "uploads included"
        )
    finally:
        worker.terminate()
        worker.wait(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
