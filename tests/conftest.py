"""Shared fixtures: the owner / teammate / outsider trio, an incident, and a real worker."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from apps.accounts.models import Membership, Team
from apps.incidents.models import Incident
from apps.incidents.services import incident_create

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "correct horse battery staple"


def _user(username: str):
    return get_user_model().objects.create_user(username=username, password=PASSWORD)


@pytest.fixture
def team(db) -> Team:
    return Team.objects.create(name="Pretraining")


@pytest.fixture
def other_team(db) -> Team:
    return Team.objects.create(name="Other team")


@pytest.fixture
def owner(team):
    """A lead of `team`."""
    user = _user("alice")
    Membership.objects.create(team=team, user=user, role=Membership.Role.LEAD)
    return user


@pytest.fixture
def teammate(team):
    """A plain member of `team`."""
    user = _user("bob")
    Membership.objects.create(team=team, user=user, role=Membership.Role.MEMBER)
    return user


@pytest.fixture
def outsider(other_team):
    """Signed in, but only in another team."""
    user = _user("mallory")
    Membership.objects.create(team=other_team, user=user, role=Membership.Role.LEAD)
    return user


def _client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def owner_client(owner) -> Client:
    return _client_for(owner)


@pytest.fixture
def teammate_client(teammate) -> Client:
    return _client_for(teammate)


@pytest.fixture
def outsider_client(outsider) -> Client:
    return _client_for(outsider)


@pytest.fixture
def incident(team, owner) -> Incident:
    return incident_create(
        team=team,
        title="256-GPU run hung at step 4200",
        actor=owner,
        cluster="eos",
        job_id="123456",
        framework="megatron",
        gpu_count=256,
        gpu_type="H100",
    )


def worker_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a worker process needs to share this test run's database."""
    from django.db import connection

    settings_dict = connection.settings_dict
    env = dict(os.environ)
    if connection.vendor == "postgresql":
        user = settings_dict.get("USER") or "postgres"
        password = settings_dict.get("PASSWORD") or ""
        auth = f"{user}:{password}@" if password else f"{user}@"
        env["DATABASE_URL"] = (
            f"postgres://{auth}{settings_dict.get('HOST') or '127.0.0.1'}:"
            f"{settings_dict.get('PORT') or 5432}/{settings_dict['NAME']}"
        )
    env.update(extra or {})
    return env


class WorkerProcess:
    """A real `celery worker` process consuming every queue, for tests about the broker."""

    def __init__(self, *, queues: str = "default,ingest,analysis", concurrency: int = 2) -> None:
        self.queues = queues
        self.concurrency = concurrency
        self.proc: subprocess.Popen | None = None
        self.log_path = ROOT / "var" / "test" / f"worker-{os.getpid()}-{time.time_ns()}.log"

    def start(self, env: dict[str, str] | None = None) -> WorkerProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "apps",
                "worker",
                "--loglevel=INFO",
                "--pool=prefork",
                f"--concurrency={self.concurrency}",
                "-Q",
                self.queues,
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                f"--hostname=test-{time.time_ns()}@%h",
            ],
            cwd=ROOT,
            env=env or worker_env(),
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        stop_process(self.proc)
        if hasattr(self, "_log"):
            self._log.close()


@pytest.fixture
def celery_worker_process(transactional_db) -> Iterator[WorkerProcess]:
    """Start a real worker against this test's database; stop it afterwards."""
    from apps.celery import app

    app.control.purge()  # nothing left over from an earlier test may run in this one
    worker = WorkerProcess().start()
    try:
        yield worker
    finally:
        worker.stop()


def stop_process(proc: subprocess.Popen | None, *, timeout: float = 20) -> None:
    """Ask ``proc`` to end (SIGTERM); kill it if it has not within ``timeout`` seconds."""
    if proc and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def process_tree(pid: int) -> list[int]:
    """pid and all its descendants, read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def sigkill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def wait_for(predicate, *, timeout: float = 60.0, interval: float = 0.2, message=""):
    """Poll until `predicate()` is truthy; fail the test with `message` on timeout.

    `message` may be a callable, so that what it reports (a worker's log, say) is read
    when the wait fails rather than when it starts.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    text = message() if callable(message) else message
    pytest.fail(text or f"condition not met within {timeout} s")


def purge_broker_queues() -> None:
    """Empty this run's broker queues: messages left by earlier tests (no worker ran
    them) would make the auditor think its queues are busy."""
    from apps.celery import app

    with app.connection_for_write() as conn:
        channel = conn.default_channel
        for queue in ("default", "ingest", "analysis"):
            channel.queue_purge(queue)


@pytest.fixture
def empty_broker_queues() -> None:
    purge_broker_queues()
