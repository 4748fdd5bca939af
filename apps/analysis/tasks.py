"""Celery tasks of the analysis app: thin, JSON arguments (ids), one service call each.

All route to the ``analysis`` queue (``apps.analysis.tasks.*`` in CELERY_TASK_ROUTES).
"""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from apps.analysis import services


@shared_task(
    bind=True,
    name="apps.analysis.tasks.analysis_run",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=settings.RANKSCOPE_ANALYSIS_SOFT_TIME_LIMIT,
    time_limit=settings.RANKSCOPE_ANALYSIS_TIME_LIMIT,
)
def analysis_run(self, run_id: int) -> None:
    """Execute one AnalysisRun.

    Idempotent and fenced: the task id is the run's fence token (the run is claimed
    with compare-and-set queued→running on it). A duplicate or stale delivery returns
    without writing; a redelivery after a worker died restarts the run from scratch.
    No automatic retries: a failure is stored on the run as FAILED with the reason;
    the auditor re-queues runs whose worker vanished.
    """
    services.analysis_execute(run_id=run_id, task_id=self.request.id)


@shared_task(name="apps.analysis.tasks.analysis_settle", acks_late=True)
def analysis_settle(incident_id: int, trigger: str, settle_seconds: float) -> None:
    """Debounce check: request the analysis once uploads have been quiet long enough.

    Safe to run twice: it ends in ``analysis_request``, which is exactly-once per input set.
    """
    services.analysis_settle_check(
        incident_id=incident_id, trigger=trigger, settle_seconds=settle_seconds
    )


@shared_task(name="apps.analysis.tasks.analysis_audit", acks_late=True, ignore_result=True)
def analysis_audit() -> dict:
    """Periodic (Celery beat, every ``RANKSCOPE_AUDIT_SECONDS``): move stuck analysis and parse work on.

    Every change it makes is compare-and-set, so overlapping runs are harmless.
    """
    report = services.analysis_audit()
    return {
        "requeued": report.requeued,
        "failed": report.failed,
        "artifacts_requeued": report.artifacts_requeued,
        "analyses_requested": report.settled,
    }
