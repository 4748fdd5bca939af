"""The worker, started exactly as docker-compose.yml starts it, survives repeated broker
outages — the first one while it holds an unacknowledged message (a parse running), the
situation in which kombu gave up with ``AttributeError: 'NoneType' object has no
attribute 'hostname'`` in the 256-node Redis-outage drill (this small setup does not
reliably provoke that error; the drill does) — and after each one reconnects by itself
and runs new tasks."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import uuid

import pytest
import yaml
from django.core.cache import cache

from apps.ingest.models import Artifact, ParseStatus
from tests import slowdown
from tests.conftest import ROOT, wait_for, worker_env
from tests.ingest import logs
from tests.resilience.conftest import broker_switched_to, upload

pytestmark = pytest.mark.timeout(240)

OUTAGES = 3


def _shipped_worker_command() -> list[str]:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    command = list(compose["services"]["worker-ingest"]["command"])
    assert command[0] == "celery"
    i = command.index("--concurrency")
    command[i + 1] = "1"  # two cores shared with the rest of the suite
    return [sys.executable, "-m", *command]


def _answers_a_ping(timeout: float) -> bool:
    from apps.celery import ping

    token = uuid.uuid4().hex
    deadline = time.monotonic() + timeout
    sent = False
    while time.monotonic() < deadline:
        if not sent:
            try:
                ping.apply_async(args=[token], queue="default")
                sent = True
            except Exception:  # the broker is still coming back
                time.sleep(0.5)
                continue
        with contextlib.suppress(Exception):  # the cache is the same Redis, coming back
            if cache.get(f"rankscope:ping:{token}") == "pong":
                return True
        time.sleep(0.3)
    return False


def test_the_shipped_worker_survives_repeated_broker_outages(
    transactional_db, redis_server, settings, tmp_path, incident, owner
):
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{redis_server.port}/1",
        }
    }
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as log:
        worker = subprocess.Popen(
            _shipped_worker_command(),
            cwd=ROOT,
            env=worker_env(
                {
                    "CELERY_BROKER_URL": redis_server.url,
                    "CACHE_URL": f"redis://127.0.0.1:{redis_server.port}/1",
                    slowdown.PARSE_SLEEP_ENV: "30",  # parses stay in flight through the outage
                }
            ),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        with broker_switched_to(redis_server.url):
            assert _answers_a_ping(60), log_path.read_text()[-3000:]
            # One parse running (unacknowledged), one prefetched, when Redis goes away.
            held = [upload(incident, owner, logs.node_log(n), f"node-{n}.out") for n in (0, 1)]
            wait_for(
                lambda: Artifact.objects.filter(
                    pk__in=[a.pk for a in held], parse_status=ParseStatus.PARSING
                ).exists(),
                timeout=60,
                message=lambda: log_path.read_text()[-3000:],
            )
            for outage in range(1, OUTAGES + 1):
                redis_server.stop()
                time.sleep(6)
                assert worker.poll() is None, f"the worker exited in outage {outage}"
                redis_server.start()
                wait_for(
                    lambda: _answers_a_ping(5),
                    timeout=60,
                    message=lambda o=outage: (
                        f"no answer after outage {o}:\n" + log_path.read_text()[-3000:]
                    ),
                )
                assert worker.poll() is None, f"the worker exited after outage {outage}"
        text = log_path.read_text()
        assert "Unrecoverable error" not in text and "CRITICAL" not in text
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
