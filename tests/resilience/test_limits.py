"""Time and size limits: no task can hold a worker forever, and what hit a limit says so.

The size limit is enforced at upload, before bytes are stored:
tests/ingest/test_services.py::test_a_file_over_the_size_limit_is_refused_before_it_is_stored
(and the per-request streaming limit in the upload view, tests/ingest/test_views.py).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from apps.incidents.services import incident_create
from apps.ingest import services
from apps.ingest.models import Artifact, ParseStatus, RankDigest
from tests import slowdown
from tests.conftest import WorkerProcess, purge_broker_queues, wait_for, worker_env
from tests.ingest import logs
from tests.resilience.conftest import upload

pytestmark = pytest.mark.timeout(60)


def _our_tasks():
    from apps.celery import app

    app.loader.import_default_modules()
    return app, [t for name, t in sorted(app.tasks.items()) if not name.startswith("celery.")]


def test_every_task_has_a_soft_and_a_hard_time_limit_below_the_broker_visibility_timeout():
    app, tasks = _our_tasks()
    names = {t.name for t in tasks}
    assert {
        "apps.ingest.tasks.artifact_parse",
        "apps.ingest.tasks.artifact_enqueue_pending",
        "apps.analysis.tasks.analysis_run",
        "apps.analysis.tasks.analysis_settle",
        "apps.analysis.tasks.analysis_audit",
    } <= names
    visibility = django_settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]
    for task in tasks:
        soft = task.soft_time_limit or app.conf.task_soft_time_limit
        hard = task.time_limit or app.conf.task_time_limit
        assert soft and hard, f"{task.name} has no time limit"
        assert 0 < soft < hard < visibility, (task.name, soft, hard, visibility)
        # a killed worker's task goes back to the queue instead of being dropped
        assert task.acks_late and task.reject_on_worker_lost, task.name


def test_a_parse_that_hits_the_soft_time_limit_is_marked_failed_saying_so(
    transactional_db, team, owner, monkeypatch
):
    from apps.celery import app
    from apps.ingest.tasks import artifact_parse

    app.control.purge()
    # The sender stamps the limits into the message (the worker obeys the message), so
    # the web process and the workers must share CELERY_TASK_*TIME_LIMIT; set both.
    monkeypatch.setattr(artifact_parse, "soft_time_limit", 1)
    monkeypatch.setattr(artifact_parse, "time_limit", 20)
    monkeypatch.setattr(artifact_parse, "_exec_options", None)  # cached at first send
    incident = incident_create(team=team, title="one monstrous file", actor=owner)
    worker = WorkerProcess(queues="ingest", concurrency=1).start(
        worker_env(
            {
                "CELERY_TASK_SOFT_TIME_LIMIT": "1",
                "CELERY_TASK_TIME_LIMIT": "20",
                slowdown.PARSE_SLEEP_ENV: "10",
            }
        )
    )
    try:
        artifact = upload(incident, owner, logs.node_log(4), "error-1-node-04.out")
        wait_for(
            lambda: Artifact.objects.filter(pk=artifact.pk, parse_status="failed").exists(),
            timeout=30,
            message=lambda: f"the parse was not stopped at its soft limit:\n{worker.log()[-3000:]}",
        )
        assert worker.proc.poll() is None  # the worker is free for the next file
    finally:
        worker.stop()
    a = Artifact.objects.get(pk=artifact.pk)
    assert a.parse_error.startswith("the parse hit its time limit of 1 s ("), a.parse_error
    assert not RankDigest.objects.filter(artifact=a).exists()
    # the incident moves on: the fan-in counts it as a file that could not be parsed
    assert "1 could not be parsed" in incident.events.get(kind="ingest.parsed").message


def test_the_auditor_resends_lost_and_orphaned_parses_and_fails_one_that_keeps_dying(
    transactional_db, incident, owner, settings
):
    from apps.celery import app

    settings.RANKSCOPE_PARSE_HEARTBEAT_STALE_SECONDS = 600
    settings.RANKSCOPE_PARSE_QUEUED_SECONDS = 600
    long_ago = timezone.now() - timedelta(seconds=601)
    died_once, keeps_dying, lost, fresh, slow_but_alive = (
        upload(incident, owner, logs.node_log(n), f"node-{n}.out") for n in range(5)
    )
    Artifact.objects.filter(pk__in=[died_once.pk, keeps_dying.pk, slow_but_alive.pk]).update(
        parse_status=ParseStatus.PARSING,
        parse_started_at=long_ago,
        parse_heartbeat_at=long_ago,
        parse_attempts=1,
    )
    # started long ago, but its worker still beats: left alone, however long it takes
    Artifact.objects.filter(pk=slow_but_alive.pk).update(parse_heartbeat_at=timezone.now())
    Artifact.objects.filter(pk=keeps_dying.pk).update(parse_attempts=services.MAX_PARSE_ATTEMPTS)
    Artifact.objects.filter(pk=lost.pk).update(enqueued_at=long_ago)  # message lost with Redis
    try:
        # The other uploads' messages still wait in the queue: "lost" may only be behind
        # them, so only the orphaned parse is re-sent.
        assert services.artifact_enqueue_pending() == 1  # died_once
        purge_broker_queues()  # Redis restarted without its messages: the queue is empty
        assert services.artifact_enqueue_pending() == 1  # lost (fresh waits its full window)
        assert services.artifact_enqueue_pending() == 0  # each re-sent once per window
    finally:
        app.control.purge()
    gave_up = Artifact.objects.get(pk=keeps_dying.pk)
    assert gave_up.parse_status == ParseStatus.FAILED
    assert gave_up.parse_error.startswith(
        f"its parse was started {services.MAX_PARSE_ATTEMPTS} times and never finished"
    )
    assert Artifact.objects.get(pk=lost.pk).enqueued_at > long_ago
    assert Artifact.objects.get(pk=fresh.pk).parse_status == ParseStatus.QUEUED
    assert Artifact.objects.get(pk=slow_but_alive.pk).parse_status == ParseStatus.PARSING
