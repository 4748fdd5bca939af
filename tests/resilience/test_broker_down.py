"""Redis goes away during an upload burst: every stored file is kept, marked, and parsed later.

The test runs its own ``redis-server`` (no persistence) so it can stop it without
disturbing anyone else; stopping it loses every message already queued, which is the
worst case: the auditor must recover both the uploads that never reached the broker
and the ones whose message vanished with it.
"""

from __future__ import annotations

import time

import pytest
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from apps.analysis import tasks as analysis_tasks
from apps.analysis.models import FINISHED, AnalysisRun, RunStatus
from apps.ingest.models import Artifact, ParseStatus
from apps.ingest.services import QUEUE_DOWN_NOTE
from tests.conftest import WorkerProcess, wait_for, worker_env
from tests.ingest import logs
from tests.resilience.conftest import broker_switched_to

pytestmark = pytest.mark.timeout(90)

NODES = 8
STOP_AFTER = 3


def _post(client, incident, name: str, data: bytes) -> dict:
    resp = client.post(
        reverse("ingest:upload", args=[incident.code]),
        {"files": SimpleUploadedFile(name, data, content_type="application/octet-stream")},
        HTTP_ACCEPT="application/json",
    )
    assert resp.status_code == 200, resp.content[:500]
    (out,) = resp.json()["outcomes"]
    return out


def test_uploads_while_the_broker_is_down_are_kept_then_parsed_and_analysed_once(
    transactional_db, incident, owner_client, redis_server, settings
):
    settings.RANKSCOPE_ANALYSIS_PENDING_ARTIFACT_SECONDS = 0
    settings.RANKSCOPE_PARSE_QUEUED_SECONDS = 0
    files = {
        f"error-9-node-{n:02d}.out": logs.node_log(n, hung_rank=13 if n == 1 else None)
        for n in range(NODES)
    }
    with broker_switched_to(redis_server.url):
        outcomes = []
        for i, (name, data) in enumerate(files.items()):
            if i == STOP_AFTER:
                redis_server.stop()  # mid-burst; its queued messages are gone with it
            t0 = time.monotonic()
            outcomes.append(_post(owner_client, incident, name, data))
            assert time.monotonic() - t0 < 15, "an upload hung on the dead broker"

        # every file is stored; the ones after the stop say so and wait, marked pending
        assert [o["status"] for o in outcomes] == ["stored"] * NODES
        assert all(QUEUE_DOWN_NOTE not in o["message"] for o in outcomes[:STOP_AFTER])
        assert all(QUEUE_DOWN_NOTE in o["message"] for o in outcomes[STOP_AFTER:])
        rows = list(Artifact.objects.filter(incident=incident).order_by("pk"))
        assert len(rows) == NODES
        assert all(default_storage.exists(a.storage_key) for a in rows)
        assert [a.parse_status for a in rows] == [ParseStatus.QUEUED] * STOP_AFTER + [
            ParseStatus.PENDING
        ] * (NODES - STOP_AFTER)
        assert all(a.enqueued_at is None for a in rows[STOP_AFTER:])
        page = owner_client.get(reverse("ingest:list", args=[incident.code])).content.decode()
        assert page.count("Waiting to be queued") == NODES - STOP_AFTER
        assert f"{NODES} still being parsed" in page

        redis_server.start()
        worker = WorkerProcess(concurrency=2).start(
            worker_env({"CELERY_BROKER_URL": redis_server.url})
        )
        try:
            # the beat task's body, as beat would run it a minute later
            report = analysis_tasks.analysis_audit()
            assert report["artifacts_requeued"] == NODES
            run = wait_for(
                lambda: AnalysisRun.objects.filter(incident=incident, status__in=FINISHED).first(),
                timeout=60,
                message=lambda: f"the burst was not parsed and analysed:\n{worker.log()[-3000:]}",
            )
            # a later auditor pass finds nothing left to do
            assert analysis_tasks.analysis_audit()["artifacts_requeued"] == 0
        finally:
            worker.stop()

    assert set(
        Artifact.objects.filter(incident=incident).values_list("parse_status", flat=True)
    ) == {ParseStatus.PARSED}
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert AnalysisRun.objects.filter(incident=incident).count() == 1
    assert sorted(run.inputs) == [a.pk for a in rows]
    assert incident.events.filter(kind="ingest.parsed").count() == 1
    assert len(run.document["artifacts"]) == NODES
    assert all(not a.get("error") for a in run.document["artifacts"])
