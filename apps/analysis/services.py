"""Writes for analysis: request a run, execute it, audit stuck work.

The engine (``rankscope``) is pure; this module is the Django side around
it: which artifacts form the input set, loading their parse results from storage,
the run row with its status/progress/fence, findings, the incident's severity and
the timeline row saying what was concluded.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, F, Max, OuterRef, Q
from django.utils import timezone

import rankscope as engine
from apps.analysis import signals, tasks
from apps.analysis.models import AnalysisRun, Finding, RunStatus, Trigger
from apps.incidents.models import Incident, Severity
from apps.incidents.services import incident_event_add
from apps.ingest import storage
from apps.ingest.models import ACTIVE_STATUSES, Artifact, ParseStatus
from apps.ingest.selectors import artifact_parse_result
from apps.ingest.services import artifact_enqueue_pending
from apps.lib import sharedcache
from apps.lib.brokerqueue import queue_depth
from apps.lib.heartbeat import Heartbeat

logger = logging.getLogger(__name__)


# At most this many progress writes per second per run (the panel polls every 2 s).
PROGRESS_WRITES_PER_SECOND = 4

_SEVERITY = {"CRITICAL": Severity.CRITICAL, "WARNING": Severity.WARNING, "OK": Severity.OK}


# --- the input set ------------------------------------------------------------------


def _incident_artifacts(incident: Incident):
    return Artifact.objects.filter(incident=incident)


def analysis_fingerprint(*, artifacts: list[Any]) -> str:
    """sha256 over the sorted (sha256, parse status) pairs of the inputs + engine version."""
    h = hashlib.sha256(f"engine={engine.ENGINE_VERSION}\n".encode())
    for sha, status in sorted((a.sha256, a.parse_status) for a in artifacts):
        h.update(f"{sha}:{status}\n".encode())
    return h.hexdigest()


def artifact_parse_result_load(*, artifact: Any) -> Any:
    """The artifact's ParseResult, or None; the one place analysis reads parse output."""
    return artifact_parse_result(artifact=artifact)


# --- requesting a run -----------------------------------------------------------------


def settle_key(incident_id: int) -> str:
    """The shared-cache key that holds an incident's debounce window open."""
    return f"rankscope:analysis:settle:{incident_id}"


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
    nodes' posts opened: the verdict would wait ``settle_seconds`` for nothing.
    """
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
    if quiet < settle_seconds:
        sharedcache.set(settle_key(incident_id), trigger, timeout=int(settle_seconds * 4) + 60)
        tasks.analysis_settle.apply_async(
            args=[incident_id, trigger, settle_seconds],
            countdown=max(0.5, settle_seconds - quiet),
        )
        return
    sharedcache.delete(settle_key(incident_id))
    analysis_request(incident=incident, trigger=trigger)


# --- executing a run ------------------------------------------------------------------


class _Progress:
    """Throttled progress writes, fenced by the task id (a stale worker writes nothing)."""

    def __init__(self, run_id: int, task_id: str, total: int) -> None:
        self.run_id, self.task_id, self.total = run_id, task_id, total
        self.last = 0.0
        self.writes = 0

    def __call__(self, current: int, message: str, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < 1.0 / PROGRESS_WRITES_PER_SECOND:
            return
        self.last = now
        self.writes += 1
        AnalysisRun.objects.filter(
            pk=self.run_id, status=RunStatus.RUNNING, task_id=self.task_id
        ).update(
            progress_current=min(current, self.total),
            progress_total=self.total,
            progress_message=message[:200],
            heartbeat_at=timezone.now(),
        )


def _heartbeat_touch(run_id: int, task_id: str) -> Callable[[], bool]:
    """The run's heartbeat: touch heartbeat_at while this delivery still holds the run.

    The auditor re-queues a running run whose heartbeat stopped: its worker died.
    """

    def touch() -> bool:
        held = AnalysisRun.objects.filter(pk=run_id, status=RunStatus.RUNNING, task_id=task_id)
        return bool(held.update(heartbeat_at=timezone.now()))

    return touch


@dataclass
class _Inputs:
    results: list[Any]
    failed: list[dict[str, Any]]


def _load_inputs(run: AnalysisRun, progress: _Progress) -> _Inputs:
    artifacts = list(Artifact.objects.filter(pk__in=run.inputs).order_by("display_name"))
    results: list[Any] = []
    failed: list[dict[str, Any]] = []
    for i, artifact in enumerate(artifacts, start=1):
        name = artifact.display_name
        if artifact.parse_status != ParseStatus.PARSED:
            failed.append(_failed_input(artifact, artifact.parse_error or "could not be parsed"))
        else:
            try:
                result = artifact_parse_result_load(artifact=artifact)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                result = None
                logger.warning("parse result of %s unreadable: %s", name, exc)
            if result is None:
                failed.append(_failed_input(artifact, "its parse result is missing from storage"))
            else:
                results.append(result)
        progress(i, f"files loaded {i}/{len(artifacts)}", force=i == len(artifacts))
    return _Inputs(results=results, failed=failed)


def _failed_input(artifact: Any, reason: str) -> dict[str, Any]:
    return {
        "name": artifact.display_name,
        "kind": artifact.kind,
        "parser": "",
        "lines": 0,
        "bytes": artifact.size,
        "ranks": len(artifact.ranks or []),
        "error": reason,
        "warnings": [],
        "parse_status": artifact.parse_status,
    }


def _analyzer_errors(doc: dict[str, Any]) -> list[str]:
    analysis = doc.get("analysis") or {}
    errors = [
        f"{a.get('name')}: {a['status'][len('error: ') :]}"
        for a in analysis.get("analyzers") or []
        if str(a.get("status", "")).startswith("error")
    ]
    for e in analysis.get("errors") or []:
        text = e if isinstance(e, str) else f"{e.get('name', '?')}: {e.get('error', e)}"
        if text not in errors:
            errors.append(text)
    return errors


def analysis_execute(*, run_id: int, task_id: str) -> AnalysisRun | None:
    """Run the engine for one AnalysisRun. Called by the Celery task; safe to run twice.

    - Claim: compare-and-set queued→running where task_id matches (the fence). A second
      delivery of a finished run, or a delivery whose fence was replaced, returns.
    - A redelivery of the *same* task (its worker died mid-way, the broker handed the
      message on) restarts from scratch; the findings are deleted and rewritten in the
      finishing transaction, so the rows equal those of one uninterrupted run.
    - Errors never vanish: an engine crash, an analyzer that raised, or the soft time
      limit make a FAILED run with the reason stored.
    """
    now = timezone.now()
    claimed = AnalysisRun.objects.filter(
        pk=run_id, status=RunStatus.QUEUED, task_id=task_id
    ).update(
        status=RunStatus.RUNNING,
        started_at=now,
        heartbeat_at=now,
        attempts=F("attempts") + 1,
        progress_current=0,
        progress_message="starting",
    )
    if not claimed:
        run = AnalysisRun.objects.filter(pk=run_id).first()
        if run is None or run.status != RunStatus.RUNNING or run.task_id != task_id:
            return run  # finished already, or another delivery holds the fence
        # Our own message again: the worker that had it died before acknowledging it.
        AnalysisRun.objects.filter(pk=run_id, status=RunStatus.RUNNING, task_id=task_id).update(
            started_at=now, heartbeat_at=now, attempts=F("attempts") + 1, progress_current=0
        )
    run = AnalysisRun.objects.select_related("incident").get(pk=run_id)
    n_analyzers = len(engine.registered_analyzers())
    progress = _Progress(run_id, task_id, total=len(run.inputs) + n_analyzers)
    heartbeat = None
    if not connection.in_atomic_block:  # a caller's open transaction would block the thread
        heartbeat = Heartbeat(
            _heartbeat_touch(run_id, task_id),
            interval=settings.RANKSCOPE_ANALYSIS_HEARTBEAT_SECONDS,
            name=f"analysis-heartbeat-{run_id}",
        ).start()
    t0 = time.perf_counter()
    timings: dict[str, Any] = {}
    try:
        inputs = _load_inputs(run, progress)
        timings["load_seconds"] = round(time.perf_counter() - t0, 3)
        base = len(run.inputs)

        def on_analyzer(i: int, total: int, message: str) -> None:
            progress(base + i, f"analyzers running: {message} ({i}/{total})", force=i == total)

        t1 = time.perf_counter()
        options = engine.Options(history_hosts=_history_hosts(run.incident))
        doc = engine.analyze(inputs.results, options=options, progress=on_analyzer)
        timings["analyze_seconds"] = round(time.perf_counter() - t1, 3)
        doc.setdefault("artifacts", []).extend(inputs.failed)
        timings["analyzers"] = {
            a["name"]: a.get("seconds") for a in (doc.get("analysis") or {}).get("analyzers", [])
        }
        errors = _analyzer_errors(doc)
        error = ""
        if errors:
            error = "An analyzer crashed, so this analysis is incomplete: " + "; ".join(errors)
        return _run_finish(run=run, task_id=task_id, doc=doc, error=error, timings=timings, t0=t0)
    except SoftTimeLimitExceeded:
        elapsed = int(time.perf_counter() - t0)
        return _run_fail(
            run=run,
            task_id=task_id,
            error=f"The analysis hit the time limit after {elapsed} s.",
            timings=timings,
        )
    except Exception as exc:
        logger.exception("analysis run %s crashed", run.code)
        return _run_fail(
            run=run,
            task_id=task_id,
            error=f"The analysis engine crashed: {type(exc).__name__}: {exc}",
            timings=timings,
        )
    finally:
        if heartbeat is not None:
            heartbeat.stop()


def _lock_if_holder(run: AnalysisRun, task_id: str) -> AnalysisRun | None:
    locked = AnalysisRun.objects.select_for_update().filter(pk=run.pk).first()
    if locked is None or locked.status != RunStatus.RUNNING or locked.task_id != task_id:
        return None
    return locked


def _conclusion(doc: dict[str, Any]) -> str:
    """ "Analysis: hang · DATA · rank 77 on node-09 (confidence 0.8)"."""
    tri = doc.get("triage") or {}
    loc = doc.get("localization") or {}
    ranks = loc.get("culprit_ranks") or []
    hosts = loc.get("culprit_hosts") or []
    if ranks:
        where = ("rank " if len(ranks) == 1 else "ranks ") + _short_list(ranks)
        if hosts:
            where += " on " + _short_list(hosts)
    elif hosts:
        where = _short_list(hosts)
    else:
        where = str(tri.get("scope", "unknown")).replace("_", " ")
    confidence = float(tri.get("confidence") or 0.0)
    return (
        f"Analysis: {tri.get('shape', 'none')} · {tri.get('category', 'UNKNOWN')} · {where} "
        f"(confidence {round(confidence, 2):g})"
    )


def _short_list(values: list[Any], limit: int = 4) -> str:
    shown = ", ".join(str(v) for v in values[:limit])
    return shown + (f" +{len(values) - limit} more" if len(values) > limit else "")


def _history_hosts(incident: Incident) -> dict[str, int]:
    """Hosts the team's other incidents blamed, as the apps above analysis count them."""
    counts: Counter[str] = Counter()
    for receiver, answer in signals.host_history_requested.send_robust(
        sender=AnalysisRun, incident=incident
    ):
        if isinstance(answer, Exception):  # no history is better than no analysis
            logger.error("host history from %r failed: %s", receiver, answer, exc_info=answer)
        elif answer:
            counts.update(answer)
    return dict(counts)


def _announce_success(run: AnalysisRun) -> None:
    """Tell the apps above (the similar-incident signature) that a run succeeded."""
    for receiver, answer in signals.analysis_succeeded.send_robust(
        sender=AnalysisRun, run=run, incident=run.incident
    ):
        if isinstance(answer, Exception):  # the analysis is stored; they can catch up later
            logger.error(
                "%r failed after analysis %s of incident %s: %s",
                receiver,
                run.code,
                run.incident.code,
                answer,
                exc_info=answer,
            )


def _run_finish(
    *,
    run: AnalysisRun,
    task_id: str,
    doc: dict[str, Any],
    error: str,
    timings: dict[str, Any],
    t0: float,
) -> AnalysisRun | None:
    findings = [
        Finding(
            run_id=run.pk,
            order=i,
            phase=str(f.get("phase", ""))[:16],
            kind=str(f.get("kind", ""))[:64],
            title=str(f.get("title", ""))[:500],
            detail=str(f.get("detail", "")),
            confidence=float(f.get("confidence") or 0.0),
            ranks=list(f.get("ranks") or []),
            hosts=list(f.get("hosts") or []),
            evidence=list(f.get("evidence") or []),
        )
        for i, f in enumerate(doc.get("findings") or [])
    ]
    failed_inputs = [a for a in doc.get("artifacts", []) if a.get("error")]
    with transaction.atomic():
        locked = _lock_if_holder(run, task_id)
        if locked is None:
            return None  # fenced out: a newer delivery owns this run now
        Finding.objects.filter(run=locked).delete()
        Finding.objects.bulk_create(findings)
        now = timezone.now()
        timings["total_seconds"] = round(time.perf_counter() - t0, 3)
        locked.status = RunStatus.FAILED if error else RunStatus.SUCCEEDED
        locked.error = error
        locked.document = doc
        locked.engine_version = str(doc.get("engine_version", ""))[:32]
        locked.timings = timings
        locked.finished_at = now
        locked.progress_current = locked.progress_total
        locked.progress_message = "failed" if error else "done"
        locked.save()
        incident = locked.incident
        conclusion = _conclusion(doc)
        if failed_inputs:
            conclusion += f"; {len(failed_inputs)} file(s) could not be read"
        if error:
            incident_event_add(
                incident=incident,
                kind="analysis.failed",
                message=f"Analysis failed: {error}",
                data={"run": locked.code},
            )
        else:
            severity = _SEVERITY.get(str((doc.get("triage") or {}).get("severity", "")).upper())
            if severity and severity != incident.severity:
                Incident.objects.filter(pk=incident.pk).update(severity=severity, updated_at=now)
                conclusion += f" — severity set to {severity.label.lower()}"
            incident_event_add(
                incident=incident,
                kind="analysis.succeeded",
                message=conclusion,
                data={"run": locked.code, "findings": len(findings)},
            )
    if not error:
        _announce_success(locked)
    return locked


def _run_fail(
    *, run: AnalysisRun, task_id: str, error: str, timings: dict[str, Any]
) -> AnalysisRun | None:
    with transaction.atomic():
        locked = _lock_if_holder(run, task_id)
        if locked is None:
            return None
        locked.status = RunStatus.FAILED
        locked.error = error[:5000]
        locked.timings = timings
        locked.finished_at = timezone.now()
        locked.progress_message = "failed"
        locked.save()
        incident_event_add(
            incident=locked.incident,
            kind="analysis.failed",
            message=f"Analysis failed: {error[:500]}",
            data={"run": locked.code},
        )
    return locked


# --- the auditor ------------------------------------------------------------------------


@dataclass
class AuditReport:
    requeued: list[str]
    failed: list[str]
    artifacts_requeued: int
    settled: list[str] = field(default_factory=list)


def _requeue(run: AnalysisRun, *, reason: str, from_status: str) -> bool:
    new_task_id = uuid.uuid4().hex
    with transaction.atomic():
        updated = AnalysisRun.objects.filter(
            pk=run.pk, status=from_status, task_id=run.task_id
        ).update(
            status=RunStatus.QUEUED,
            task_id=new_task_id,
            enqueued_at=timezone.now(),
            progress_message="re-queued",
        )
        if not updated:
            return False
        run.task_id = new_task_id
        incident_event_add(
            incident=run.incident,
            kind="analysis.requeued",
            message=f"Analysis re-queued: {reason}",
            data={"run": run.code},
        )
        _enqueue_on_commit(run)
    return True


def _fail_stuck(run: AnalysisRun, *, reason: str, from_status: str) -> bool:
    with transaction.atomic():
        updated = AnalysisRun.objects.filter(
            pk=run.pk, status=from_status, task_id=run.task_id
        ).update(
            status=RunStatus.FAILED,
            error=reason,
            finished_at=timezone.now(),
            progress_message="failed",
        )
        if not updated:
            return False
        incident_event_add(
            incident=run.incident,
            kind="analysis.failed",
            message=f"Analysis failed: {reason}",
            data={"run": run.code},
        )
    return True


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
