"""The auditor: re-send runs whose message was lost, re-queue runs whose worker died,
fail runs past their limits, request the analysis of uploads that settled unseen."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, F, Max, OuterRef, Q
from django.utils import timezone

from apps.analysis.models import AnalysisRun, RunStatus, Trigger
from apps.analysis.services.request import _enqueue_on_commit, analysis_request, settle_key
from apps.incidents.models import Incident
from apps.incidents.services import incident_event_add
from apps.ingest import storage
from apps.ingest.models import ACTIVE_STATUSES, Artifact, ParseStatus
from apps.ingest.services import artifact_enqueue_pending
from apps.lib import sharedcache
from apps.lib.brokerqueue import queue_depth

logger = logging.getLogger(__name__)


@dataclass
class AuditReport:
    requeued: list[str]
    failed: list[str]
    artifacts_requeued: int
    settled: list[str] = field(default_factory=list)


def _fenced_move(
    run: AnalysisRun, *, from_status: str, kind: str, message: str, **fields: object
) -> bool:
    """Move ``run`` only if it is still in ``from_status`` under the same task id, and
    put the move on the incident's timeline; False when another writer got there first.
    Runs inside the caller's transaction."""
    updated = AnalysisRun.objects.filter(pk=run.pk, status=from_status, task_id=run.task_id).update(
        **fields
    )
    if not updated:
        return False
    incident_event_add(incident=run.incident, kind=kind, message=message, data={"run": run.code})
    return True


def _requeue(run: AnalysisRun, *, reason: str, from_status: str) -> bool:
    new_task_id = uuid.uuid4().hex
    with transaction.atomic():
        if not _fenced_move(
            run,
            from_status=from_status,
            kind="analysis.requeued",
            message=f"Analysis re-queued: {reason}",
            status=RunStatus.QUEUED,
            task_id=new_task_id,
            enqueued_at=timezone.now(),
            progress_message="re-queued",
        ):
            return False
        run.task_id = new_task_id
        _enqueue_on_commit(run)
    return True


def _fail_stuck(run: AnalysisRun, *, reason: str, from_status: str) -> bool:
    with transaction.atomic():
        return _fenced_move(
            run,
            from_status=from_status,
            kind="analysis.failed",
            message=f"Analysis failed: {reason}",
            status=RunStatus.FAILED,
            error=reason,
            finished_at=timezone.now(),
            progress_message="failed",
        )


def _artifacts_enqueue_pending(*, older_than: timedelta) -> int:
    """Re-enqueue parse work whose enqueue was lost; ingest owns how that is done."""
    return int(artifact_enqueue_pending(older_than=older_than) or 0)


def _analyse_settled_uploads(now: datetime) -> list[str]:
    """Request the analysis of uploads that settled but were never analysed.

    An incident whose newest upload is older than the settle time plus a grace, whose
    files are all parsed, and which has no analysis requested since that upload: its
    settle check (or the parse fan-in) was lost with Redis or with a worker. Looks back
    one day. ``analysis_request`` is exactly-once per input set, so running this twice,
    or beside a late settle check, requests one analysis.
    """
    settle = settings.RANKSCOPE_ANALYSIS_SETTLE_SECONDS
    grace = settings.RANKSCOPE_ANALYSIS_SETTLE_GRACE_SECONDS
    active = Artifact.objects.filter(incident=OuterRef("pk"), parse_status__in=ACTIVE_STATUSES)
    usable = Artifact.objects.filter(incident=OuterRef("pk")).exclude(
        parse_status=ParseStatus.REJECTED
    )
    candidates = (
        Incident.objects.annotate(
            newest=Max("artifacts__created_at"), last_run=Max("analysis_runs__created_at")
        )
        .filter(
            newest__gte=now - timedelta(days=1),
            newest__lt=now - timedelta(seconds=settle + grace),
        )
        .filter(Q(last_run__isnull=True) | Q(last_run__lt=F("newest")))
        .filter(Exists(usable))
        .exclude(Exists(active))
    )
    requested = []
    for incident in candidates[:200]:
        sharedcache.delete(settle_key(incident.pk))
        run = analysis_request(incident=incident, trigger=Trigger.AUDITOR)
        if run is not None:
            requested.append(incident.code)
    return requested


def analysis_audit(*, max_attempts: int = 3) -> AuditReport:
    """Find stuck analysis work and move it on. Run every minute by Celery beat.

    - queued longer than RANKSCOPE_ANALYSIS_QUEUED_SECONDS (its message was lost):
      a new fence, enqueued again (the old message, if it ever arrives, is a no-op);
    - running past the hard time limit: FAILED with the reason;
    - running, but its heartbeat stopped for RANKSCOPE_ANALYSIS_STALE_SECONDS (the
      worker died): re-queued, up to ``max_attempts`` attempts, then FAILED;
    - ingest artifacts stuck in pending/queued: their parse is enqueued again;
    - uploads that settled without an analysis (a lost settle check): it is requested.
    Every change is compare-and-set, so two auditors at once do each thing once.
    """
    now = timezone.now()
    queued_limit = timedelta(seconds=settings.RANKSCOPE_ANALYSIS_QUEUED_SECONDS)
    stale = timedelta(seconds=settings.RANKSCOPE_ANALYSIS_STALE_SECONDS)
    hard = settings.RANKSCOPE_ANALYSIS_TIME_LIMIT
    report = AuditReport(requeued=[], failed=[], artifacts_requeued=0)

    running = AnalysisRun.objects.filter(status=RunStatus.RUNNING).select_related("incident")
    for run in running:
        if run.started_at and run.started_at < now - timedelta(seconds=hard):
            reason = f"The analysis was still running after the hard time limit of {hard} s."
            if _fail_stuck(run, reason=reason, from_status=RunStatus.RUNNING):
                report.failed.append(run.code)
        elif run.heartbeat_at is None or run.heartbeat_at < now - stale:
            if run.attempts >= max_attempts:
                reason = f"The worker running this analysis stopped {run.attempts} times."
                if _fail_stuck(run, reason=reason, from_status=RunStatus.RUNNING):
                    report.failed.append(run.code)
            elif _requeue(
                run,
                reason="the worker running it stopped responding",
                from_status=RunStatus.RUNNING,
            ):
                report.requeued.append(run.code)

    queued = AnalysisRun.objects.filter(
        status=RunStatus.QUEUED, enqueued_at__lt=now - queued_limit
    ).select_related("incident")
    if queued.exists() and queue_depth("analysis"):
        queued = queued.none()  # still behind other messages, not lost: leave them
    for run in queued:
        if _requeue(run, reason="it waited too long in the queue", from_status=RunStatus.QUEUED):
            report.requeued.append(run.code)

    report.settled = _analyse_settled_uploads(now)
    report.artifacts_requeued = _artifacts_enqueue_pending(
        older_than=timedelta(seconds=settings.RANKSCOPE_ANALYSIS_PENDING_ARTIFACT_SECONDS)
    )
    _storage_abort_stale_uploads()
    return report


def _storage_abort_stale_uploads() -> None:
    """Abort S3 multipart uploads a killed upload left behind (their parts are billed)."""
    try:
        storage.abort_stale_uploads(
            older_than=timedelta(seconds=settings.RANKSCOPE_S3_ABORT_UPLOADS_AFTER_SECONDS)
        )
    except storage.ERRORS:  # the store is down: the next audit tries again
        logger.warning("could not sweep unfinished multipart uploads", exc_info=True)
