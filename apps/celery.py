"""The Celery application. Settings come from Django settings (``CELERY_*``)."""

import os

from celery import Celery

from apps.lib import brokertransport

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "apps.settings")
# A worker that loses Redis with tasks in flight reconnects instead of exiting.
brokertransport.install()

app = Celery("rankscope")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.task(name="rankscope.ping")
def ping(token: str) -> str:
    """Echo a token back; `/healthz` and the tests use it to prove a worker is alive."""
    from django.core.cache import cache

    cache.set(f"rankscope:ping:{token}", "pong", timeout=300)
    return token
