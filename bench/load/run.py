"""Load benchmark: every node of a 1,024-node job posts its logs at the same instant.

Starts the production shape on this machine, on loopback only — gunicorn (gthread),
PostgreSQL, Redis as broker and cache, one Celery worker — then fires N concurrent
multipart POSTs of ~1 MB each to ``/api/v1/ingest/slurm`` for ONE job run (plus a share of
repeated posts, as when an epilog is retried), and checks the database afterwards:
exactly one incident, every distinct file stored exactly once, zero 5xx.

    .venv/bin/python bench/load/run.py                    # 1,024 uploads of ~1 MB
    .venv/bin/python bench/load/run.py --nodes 256 --size-kb 256

Not a test: it takes a minute and prints a markdown table for docs/performance.md.
Needs PostgreSQL and Redis on localhost (bin/ensure-services); uses its own database
(``rankscope_bench_api``, recreated) and Redis DB numbers 11/12 unless told otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_log(node: int, size: int) -> bytes:
    """~size bytes of a realistic rank log, different for every node."""
    rng = random.Random(node)
    lines = []
    total = 0
    step = 0
    while total < size:
        step += 1
        line = (
            f"[rank{node * 8 + rng.randrange(8)}]:[2026-03-0{1 + node % 9} 12:{step % 60:02d}:"
            f"{rng.randrange(60):02d}] iteration {step} | lm loss {rng.uniform(1.5, 3):.5f} | "
            f"grad norm {rng.uniform(0.1, 2):.3f} | tokens/s {rng.randrange(90000, 120000)}\n"
        )
        lines.append(line)
        total += len(line)
    return "".join(lines).encode()


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1024)
    parser.add_argument("--size-kb", type=int, default=1024)
    parser.add_argument("--repeat-share", type=float, default=0.05, help="share posted twice")
    parser.add_argument("--concurrency", type=int, default=1024, help="client threads")
    parser.add_argument("--web-workers", type=int, default=4)
    parser.add_argument("--web-threads", type=int, default=8)
    parser.add_argument("--database", default="rankscope_bench_api")
    parser.add_argument("--pg", default="postgres://postgres:postgres@127.0.0.1:5432")
    parser.add_argument("--broker", default="redis://127.0.0.1:6379/11")
    parser.add_argument("--cache", default="redis://127.0.0.1:6379/12")
    parser.add_argument("--parse-wait", type=float, default=600, help="s to wait for parsing")
    parser.add_argument(
        "--web-hosts",
        type=int,
        default=0,
        help="the many-hosts shape (deploy/compose.hosts.yml): this many web hosts, each "
        "with its own directories, sharing only PostgreSQL, Redis and SeaweedFS (S3); "
        "requests are spread over them as a load balancer would. 0: one web process "
        "and the filesystem store",
    )
    parser.add_argument("--worker-hosts", type=int, default=1, help="with --web-hosts")
    parser.add_argument(
        "--worker-concurrency", type=int, default=1, help="processes per worker service"
    )
    args = parser.parse_args()

    var = ROOT / "var" / "bench-api"
    var.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update(
        DATABASE_URL=f"{args.pg}/{args.database}",
        CELERY_BROKER_URL=args.broker,
        CACHE_URL=args.cache,
        RANKSCOPE_VAR_DIR=str(var),
        DJANGO_SETTINGS_MODULE="apps.settings",
        DJANGO_ALLOWED_HOSTS="127.0.0.1",
        RANKSCOPE_API_BURST=str(max(2048, args.nodes * 2)),
    )
    store = None
    if args.web_hosts:
        from tests.objectstore import SeaweedFS

        store = SeaweedFS().start()
        env.update(store.env(f"bench-{time.time_ns()}"), DJANGO_SECRET_KEY="bench: one key")  # noqa: S106 - loopback only
    os.environ.update(env)

    import psycopg

    with psycopg.connect(f"{args.pg}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{args.database}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{args.database}"')
    py = str(ROOT / ".venv" / "bin" / "python")
    subprocess.run([py, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    subprocess.run(
        [py, "-m", "celery", "-A", "apps", "purge", "-f", "-Q", "default,ingest,analysis"],
        cwd=ROOT,
        env=env,
        check=False,
        capture_output=True,
    )

    import django

    django.setup()
    from apps.accounts.models import Team
    from apps.accounts.services import api_token_create

    team = Team.objects.create(name="Bench")
    _, token = api_token_create(team=team, name="bench epilog", scope="ingest", actor=None)

    port = free_port()
    logs = var / "logs"
    logs.mkdir(exist_ok=True)
    if args.web_hosts:
        return _many_hosts(args, env, var, store, token, team)
    web = subprocess.Popen(
        [
            str(ROOT / ".venv" / "bin" / "gunicorn"),
            "apps.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(args.web_workers),
            "--threads",
            str(args.web_threads),
            "--worker-class",
            "gthread",
            "--backlog",
            "4096",
            "--timeout",
            "120",
        ],
        cwd=ROOT,
        env=env,
        stdout=(logs / "gunicorn.log").open("wb"),
        stderr=subprocess.STDOUT,
    )
    worker = subprocess.Popen(
        [
            py,
            "-m",
            "celery",
            "-A",
            "apps",
            "worker",
            "-Q",
            "default,ingest,analysis",
            "--concurrency",
            "2",
            "--loglevel",
            "WARNING",
            "--without-gossip",
            "--without-mingle",
        ],
        cwd=ROOT,
        env=env,
        stdout=(logs / "worker.log").open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        if not _wait_up(f"http://127.0.0.1:{port}"):
            print("gunicorn did not start; see", logs / "gunicorn.log")
            return 1
        return _fire(args, token, team, [f"http://127.0.0.1:{port}"], shape=None)
    finally:
        for proc in (web, worker):
            proc.terminate()
        for proc in (web, worker):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def _wait_up(base: str) -> bool:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            if requests.get(f"{base}/healthz", timeout=10).status_code < 500:
                return True
        except requests.RequestException:
            pass
        time.sleep(0.3)
    return False


def _many_hosts(args, env: dict[str, str], var: Path, store, token: str, team) -> int:
    """N web hosts and M worker hosts as in deploy/compose.hosts.yml, on loopback."""
    import shutil

    from tests.hosts import Host

    base = var / "hosts"
    shutil.rmtree(base, ignore_errors=True)
    webs = [Host(base, f"web-{n}", env) for n in range(1, args.web_hosts + 1)]
    workers = [Host(base, f"worker-{n}", env) for n in range(1, args.worker_hosts + 1)]
    try:
        urls = [h.start_web(port=free_port(), workers=args.web_workers) for h in webs]
        for h in workers:
            h.start_worker(concurrency=args.worker_concurrency)
        for u in urls:
            if not _wait_up(u):
                print("a web host did not start:", "\n".join(h.logs() for h in webs))
                return 1
        shape = (
            f"{args.web_hosts} web hosts x gunicorn {args.web_workers} workers x 8 threads, "
            f"{args.worker_hosts} worker hosts x (ingest + analysis worker, "
            f"{args.worker_concurrency} process each), each host with its own directories; "
            "shared: PostgreSQL, Redis, SeaweedFS 4.48 (S3) on loopback"
        )
        return _fire(args, token, team, urls, shape=shape)
    finally:
        for h in webs + workers:
            h.stop()
        store.stop()


def _fire(args, token: str, team, bases: list[str], *, shape: str | None) -> int:

    size = args.size_kb * 1024
    bodies = {n: node_log(n, size) for n in range(args.nodes)}
    distinct = {hashlib.sha256(b).hexdigest() for b in bodies.values()}
    rng = random.Random(7)
    repeats = rng.sample(range(args.nodes), int(args.nodes * args.repeat_share))
    jobs = list(range(args.nodes)) + repeats
    barrier = threading.Barrier(min(args.concurrency, len(jobs)))
    results: list[tuple[int, float, str]] = []
    lock = threading.Lock()

    def post(item: tuple[int, int]) -> None:
        index, node = item
        session = requests.Session()
        url = f"{bases[index % len(bases)]}/api/v1/ingest/slurm"
        files = [("file", (f"rank_{node * 8}.log", bodies[node], "text/plain"))]
        data = {
            "cluster": "bench",
            "job_id": "1024001",
            "run_key": "0",
            "node": f"node{node:04d}",
            "exit_code": "1",
        }
        if index < barrier.parties:  # the first wave leaves together
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait(timeout=120)
        started = time.perf_counter()
        try:
            r = session.post(
                url,
                data=data,
                files=files,
                headers={"Authorization": f"Bearer {token}"},
                timeout=300,
            )
            outcome = (r.status_code, time.perf_counter() - started, r.text[:200])
        except requests.RequestException as exc:
            outcome = (0, time.perf_counter() - started, repr(exc)[:200])
        with lock:
            results.append(outcome)

    wall = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
        list(pool.map(post, enumerate(jobs)))
    wall = time.perf_counter() - wall

    from django.db import connection

    from apps.incidents.models import Incident
    from apps.ingest.models import Artifact

    connection.close()
    incidents = Incident.objects.filter(team=team, cluster="bench", job_id="1024001")
    n_incidents = incidents.count()
    incident = incidents.first()
    artifacts = Artifact.objects.filter(incident=incident) if incident else None
    n_artifacts = artifacts.count() if artifacts is not None else 0
    stored_shas = (
        set(artifacts.values_list("sha256", flat=True)) if artifacts is not None else set()
    )
    codes: dict[int, int] = {}
    for code, _, _ in results:
        codes[code] = codes.get(code, 0) + 1
    latencies = [lat for _, lat, _ in results]
    ok = [lat for code, lat, _ in results if 200 <= code < 300]

    parse_started = time.monotonic()
    parsed_in = None
    while artifacts is not None and time.monotonic() - parse_started < args.parse_wait:
        active = artifacts.filter(parse_status__in=["pending", "queued", "parsing"]).count()
        if active == 0:
            parsed_in = time.monotonic() - parse_started
            break
        time.sleep(1)
    parse_counts = (
        {
            s: artifacts.filter(parse_status=s).count()
            for s in ("parsed", "failed", "rejected", "pending", "queued", "parsing")
        }
        if artifacts is not None
        else {}
    )

    mb = args.nodes * size / 1e6
    print()
    print(
        f"Machine: {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
        + (
            shape
            or f"gunicorn {args.web_workers} workers x {args.web_threads} threads (gthread), "
            "1 Celery worker x 2, PostgreSQL and Redis on loopback, filesystem store."
        )
    )
    print()
    print("| measure | value |")
    print("| --- | --- |")
    print(f"| requests (distinct nodes + repeats) | {len(jobs)} ({args.nodes} + {len(repeats)}) |")
    print(f"| body per request | {size / 1e6:.2f} MB |")
    print(f"| client concurrency | {min(args.concurrency, len(jobs))} |")
    print(f"| status codes | {', '.join(f'{k}: {v}' for k, v in sorted(codes.items()))} |")
    print(f"| 5xx / connection errors | {sum(v for k, v in codes.items() if k >= 500 or k == 0)} |")
    print(f"| latency p50 | {statistics.median(latencies) * 1000:.0f} ms |")
    print(f"| latency p99 | {percentile(latencies, 99) * 1000:.0f} ms |")
    print(f"| latency max | {max(latencies) * 1000:.0f} ms |")
    print(f"| wall time, all requests | {wall:.1f} s |")
    print(f"| throughput | {len(jobs) / wall:.1f} req/s, {mb / wall:.1f} MB/s of logs |")
    print(f"| incidents for the job run | {n_incidents} |")
    print(f"| artifacts stored / distinct files | {n_artifacts} / {len(distinct)} |")
    print(f"| stored sha256 == sent sha256 | {stored_shas == distinct} |")
    print(
        f"| parse complete after uploads | "
        f"{f'{parsed_in:.0f} s' if parsed_in is not None else 'not within the wait'} "
        f"({', '.join(f'{k} {v}' for k, v in parse_counts.items() if v)}) |"
    )
    failures = []
    if n_incidents != 1:
        failures.append(f"{n_incidents} incidents")
    if n_artifacts != len(distinct) or stored_shas != distinct:
        failures.append("stored files differ from sent files")
    if any(k >= 500 or k == 0 for k in codes):
        failures.append("server errors")
        for code, _, text in results:
            if code >= 500 or code == 0:
                print("  e.g.", code, text)
                break
    if len(ok) != len(jobs):
        failures.append(f"{len(jobs) - len(ok)} non-2xx answers")
    print()
    print("RESULT:", "PASS" if not failures else "FAIL: " + "; ".join(failures))
    return 0 if not failures else 1


if __name__ == "__main__":
    raise SystemExit(main())
