"""Load benchmark: every node of a 1,024-node job posts its logs at the same instant.

Then the controller epilog posts the job's end, and the time from the last upload
answered to the verdict stored (and shown on the incident page) is measured, split
into parsing and analysis, with the peak memory of the worker's processes.

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
import json
import os
import platform
import random
import secrets
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


CULPRIT_LOCAL = 5  # the local rank, on the node 3/5 of the way in, whose GPU runs out
BENCH_PASSWORD = secrets.token_urlsafe(16)


def node_log(node: int, size: int, culprit_node: int) -> bytes:
    """~size bytes of one node's torchrun output (8 ranks), different for every node.

    Every rank trains, then rank 8 * culprit_node + 5 runs out of GPU memory and every other rank's
    NCCL watchdog times out half an hour later: the verdict to expect is a CUDA OOM on
    that one rank, with every other rank a victim.
    """
    rng = random.Random(node)
    lines = []
    total = 0
    step = 0
    while total < size:
        step += 1
        second = 12 * 3600 + step * 2
        line = (
            f"[rank{node * 8 + rng.randrange(8)}]:[2026-03-01 {second // 3600:02d}:"
            f"{second // 60 % 60:02d}:{second % 60:02d}] iteration {step} | lm loss "
            f"{rng.uniform(1.5, 3):.5f} | grad norm {rng.uniform(0.1, 2):.3f} | tokens/s "
            f"{rng.randrange(90000, 120000)}\n"
        )
        lines.append(line)
        total += len(line)
    for local in range(8):
        rank = node * 8 + local
        if (node, local) == (culprit_node, CULPRIT_LOCAL):
            lines.append(
                f"[rank{rank}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                f"2.00 GiB. GPU {local} has a total capacity of 79.15 GiB of which 1.06 GiB is "
                "free. Of the allocated memory 75.20 GiB is allocated by PyTorch\n"
            )
        else:
            lines.append(
                f"[rank{rank}]:[E301 13:40:00.{rank:09d} ProcessGroupNCCL.cpp:632] [Rank {rank}] "
                f"Watchdog caught collective operation timeout: WorkNCCL(SeqNum={step + 1}, "
                "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for "
                "1800010 milliseconds before timing out.\n"
            )
    return "".join(lines).encode()


def peak_rss_mb(pid: int) -> dict[int, float]:
    """VmHWM (peak resident set) of a process and all its descendants, in MB."""
    peaks: dict[int, float] = {}
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                peaks[p] = int(line.split()[1]) / 1024
    return peaks


def cpu_seconds(pids: list[int]) -> float:
    """CPU time (user + system) used so far by these processes and all their descendants
    (live ones, plus the children they have already reaped): on a machine other work
    shares, the work done, where wall time also counts the waiting."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    todo = list(pids)
    while todo:
        p = todo.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
        # utime, stime, cutime, cstime: fields 14-17 of stat, 12-15 after the name
        total += sum(int(x) for x in fields[11:15]) / tick
    return total


def incident_page_shows(base: str, code: str, summary: str, team: object) -> str:
    """Log in as a team member and look for the verdict's summary on the incident page."""
    import html

    from django.contrib.auth import get_user_model

    from apps.accounts.models import Membership

    user = get_user_model().objects.create_user("bench-oncall", password=BENCH_PASSWORD)
    Membership.objects.create(team=team, user=user)
    session = requests.Session()
    session.get(f"{base}/login/", timeout=30)
    session.post(
        f"{base}/login/",
        data={
            "username": "bench-oncall",
            "password": BENCH_PASSWORD,
            "csrfmiddlewaretoken": session.cookies.get("csrftoken", ""),
        },
        headers={"Referer": f"{base}/login/"},
        timeout=30,
    )
    page = session.get(f"{base}/incidents/{code}/", timeout=60)
    if page.status_code != 200:
        return f"no (HTTP {page.status_code})"
    return "yes" if html.escape(summary, quote=True) in page.text or summary in page.text else "no"


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
        return _fire(
            args, token, team, [f"http://127.0.0.1:{port}"], shape=None, worker_pids=[worker.pid]
        )
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
        pids = [p.pid for h in workers for role, p, _ in h.procs]
        return _fire(args, token, team, urls, shape=shape, worker_pids=pids)
    finally:
        for h in webs + workers:
            h.stop()
        store.stop()


def _fire(
    args, token: str, team, bases: list[str], *, shape: str | None, worker_pids: list[int]
) -> int:
    size = args.size_kb * 1024
    culprit_node = args.nodes * 3 // 5
    bodies = {n: node_log(n, size, culprit_node) for n in range(args.nodes)}
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
    cpu_start = cpu_seconds(worker_pids)
    with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
        list(pool.map(post, enumerate(jobs)))
    uploaded_at = time.monotonic()  # the last upload has been answered
    cpu_uploaded = cpu_seconds(worker_pids)
    wall = time.perf_counter() - wall
    # EpilogSlurmctld: the job is over, analyse as soon as every file is parsed
    controller = requests.post(  # multipart, as curl -F sends it
        f"{bases[0]}/api/v1/ingest/slurm",
        files={
            k: (None, v)
            for k, v in {
                "cluster": "bench",
                "job_id": "1024001",
                "run_key": "0",
                "stage": "controller",
                "exit_code": "1",
                "job": json.dumps(
                    {"job_name": "bench", "job_nodelist": f"node[0000-{args.nodes - 1:04d}]"}
                ),
            }.items()
        },
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )

    from django.db import connection

    from apps.incidents.models import Incident
    from apps.ingest.models import Artifact

    connection.close()
    incidents = Incident.objects.filter(team=team, cluster="bench", job_id="1024001")
    n_incidents = incidents.count()
    incident = incidents.first()
    # the node posts' files (the controller's job record is one more artifact)
    artifacts = (
        Artifact.objects.filter(incident=incident).exclude(kind="slurm_job") if incident else None
    )
    n_artifacts = artifacts.count() if artifacts is not None else 0
    stored_shas = (
        set(artifacts.values_list("sha256", flat=True)) if artifacts is not None else set()
    )
    codes: dict[int, int] = {}
    for code, _, _ in results:
        codes[code] = codes.get(code, 0) + 1
    latencies = [lat for _, lat, _ in results]
    ok = [lat for code, lat, _ in results if 200 <= code < 300]

    from apps.analysis.models import AnalysisRun, RunStatus

    parsed_in = verdict_in = None
    while artifacts is not None and time.monotonic() - uploaded_at < args.parse_wait:
        now = time.monotonic()
        if parsed_in is None:
            active = Artifact.objects.filter(
                incident=incident, parse_status__in=["pending", "queued", "parsing"]
            )
            if not active.exists():
                parsed_in = now - uploaded_at
                cpu_parsed = cpu_seconds(worker_pids)
        if parsed_in is not None:
            run = (
                AnalysisRun.objects.filter(incident=incident, status=RunStatus.SUCCEEDED)
                .order_by("-finished_at")
                .first()
            )
            every = Artifact.objects.filter(incident=incident).exclude(parse_status="rejected")
            if run is not None and len(run.inputs) == every.count():
                verdict_in = now - uploaded_at
                cpu_verdict = cpu_seconds(worker_pids)
                break
        time.sleep(0.25)
    parse_counts = (
        {
            s: artifacts.filter(parse_status=s).count()
            for s in ("parsed", "failed", "rejected", "pending", "queued", "parsing")
        }
        if artifacts is not None
        else {}
    )
    verdict = shown = ""
    timings: dict = {}
    if verdict_in is not None:
        triage = run.document["triage"]
        culprits = run.document["localization"]["culprit_ranks"]
        verdict = f"{triage['shape']} · {triage['category']} · ranks {culprits}"
        timings = run.timings or {}
        shown = incident_page_shows(bases[0], incident.code, triage["summary"], team)
    rss: dict[int, float] = {}
    for pid in worker_pids:
        rss.update(peak_rss_mb(pid))
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
    print(f"| controller epilog post | HTTP {controller.status_code} |")
    print(
        f"| last upload answered → all parsed | "
        f"{f'{parsed_in:.1f} s' if parsed_in is not None else 'not within the wait'} "
        f"({', '.join(f'{k} {v}' for k, v in parse_counts.items() if v)}) |"
    )
    if parsed_in is not None:
        print(
            f"| worker CPU: during the burst / after it until all parsed | "
            f"{cpu_uploaded - cpu_start:.1f} s / {cpu_parsed - cpu_uploaded:.1f} s "
            f"({(cpu_parsed - cpu_start) / max(1, args.nodes) * 1000:.0f} ms a file) |"
        )
    if verdict_in is not None:
        print(f"| worker CPU: all parsed → verdict stored | {cpu_verdict - cpu_parsed:.1f} s |")
        print(f"| all parsed → verdict stored | {verdict_in - parsed_in:.1f} s |")
        print(f"| **last upload answered → verdict stored** | **{verdict_in:.1f} s** |")
        print(f"| analysis run's own timings | {timings} |")
        print(f"| verdict | {verdict} |")
        print(f"| incident page shows the verdict | {shown} |")
    else:
        print("| verdict stored | not within the wait |")
    print(
        f"| peak RSS of the worker's processes | "
        f"{', '.join(f'{v:.0f} MB' for v in sorted(rss.values(), reverse=True))} |"
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
    expected = [culprit_node * 8 + CULPRIT_LOCAL]
    if verdict_in is None or culprits != expected or triage["category"] != "OOM":
        failures.append(f"verdict {verdict or 'missing'} (expected an OOM on {expected})")
    elif shown != "yes":
        failures.append("the incident page does not show the verdict")
    if len(ok) != len(jobs):
        failures.append(f"{len(jobs) - len(ok)} non-2xx answers")
    print()
    print("RESULT:", "PASS" if not failures else "FAIL: " + "; ".join(failures))
    return 0 if not failures else 1


if __name__ == "__main__":
    raise SystemExit(main())
