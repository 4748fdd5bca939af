"""Re-enqueueing for the auditor: parse work whose message never reached a worker, or
whose worker died, is sent again; a parse that keeps dying is failed."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

from apps.ingest.models import Artifact, ParseStatus
from apps.ingest.services.parse import artifact_mark_failed
from apps.ingest.services.upload import _Enqueuer
from apps.lib.brokerqueue import queue_depth

log = logging.getLogger(__name__)


# The auditor gives up on an artifact whose parse was started this many times without
# finishing (its worker was killed, or the hard time limit stopped it, each time).
MAX_PARSE_ATTEMPTS = 3


def artifact_enqueue_pending(*, older_than: timedelta | None = None, limit: int = 1000) -> int:
    """Send the parse task of artifacts whose task never reached a worker.

    Picks rows still ``pending`` (``enqueued_at`` null: the broker was down at upload)
    created more than ``older_than`` ago (default 60 s, so uploads in flight are left
    alone); rows ``queued`` (sent at ``enqueued_at``) for more than
    ``RANKSCOPE_PARSE_QUEUED_SECONDS`` while the ingest queue is empty — no worker took
    their message: it was lost with a killed worker or with Redis; a duplicate is a no-op;
    and rows ``parsing`` whose heartbeat (``parse_heartbeat_at``, or ``parse_started_at``
    for a row taken before heartbeats existed) is older than
    ``RANKSCOPE_PARSE_HEARTBEAT_STALE_SECONDS`` (default 60 s): their worker died, or
    the hard time limit stopped them. A row whose parse was already started
    ``MAX_PARSE_ATTEMPTS`` times is failed with the reason instead.
    Safe to run from several auditors at once: the parse task is itself idempotent.
    Returns how many were sent.
    """
    now = timezone.now()
    cutoff = now - (older_than if older_than is not None else timedelta(seconds=60))
    stale = now - timedelta(seconds=settings.RANKSCOPE_PARSE_HEARTBEAT_STALE_SECONDS)
    queued_cutoff = now - timedelta(seconds=settings.RANKSCOPE_PARSE_QUEUED_SECONDS)
    pending = Artifact.objects.filter(
        parse_status=ParseStatus.PENDING, enqueued_at__isnull=True, created_at__lt=cutoff
    )
    lost = Artifact.objects.filter(parse_status=ParseStatus.QUEUED, enqueued_at__lt=queued_cutoff)
    if lost.exists() and _ingest_queue_busy():
        # Messages still wait in the queue: these rows may only be behind them. Once it
        # has drained, whatever is still "queued" was lost (with a killed worker's
        # prefetched message, or with Redis) and is re-sent.
        lost = lost.none()
    stuck = _parsing_gone_quiet(stale)
    stuck_ids: set[int] = set()
    ids = list(pending.values_list("pk", flat=True)[:limit])
    ids += list(lost.values_list("pk", flat=True)[: max(0, limit - len(ids))])
    for pk, attempts in stuck.values_list("pk", "parse_attempts")[: max(0, limit - len(ids))]:
        if attempts >= MAX_PARSE_ATTEMPTS:
            artifact_mark_failed(
                artifact_id=pk,
                reason=(
                    f"its parse was started {attempts} times and never finished (the worker "
                    f"was killed or stopped by the hard time limit of "
                    f"{settings.CELERY_TASK_TIME_LIMIT} s each time)"
                ),
            )
        else:
            ids.append(pk)
            stuck_ids.add(pk)
    enqueuer = _Enqueuer()
    sent = 0
    for pk in ids:
        if not enqueuer.send(pk):
            continue
        sent += 1
        # Re-sent: back to queued (an orphaned parse too, unless a worker took it in the
        # meantime), and it waits a full window before the next re-send.
        rows = Artifact.objects.filter(pk=pk, parse_status=ParseStatus.QUEUED)
        if pk in stuck_ids:
            rows = _parsing_gone_quiet(stale).filter(pk=pk)
        rows.update(parse_status=ParseStatus.QUEUED, enqueued_at=timezone.now())
    return sent


def _ingest_queue_busy() -> bool:
    depth = queue_depth("ingest")
    return bool(depth)


def _parsing_gone_quiet(stale: datetime) -> QuerySet[Artifact]:
    """Rows ``parsing`` whose last sign of life is older than ``stale``."""
    return Artifact.objects.alias(
        last_beat=Coalesce("parse_heartbeat_at", "parse_started_at")
    ).filter(parse_status=ParseStatus.PARSING, last_beat__lt=stale)
