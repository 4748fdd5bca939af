"""Celery tasks of the ingest app: thin wrappers that take ids and call one service."""

from __future__ import annotations

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import InterfaceError, OperationalError

from apps.ingest import services
from apps.ingest.storage import StorageUnavailable

TRANSIENT = (OperationalError, InterfaceError, StorageUnavailable)
MAX_RETRIES = 5


@shared_task(bind=True, max_retries=MAX_RETRIES, acks_late=True, reject_on_worker_lost=True)
def artifact_parse(self, artifact_id: int) -> str | None:
    """Parse one artifact (``services.artifact_parse``), one task per artifact.

    Idempotent: a missing row, or one already parsed/failed/rejected, is a no-op; a
    redelivered copy takes the row over with a new fence token and writes the same
    outputs to the same keys. Transient storage/database errors retry with
    exponential backoff (5 s, 10 s, … up to 5 min, ``MAX_RETRIES`` times), after which
    the artifact is marked failed with the reason. Content errors never retry: the
    service records them as ``parse_status=failed``. Time limits are the global
    ``CELERY_TASK_SOFT_TIME_LIMIT``/``CELERY_TASK_TIME_LIMIT``: at the soft one the
    artifact is marked failed saying so; a parse stopped by the hard one (or by its
    worker dying) is re-sent by the auditor, which fails it after a few attempts.
    """
    try:
        return services.artifact_parse(artifact_id=artifact_id)
    except SoftTimeLimitExceeded:
        # the limit the worker applied (stamped in the message), not our own clock: the
        # worker's timer starts before this function does
        soft = (self.request.timelimit or (None, None))[1] or settings.CELERY_TASK_SOFT_TIME_LIMIT
        services.artifact_mark_failed(
            artifact_id=artifact_id,
            reason=(
                f"the parse hit its time limit of {soft:g} s "
                "(the file is too large or too slow to read; split it or raise "
                "CELERY_TASK_SOFT_TIME_LIMIT)"
            ),
        )
        return "failed"
    except TRANSIENT as exc:
        if self.request.retries >= self.max_retries:
            services.artifact_mark_failed(
                artifact_id=artifact_id,
                reason=f"gave up after {self.request.retries + 1} attempts: {exc}",
            )
            return "failed"
        raise self.retry(exc=exc, countdown=min(300, 5 * 2**self.request.retries)) from exc


@shared_task(acks_late=True)
def artifact_enqueue_pending() -> int:
    """Re-send parse tasks whose enqueue failed (broker down). Safe to run concurrently."""
    return services.artifact_enqueue_pending()


@shared_task(acks_late=True, ignore_result=True)
def artifact_storage_sweep() -> int:
    """Periodic (Celery beat, hourly): delete stored objects no artifact row points at."""
    return len(services.artifact_storage_sweep())
