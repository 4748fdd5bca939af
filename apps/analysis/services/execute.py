"""Executing a run: claim it with its fence, load the inputs, run the engine with a
heartbeat and throttled progress, store the findings and the conclusion."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

import rankscope as engine
from apps.analysis import signals
from apps.analysis.models import AnalysisRun, Finding, RunStatus
from apps.analysis.services.inputs import artifact_parse_result_load
from apps.incidents.models import Incident, Severity
from apps.incidents.services import incident_event_add
from apps.ingest.models import Artifact, ParseStatus
from apps.lib.heartbeat import Heartbeat
from rankscope.document import read_document

logger = logging.getLogger(__name__)


# At most this many progress writes per second per run (the panel polls every 2 s).
PROGRESS_WRITES_PER_SECOND = 4


_SEVERITY = {"CRITICAL": Severity.CRITICAL, "WARNING": Severity.WARNING, "OK": Severity.OK}


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


# what loading reads of an input's row (its parse result is read from storage)
_INPUT_FIELDS = (
    "display_name",
    "kind",
    "size",
    "ranks",
    "parse_status",
    "parse_error",
    "parsed_key",
    "metrics_key",
)


def _load_inputs(run: AnalysisRun, progress: _Progress) -> _Inputs:
    """The parse results of the run's inputs, one file at a time: a row, then its stored
    result decoded and turned into the engine's digest before the next is read (the
    compressed and decoded JSON of one file are held at once, never of all of them)."""
    rows = Artifact.objects.filter(pk__in=run.inputs).order_by("display_name", "pk")
    total = rows.count()
    results: list[Any] = []
    failed: list[dict[str, Any]] = []
    artifacts = rows.only(*_INPUT_FIELDS).iterator(chunk_size=200)
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
        progress(i, f"files loaded {i}/{total}", force=i == total)
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
    analysis = read_document(doc).analysis
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
    if not _claim(run_id, task_id):
        # finished already, missing, or another delivery holds the fence
        return AnalysisRun.objects.filter(pk=run_id).first()
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
            a["name"]: a.get("seconds") for a in read_document(doc).analysis.get("analyzers", [])
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


def _claim(run_id: int, task_id: str) -> bool:
    """Take the run for this delivery (compare-and-set on the fence); False when it is not
    ours to execute: finished, missing, or fenced to another delivery."""
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
    if claimed:
        return True
    run = AnalysisRun.objects.filter(pk=run_id).first()
    if run is None or run.status != RunStatus.RUNNING or run.task_id != task_id:
        return False
    # Our own message again: the worker that had it died before acknowledging it.
    AnalysisRun.objects.filter(pk=run_id, status=RunStatus.RUNNING, task_id=task_id).update(
        started_at=now, heartbeat_at=now, attempts=F("attempts") + 1, progress_current=0
    )
    return True


def _lock_if_holder(run: AnalysisRun, task_id: str) -> AnalysisRun | None:
    locked = AnalysisRun.objects.select_for_update().filter(pk=run.pk).first()
    if locked is None or locked.status != RunStatus.RUNNING or locked.task_id != task_id:
        return None
    return locked


def _conclusion(doc: dict[str, Any]) -> str:
    """ "Analysis: hang · DATA · rank 77 on node-09 (confidence 0.8)"."""
    view = read_document(doc)
    tri, loc = view.triage, view.localization
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
        for i, f in enumerate(read_document(doc).findings)
    ]
    failed_inputs = [a for a in read_document(doc).artifacts if a.get("error")]
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
            severity = _SEVERITY.get(str(read_document(doc).triage.get("severity", "")).upper())
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
