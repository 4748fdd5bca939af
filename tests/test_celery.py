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
