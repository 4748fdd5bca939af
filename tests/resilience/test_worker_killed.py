"""A parse survives its worker being SIGKILLed: redelivered (or re-sent), same rows as once.

A whole worker killed leaves nobody to give the message back; the parse's heartbeat
goes quiet with it, and the auditor re-sends it once the heartbeat is stale.

The analysis counterpart (a run whose worker was killed completes on a new worker with
the same findings) is tests/analysis/test_worker.py.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.core.files.storage import default_storage
from django.utils import timezone

from apps.incidents.services import incident_create
from apps.ingest import services
from apps.ingest.models import Artifact, ParseStatus, RankDigest
from tests import slowdown
from tests.conftest import WorkerProcess, process_tree, sigkill, wait_for, worker_env
from tests.ingest import logs
from tests.resilience.conftest import parse_footprint, upload

pytestmark = pytest.mark.timeout(90)

LOG = logs.node_log(3, hung_rank=27, steps=40)
NAME = "error-7-node-03.out"
STALE = 3  # RANKSCOPE_PARSE_HEARTBEAT_STALE_SECONDS in the whole-worker drill


def _reference(team, owner) -> dict:
    """The same file parsed once, without interruption."""
    clean = incident_create(team=team, title="parsed in one go", actor=owner)
    artifact = upload(clean, owner, LOG, NAME)
    assert services.artifact_parse(artifact_id=artifact.pk) == ParseStatus.PARSED
    return parse_footprint(artifact)


def _mid_parse(artifact: Artifact, worker: WorkerProcess) -> None:
    """Wait until the worker has stored the parse outputs and not yet written the rows."""
    wait_for(
        lambda: (
            Artifact.objects.filter(pk=artifact.pk, parse_status=ParseStatus.PARSING).exists()
            and default_storage.exists(services.parsed_key_for(artifact))
        ),
        timeout=40,
        message=lambda: (
            f"the worker never reached the middle of the parse:\n{worker.log()[-3000:]}"
        ),
    )


def test_a_parse_whose_whole_worker_was_killed_is_finished_by_a_new_worker_with_the_same_rows(
    transactional_db, team, owner, settings
):
    from apps.celery import app

    app.control.purge()
    # The auditor (this process) calls a parse dead after 3 s without a heartbeat; the
    # worker beats every 0.5 s.
    settings.RANKSCOPE_PARSE_HEARTBEAT_STALE_SECONDS = STALE
    incident = incident_create(team=team, title="worker killed mid-parse", actor=owner)
    slow = WorkerProcess(queues="ingest", concurrency=1).start(
        worker_env({slowdown.PARSE_SLEEP_ENV: "60", "RANKSCOPE_PARSE_HEARTBEAT_SECONDS": "0.5"})
    )
    try:
        artifact = upload(incident, owner, LOG, NAME)
        _mid_parse(artifact, slow)
        # Alive and beating: a parse older than the stale window is left alone.
        started = Artifact.objects.get(pk=artifact.pk).parse_started_at
        wait_for(
            lambda: (
                timezone.now() - started > timedelta(seconds=STALE + 1)
                and Artifact.objects.get(pk=artifact.pk).parse_heartbeat_at
                > started + timedelta(seconds=STALE)
            ),
            timeout=20,
            message=lambda: f"the parse's heartbeat did not advance:\n{slow.log()[-3000:]}",
        )
        assert services.artifact_enqueue_pending() == 0
        assert Artifact.objects.get(pk=artifact.pk).parse_status == ParseStatus.PARSING
        sigkill(process_tree(slow.proc.pid))  # main process and pool child: nobody acks
        killed_at = time.monotonic()
        slow.proc.wait(timeout=10)
    finally:
        slow.stop()
    died = Artifact.objects.get(pk=artifact.pk)
    assert died.parse_status == ParseStatus.PARSING and died.parse_attempts == 1
    assert not RankDigest.objects.filter(artifact=artifact).exists()  # nothing half-written

    # Redis would hand the unacknowledged message on only after the visibility timeout
    # (hours); the heartbeat went quiet with the worker, so the auditor sends it again
    # as soon as the stale window has passed.
    fresh = WorkerProcess(queues="ingest", concurrency=1).start()
    try:
        wait_for(
            lambda: services.artifact_enqueue_pending() == 1,
            timeout=STALE + 10,
            interval=0.25,
            message="the auditor did not re-send the orphaned parse",
        )
        assert time.monotonic() - killed_at < STALE + 10
        wait_for(
            lambda: Artifact.objects.filter(pk=artifact.pk, parse_status="parsed").exists(),
            timeout=40,
            message=lambda: f"the re-sent parse did not finish:\n{fresh.log()[-3000:]}",
        )
    finally:
        fresh.stop()

    assert Artifact.objects.get(pk=artifact.pk).parse_attempts == 2
    assert parse_footprint(artifact) == _reference(team, owner)
    # a late copy of the message (the broker restoring it after all) changes nothing
    before = parse_footprint(artifact)
    assert services.artifact_parse(artifact_id=artifact.pk) is None
    assert parse_footprint(artifact) == before
    assert incident.events.filter(kind="ingest.parsed").count() == 1


def test_a_parse_whose_pool_process_was_killed_is_redelivered_at_once(
    transactional_db, team, owner
):
    from apps.celery import app

    app.control.purge()
    incident = incident_create(team=team, title="pool child killed mid-parse", actor=owner)
    worker = WorkerProcess(queues="ingest", concurrency=1).start(
        worker_env({slowdown.PARSE_SLEEP_ENV: "2"})
    )
    try:
        artifact = upload(incident, owner, LOG, NAME)
        _mid_parse(artifact, worker)
        children = [p for p in process_tree(worker.proc.pid) if p != worker.proc.pid]
        assert children
        sigkill(children)
        # reject_on_worker_lost: the message goes back to the queue at once, and the
        # worker's replacement pool process parses it; no auditor involved.
        wait_for(
            lambda: Artifact.objects.filter(pk=artifact.pk, parse_status="parsed").exists(),
            timeout=40,
            message=lambda: f"the rejected parse was not redelivered:\n{worker.log()[-3000:]}",
        )
        assert worker.proc.poll() is None
    finally:
        worker.stop()
    assert "SIGKILL" in worker.log() or "WorkerLostError" in worker.log()
    assert Artifact.objects.get(pk=artifact.pk).parse_attempts == 2
    assert parse_footprint(artifact) == _reference(team, owner)
