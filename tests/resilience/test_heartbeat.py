"""The parse heartbeat: only the attempt that owns the row keeps it alive.

The heartbeat thread (``apps.lib.heartbeat.Heartbeat``) runs with its own database
connection, so these tests commit for real (``transactional_db``).
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.ingest import services
from apps.ingest.models import Artifact, ParseStatus
from apps.lib.heartbeat import Heartbeat
from tests.conftest import wait_for
from tests.ingest import logs
from tests.resilience.conftest import upload

pytestmark = pytest.mark.timeout(30)

LONG_AGO = timedelta(minutes=10)


def _parsing(artifact: Artifact, *, token: str) -> Artifact:
    """The row as a parse attempt holding ``token`` left it, last heard of long ago."""
    beat = timezone.now() - LONG_AGO
    Artifact.objects.filter(pk=artifact.pk).update(
        parse_status=ParseStatus.PARSING,
        parse_token=token,
        parse_started_at=beat,
        parse_heartbeat_at=beat,
    )
    return Artifact.objects.get(pk=artifact.pk)


def test_a_heartbeat_left_from_an_older_parse_attempt_does_not_touch_the_newer_attempt(
    transactional_db, incident, owner, settings
):
    settings.RANKSCOPE_PARSE_HEARTBEAT_SECONDS = 0.05
    artifact = upload(incident, owner, logs.node_log(1), "node-01.out")
    newer = _parsing(artifact, token="b" * 32)  # attempt "a…" was taken over by "b…"

    stale = services.parse_heartbeat(artifact_id=artifact.pk, token="a" * 32).start()
    wait_for(lambda: not stale.alive, timeout=5, message="the fenced-out heartbeat kept going")
    assert stale.beats == 1  # it tried once, found the row no longer its own, and stopped
    assert Artifact.objects.get(pk=artifact.pk).parse_heartbeat_at == newer.parse_heartbeat_at

    # the owner's heartbeat does keep the row alive, so the auditor leaves it alone
    settings.RANKSCOPE_PARSE_HEARTBEAT_STALE_SECONDS = 60
    with services.parse_heartbeat(artifact_id=artifact.pk, token="b" * 32) as owner_beat:
        wait_for(lambda: owner_beat.beats >= 2, timeout=5, message="the owner never beat")
        row = Artifact.objects.get(pk=artifact.pk)
        assert row.parse_heartbeat_at > newer.parse_heartbeat_at + LONG_AGO - timedelta(seconds=5)
        assert services.artifact_enqueue_pending() == 0
        assert Artifact.objects.get(pk=artifact.pk).parse_status == ParseStatus.PARSING
    assert not owner_beat.alive


def test_a_parse_heartbeat_stops_once_the_parse_has_finished(
    transactional_db, incident, owner, settings
):
    settings.RANKSCOPE_PARSE_HEARTBEAT_SECONDS = 0.05
    artifact = upload(incident, owner, logs.node_log(2), "node-02.out")
    _parsing(artifact, token="c" * 32)
    beat = services.parse_heartbeat(artifact_id=artifact.pk, token="c" * 32).start()
    try:
        wait_for(lambda: beat.beats >= 1, timeout=5)
        Artifact.objects.filter(pk=artifact.pk).update(parse_status=ParseStatus.PARSED)
        wait_for(lambda: not beat.alive, timeout=5, message="the heartbeat outlived its parse")
    finally:
        beat.stop()


def test_a_parse_leaves_no_heartbeat_thread_behind_on_any_exit(transactional_db, incident, owner):
    ok = upload(incident, owner, logs.node_log(3), "node-03.out")
    before = {t.name for t in threading.enumerate()}
    assert services.artifact_parse(artifact_id=ok.pk) == ParseStatus.PARSED
    missing = upload(incident, owner, logs.node_log(4), "node-04.out")
    Artifact.objects.filter(pk=missing.pk).update(storage_key="nowhere/missing.log")
    assert services.artifact_parse(artifact_id=missing.pk) == ParseStatus.FAILED
    left = {t.name for t in threading.enumerate()} - before
    assert not [name for name in left if name.startswith("parse-heartbeat-")]
    row = Artifact.objects.get(pk=ok.pk)
    assert row.parse_heartbeat_at is not None and row.parse_heartbeat_at >= row.parse_started_at


def test_the_heartbeat_survives_a_failing_touch_and_stops_when_the_work_raises():
    calls: list[int] = []

    def touch() -> bool:
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("database briefly unreachable")
        return True

    with pytest.raises(RuntimeError), Heartbeat(touch, interval=0.01, name="hb-test") as hb:
        wait_for(lambda: hb.beats >= 2, timeout=5, message="a failed touch stopped the beat")
        raise RuntimeError("the work failed")
    assert not hb.alive
    assert len(calls) >= 3  # the failed touch, then the beats that worked
