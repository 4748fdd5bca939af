"""The auditor: stuck analysis runs move on, with the reason on the timeline."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone

from apps.analysis import services, tasks
from apps.analysis.models import AnalysisRun, RunStatus
from apps.incidents.models import IncidentEvent
from apps.ingest.models import Artifact


@pytest.fixture(autouse=True)
def _setup(monkeypatch, empty_broker_queues):
    cache.clear()
    sent: list[tuple] = []
    monkeypatch.setattr(
        tasks.analysis_run,
        "apply_async",
        lambda args, task_id: sent.append((args[0], task_id)),
    )
    return sent


def _audit(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        return services.analysis_audit()


def test_a_run_stuck_in_the_queue_is_enqueued_again_with_a_new_fence(
    incident, job, _setup, django_capture_on_commit_callbacks
):
    run = services.analysis_request(incident=incident, trigger="ingest")
    AnalysisRun.objects.filter(pk=run.pk).update(enqueued_at=timezone.now() - timedelta(minutes=11))
    report = _audit(django_capture_on_commit_callbacks)
    assert report.requeued == [run.code]
    fresh = AnalysisRun.objects.get(pk=run.pk)
    assert fresh.status == RunStatus.QUEUED and fresh.task_id != run.task_id
    assert _setup[-1] == (run.pk, fresh.task_id)
    # the lost message, if it ever arrives, does nothing
    assert services.analysis_execute(run_id=run.pk, task_id=run.task_id).status == "queued"
    # the new one runs it
    done = services.analysis_execute(run_id=run.pk, task_id=fresh.task_id)
    assert done.status == RunStatus.SUCCEEDED
    assert IncidentEvent.objects.filter(kind="analysis.requeued").count() == 1


def test_a_fresh_queued_run_is_left_alone(incident, job, django_capture_on_commit_callbacks):
    services.analysis_request(incident=incident, trigger="ingest")
    report = _audit(django_capture_on_commit_callbacks)
    assert report.requeued == [] and report.failed == []


def test_a_run_past_the_hard_time_limit_fails_with_the_reason(
    incident, job, django_capture_on_commit_callbacks, settings
):
    settings.RANKSCOPE_ANALYSIS_TIME_LIMIT = 600
    run = services.analysis_request(incident=incident, trigger="ingest")
    AnalysisRun.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING,
        started_at=timezone.now() - timedelta(seconds=601),
        heartbeat_at=timezone.now(),
    )
    report = _audit(django_capture_on_commit_callbacks)
    assert report.failed == [run.code]
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert run.error == "The analysis was still running after the hard time limit of 600 s."
    assert IncidentEvent.objects.get(kind="analysis.failed").message.endswith("of 600 s.")


def test_a_run_whose_worker_stopped_beating_is_requeued_then_given_up(
    incident, job, _setup, django_capture_on_commit_callbacks, settings
):
    settings.RANKSCOPE_ANALYSIS_STALE_SECONDS = 60
    run = services.analysis_request(incident=incident, trigger="ingest")
    stale = timezone.now() - timedelta(seconds=61)
    AnalysisRun.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING, started_at=stale, heartbeat_at=stale, attempts=1
    )
    assert _audit(django_capture_on_commit_callbacks).requeued == [run.code]
    assert AnalysisRun.objects.get(pk=run.pk).status == RunStatus.QUEUED

    # a run whose workers keep dying is failed, not retried forever
    AnalysisRun.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING, started_at=stale, heartbeat_at=stale, attempts=3
    )
    assert _audit(django_capture_on_commit_callbacks).failed == [run.code]
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert "stopped 3 times" in run.error


def test_a_live_run_is_left_alone(incident, job, django_capture_on_commit_callbacks):
    run = services.analysis_request(incident=incident, trigger="ingest")
    AnalysisRun.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING, started_at=timezone.now(), heartbeat_at=timezone.now()
    )
    report = _audit(django_capture_on_commit_callbacks)
    assert report.requeued == [] and report.failed == []


def test_artifacts_whose_parse_was_never_enqueued_are_sent_again(
    incident, job, monkeypatch, django_capture_on_commit_callbacks
):
    from apps.ingest import tasks as ingest_tasks

    sent: list = []
    for name in ("apply_async", "delay"):
        monkeypatch.setattr(
            ingest_tasks.artifact_parse, name, lambda *a, **k: sent.append((a, k)), raising=False
        )
    Artifact.objects.filter(pk=job[0].pk).update(
        parse_status="pending", enqueued_at=None, created_at=timezone.now() - timedelta(minutes=5)
    )
    report = _audit(django_capture_on_commit_callbacks)
    assert report.artifacts_requeued == 1
    assert sent


def test_the_auditor_runs_from_beat_often_enough_to_resend_lost_work_within_two_minutes(settings):
    entry = settings.CELERY_BEAT_SCHEDULE["analysis-audit"]
    assert entry["task"] == tasks.analysis_audit.name
    # Lost work is found after the longest "queued"/"quiet" window, then on the next run.
    longest = max(
        settings.RANKSCOPE_PARSE_QUEUED_SECONDS,
        settings.RANKSCOPE_PARSE_HEARTBEAT_STALE_SECONDS,
        settings.RANKSCOPE_ANALYSIS_QUEUED_SECONDS,
        settings.RANKSCOPE_ANALYSIS_STALE_SECONDS,
        settings.RANKSCOPE_ANALYSIS_SETTLE_SECONDS
        + settings.RANKSCOPE_ANALYSIS_SETTLE_GRACE_SECONDS,
    )
    assert longest + entry["schedule"] <= 120


def test_uploads_that_settled_without_an_analysis_get_one_from_the_auditor(
    transactional_db, incident, django_capture_on_commit_callbacks, settings, _setup
):
    """The settle check died with Redis (or its worker): the auditor asks instead."""
    settings.RANKSCOPE_ANALYSIS_SETTLE_SECONDS = 30
    settings.RANKSCOPE_ANALYSIS_SETTLE_GRACE_SECONDS = 30
    art = Artifact.objects.create(incident=incident, parse_status="parsed", storage_key="k")
    Artifact.objects.filter(pk=art.pk).update(created_at=timezone.now() - timedelta(seconds=20))
    assert _audit(django_capture_on_commit_callbacks).settled == []  # still settling

    Artifact.objects.filter(pk=art.pk).update(created_at=timezone.now() - timedelta(seconds=90))
    report = _audit(django_capture_on_commit_callbacks)
    assert report.settled == [incident.code]
    run = AnalysisRun.objects.get(incident=incident)
    assert run.trigger == "auditor" and run.inputs == [art.pk]
    assert _setup == [(run.pk, run.task_id)]
    assert _audit(django_capture_on_commit_callbacks).settled == []  # asked once

    # A newer upload that also settled: a second analysis, for the new input set.
    newer = Artifact.objects.create(incident=incident, parse_status="parsed", storage_key="k2")
    Artifact.objects.filter(pk=newer.pk).update(created_at=timezone.now() - timedelta(seconds=70))
    AnalysisRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(seconds=80))
    assert _audit(django_capture_on_commit_callbacks).settled == [incident.code]
    assert AnalysisRun.objects.filter(incident=incident).count() == 2
