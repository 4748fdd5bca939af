"""Requesting a run: one per input set however many callers race, the task sent on
commit, and the debounce window of SLURM uploads."""

from __future__ import annotations

import logging
import uuid

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from apps.analysis import tasks
from apps.analysis.models import AnalysisRun, RunStatus, Trigger
from apps.analysis.services.inputs import _incident_artifacts, analysis_fingerprint
from apps.incidents.models import Incident
from apps.incidents.services import incident_event_add
from apps.ingest.models import ACTIVE_STATUSES, ParseStatus
from apps.lib import sharedcache

logger = logging.getLogger(__name__)


def settle_key(incident_id: int) -> str:
    """The shared-cache key that holds an incident's debounce window open."""
    return f"rankscope:analysis:settle:{incident_id}"


def closed_key(incident_id: int) -> str:
    """The shared-cache key that says the job is over: no debounce check re-opens the
    window (set by the controller's job-end post, cleared when a new window opens)."""
    return f"rankscope:analysis:settle-closed:{incident_id}"


def _enqueue_on_commit(run: AnalysisRun) -> None:
    run_id, task_id = run.pk, run.task_id

    def send() -> None:
        try:
            tasks.analysis_run.apply_async(args=[run_id], task_id=task_id)
        except Exception:  # broker down: the run stays queued; the auditor re-sends it
            logger.warning("could not enqueue analysis run %s; the auditor will re-send it", run_id)

    transaction.on_commit(send, robust=True)


def analysis_request(
    *,
    incident: Incident,
    trigger: str,
    settle_seconds: float | None = None,
    actor: AbstractBaseUser | None = None,
) -> AnalysisRun | None:
    """Ask for the analysis of the incident's current input set; exactly once per set.

    Returns the run (new, or the existing one for the same input set), or None when
    there is nothing to run yet: no artifacts, some still being parsed (the last
    parse asks again), or a debounce window is open (its check asks again).

    Race-free: the (incident, fingerprint) unique constraint lets exactly one of many
    concurrent callers create the run; the others get that run back. The task is
    enqueued on commit, with the run's fence token as its task id.

    ``settle_seconds``: debounce. Run only once no new artifact has arrived for that
    long (a countdown task re-checks). While such a window is open, the parse fan-in
    (``trigger="ingest"``) defers to it, so a burst of uploads is analysed once.
    ``trigger="manual"`` always makes a new run (a person asked), unless one is
    already queued or running.
    """
    if settle_seconds:
        _settle_schedule(incident=incident, trigger=trigger, settle_seconds=settle_seconds)
        return None
    manual = trigger == Trigger.MANUAL
    if trigger == Trigger.INGEST and sharedcache.get(settle_key(incident.pk)):
        return None  # the open debounce window's check will ask

    # Files refused at upload have no bytes and are shown by the upload panel.
    artifacts = list(
        _incident_artifacts(incident).exclude(parse_status=ParseStatus.REJECTED).order_by("pk")
    )
    if not artifacts or any(a.parse_status in ACTIVE_STATUSES for a in artifacts):
        return None
    fingerprint = analysis_fingerprint(artifacts=artifacts)
    if manual:
        active = incident.analysis_runs.filter(
            status__in=(RunStatus.QUEUED, RunStatus.RUNNING)
        ).first()
        if active is not None:
            return active
        fingerprint = f"{fingerprint[:64]}:manual:{uuid.uuid4().hex}"
    else:
        existing = AnalysisRun.objects.filter(incident=incident, fingerprint=fingerprint).first()
        if existing is not None:
            return existing

    try:
        with transaction.atomic():
            run = AnalysisRun.objects.create(
                incident=incident,
                fingerprint=fingerprint,
                trigger=trigger,
                requested_by=actor if actor is not None and actor.is_authenticated else None,
                inputs=[a.pk for a in artifacts],
                task_id=uuid.uuid4().hex,
                enqueued_at=timezone.now(),
                progress_total=len(artifacts),
                progress_message="queued",
            )
            incident_event_add(
                incident=incident,
                kind="analysis.requested",
                message=f"Analysis queued for {len(artifacts)} file(s) ({run.get_trigger_display()})",
                actor=actor,
                data={"run": run.code, "trigger": trigger},
            )
            _enqueue_on_commit(run)
    except IntegrityError:
        # Another caller created the run for this input set a moment ago.
        return AnalysisRun.objects.get(incident=incident, fingerprint=fingerprint)
    return run


def _settle_schedule(*, incident: Incident, trigger: str, settle_seconds: float) -> None:
    # One pending check per incident, however many uploads arrive in the window. With
    # the cache down (None) every upload sends its own check; the checks are idempotent.
    key = settle_key(incident.pk)
    if sharedcache.add(key, trigger, timeout=int(settle_seconds * 4) + 60) is False:
        return
    incident_id = incident.pk
    sharedcache.delete(closed_key(incident_id))  # uploads after the job's end: wait again

    def send() -> None:
        try:
            tasks.analysis_settle.apply_async(
                args=[incident_id, trigger, settle_seconds], countdown=settle_seconds
            )
        except Exception:  # broker down: the auditor requests the analysis once quiet
            sharedcache.delete(key)
            logger.warning("could not schedule the settle check of incident %s", incident_id)

    transaction.on_commit(send, robust=True)


def analysis_settle_cancel(*, incident: Incident) -> None:
    """Close the incident's debounce window: the job is over, no more uploads to wait for.

    The controller epilog says so. Without this, its request finds files still being
    parsed and returns, and the last parse's fan-in then defers to the window that the
    nodes' posts opened: the verdict would wait ``settle_seconds`` for nothing. The window
    stays closed: the check the first post scheduled, when it finds the uploads recent,
    does not open it again (before, it did, and the last parse's fan-in waited for it).
    """
    keep = int(settings.RANKSCOPE_ANALYSIS_SETTLE_SECONDS * 4) + 60
    sharedcache.set(closed_key(incident.pk), 1, timeout=keep)
    sharedcache.delete(settle_key(incident.pk))


def analysis_settle_check(*, incident_id: int, trigger: str, settle_seconds: float) -> None:
    """The debounce check: request the analysis if uploads have been quiet long enough.

    Otherwise schedule another check for when they will have been. Safe to run twice:
    the request it ends in is idempotent.
    """
    incident = Incident.objects.filter(pk=incident_id).first()
    if incident is None:
        sharedcache.delete(settle_key(incident_id))
        return
    newest = _incident_artifacts(incident).aggregate(newest=Max("created_at"))["newest"]
    quiet = (timezone.now() - newest).total_seconds() if newest else settle_seconds
    if quiet < settle_seconds and not sharedcache.get(closed_key(incident_id)):
        sharedcache.set(settle_key(incident_id), trigger, timeout=int(settle_seconds * 4) + 60)
        tasks.analysis_settle.apply_async(
            args=[incident_id, trigger, settle_seconds],
            countdown=max(0.5, settle_seconds - quiet),
        )
        return
    sharedcache.delete(settle_key(incident_id))
    analysis_request(incident=incident, trigger=trigger)
