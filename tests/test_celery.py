import uuid

import pytest
from django.core.cache import cache

from apps.celery import ping
from tests.conftest import wait_for


@pytest.mark.worker
def test_a_task_runs_on_a_real_worker_over_redis(celery_worker_process, settings):
    assert settings.CELERY_BROKER_URL.startswith("redis://")
    token = uuid.uuid4().hex
    ping.apply_async(args=[token], queue="default")
    wait_for(
        lambda: cache.get(f"rankscope:ping:{token}") == "pong",
        timeout=60,
        message=lambda: f"the worker never ran the task; its log:\n{celery_worker_process.log()}",
    )


@pytest.mark.worker
def test_healthz_with_worker_proves_a_worker_runs_tasks(celery_worker_process, client):
    response = client.get("/healthz?worker=1")
    body = response.json()
    assert response.status_code == 200, (body, celery_worker_process.log()[-3000:])
    assert body["ok"] and body["broker"]["ok"] and body["worker"]["ok"]


@pytest.mark.worker
def test_a_task_runs_on_a_real_worker_in_embedded_mode(tmp_path):
    """No server at all: SQLite, the filesystem broker and the file cache under one var dir."""
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "CELERY_"))}
    env.update(
        DATABASE_URL="",
        CELERY_BROKER_URL="",
        CACHE_URL="",
        RANKSCOPE_VAR_DIR=str(tmp_path),
        DJANGO_SETTINGS_MODULE="apps.settings",
    )
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "apps",
            "worker",
            "-Q",
            "default",
            "--pool=solo",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--loglevel=INFO",
        ],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    token = uuid.uuid4().hex
    sender = (
        "import sys, time, django; django.setup()\n"
        "from django.core.cache import cache\n"
        "from apps.celery import ping\n"
        f"ping.apply_async(args=['{token}'], queue='default')\n"
        "deadline = time.time() + 60\n"
        f"while time.time() < deadline and cache.get('rankscope:ping:{token}') != 'pong':\n"
        "    time.sleep(0.2)\n"
        f"sys.exit(0 if cache.get('rankscope:ping:{token}') == 'pong' else 1)\n"
    )
    try:
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-c", sender],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, (result.stderr, time.monotonic() - started)
    finally:
        worker.terminate()
        try:
            out, _ = worker.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
            out, _ = worker.communicate()
    banner = out.decode(errors="replace")
    assert "filesystem://" in banner, banner  # the worker really used the serverless broker
