"""`/healthz`: is the database reachable, is the broker reachable (and, on request, a worker)."""

from __future__ import annotations

import time
import uuid

from celery import current_app
from django.core.cache import cache
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET


def _check_database() -> dict:
    started = time.monotonic()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any driver error means "down"; say which
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    return {
        "ok": True,
        "vendor": connection.vendor,
        "ms": round((time.monotonic() - started) * 1000, 1),
    }


def _check_broker() -> dict:
    started = time.monotonic()
    try:
        with current_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
            transport = conn.transport.driver_type
    except Exception as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    return {
        "ok": True,
        "transport": str(transport),
        "ms": round((time.monotonic() - started) * 1000, 1),
    }


def _check_worker(timeout: float = 10.0) -> dict:
    token = uuid.uuid4().hex
    started = time.monotonic()
    try:
        # By name: the task is the project's (apps/celery.py), below which this module sits.
        current_app.send_task("rankscope.ping", args=[token], queue="default")
    except Exception as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    while time.monotonic() - started < timeout:
        if cache.get(f"rankscope:ping:{token}") == "pong":
            return {"ok": True, "ms": round((time.monotonic() - started) * 1000, 1)}
        time.sleep(0.1)
    return {"ok": False, "error": f"no worker answered within {timeout:.0f} s"}


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    checks = {"database": _check_database(), "broker": _check_broker()}
    if request.GET.get("worker") in {"1", "true", "yes"}:
        checks["worker"] = _check_worker()
    ok = all(check["ok"] for check in checks.values())
    return JsonResponse({"ok": ok, **checks}, status=200 if ok else 503)
