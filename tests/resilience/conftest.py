"""Failure drills: kill workers, stop the broker, drop database connections.

Helpers shared by the resilience tests. Everything here is real: worker processes
killed with SIGKILL, a private ``redis-server`` stopped with SIGTERM, PostgreSQL
backends ended with ``pg_terminate_backend``.
"""

from __future__ import annotations

import contextlib
import io
import socket
import subprocess
from collections.abc import Iterator

import psycopg
import pytest
from django.core.cache import cache
from django.db import connection

from apps.ingest import services
from apps.ingest.models import Artifact, RankDigest
from tests.conftest import wait_for

pytestmark = pytest.mark.timeout(90)


# --- processes ------------------------------------------------------------------------


# --- PostgreSQL -----------------------------------------------------------------------


def _admin_dsn() -> str:
    s = connection.settings_dict
    return (
        f"host={s.get('HOST') or '127.0.0.1'} port={s.get('PORT') or 5432} "
        f"user={s.get('USER') or 'postgres'} password={s.get('PASSWORD') or ''} "
        f"dbname={s['NAME']}"
    )


def terminate_backends(*, pids: list[int] | None = None, others: bool = False) -> int:
    """End PostgreSQL backends from a separate connection, as a failover or a DBA would.

    ``pids``: exactly those; ``others``: every other connection to this test database
    (the worker processes'), never this test's own. Returns how many were ended.
    """
    with psycopg.connect(_admin_dsn(), autocommit=True) as admin:
        if pids:
            rows = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = ANY(%s)",
                [pids],
            ).fetchall()
        else:
            assert others
            me = []
            if connection.connection is not None:
                me = [connection.connection.info.backend_pid]
            rows = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                "AND NOT (pid = ANY(%s))",
                [me],
            ).fetchall()
    return sum(1 for (ok,) in rows if ok)


def own_backend_pid() -> int:
    connection.ensure_connection()
    return connection.connection.info.backend_pid


# --- a private Redis broker -------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """A throw-away ``redis-server`` on its own port, without persistence: stopping it
    loses every queued message, the worst case for the broker."""

    def __init__(self) -> None:
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(self._answers, timeout=10, interval=0.05, message="redis-server did not start")
        return self

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


@contextlib.contextmanager
def broker_switched_to(url: str) -> Iterator[None]:
    """Point this process's Celery app at ``url``; restore the shared pool afterwards."""
    from apps.celery import app

    # Producers connect with broker_write_url, fixed from broker_url when the app was
    # configured: swap that (and the read URL), and give the app fresh pools.
    saved = {k: app.conf[k] for k in ("broker_write_url", "broker_read_url")}
    saved_pool, saved_producers = app._pool, app.amqp._producer_pool
    app._pool = None
    app.amqp._producer_pool = None
    app.conf.update(broker_write_url=url, broker_read_url=url)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            app.pool.force_close_all()
        app.conf.update(saved)
        app._pool = saved_pool
        app.amqp._producer_pool = saved_producers


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def _clean_cache(empty_broker_queues) -> None:
    cache.clear()


# --- uploads and what a parse leaves behind -------------------------------------------------


def upload(incident, owner, data: bytes, name: str) -> Artifact:
    (out,) = services.artifact_upload(
        incident=incident, fileobj=io.BytesIO(data), name=name, actor=owner
    )
    assert out.status == "stored", out.message
    return out.artifact


def parse_footprint(artifact: Artifact) -> dict:
    """Everything a parse leaves: the row, its rank digests, the stored ParseResult."""
    from apps.ingest.selectors import artifact_parse_result

    a = Artifact.objects.get(pk=artifact.pk)
    result = artifact_parse_result(artifact=a)
    return {
        "row": {
            f: getattr(a, f)
            for f in (
                "parse_status",
                "parse_error",
                "kind",
                "ranks",
                "hosts",
                "rank_hosts",
                "line_count",
                "event_count",
                "notes",
            )
        },
        "keys": (a.parsed_key == services.parsed_key_for(a), bool(a.metrics_key)),
        "digests": list(
            RankDigest.objects.filter(artifact=a)
            .order_by("rank")
            .values(
                "rank",
                "host",
                "first_time",
                "last_time",
                "last_step",
                "last_nccl_state",
                "last_nccl_line",
                "event_count",
            )
        ),
        "result": result.to_json() if result is not None else None,
    }


def worker_log_tail(worker, n: int = 3000) -> str:
    return worker.log()[-n:]
