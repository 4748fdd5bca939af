"""The database connection drops mid-request or mid-task (``pg_terminate_backend``).

A request answers a clear 503 and the next one works; a parse task retries and
finishes; a multi-row write is all or nothing, so no half-written incident or artifact.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterator

import pytest
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import OperationalError, connection
from django.urls import reverse

from apps.incidents.models import Incident, IncidentEvent, PhaseTransition
from apps.incidents.services import incident_create
from apps.ingest import services
from apps.ingest.models import Artifact, ParseStatus, RankDigest
from apps.lib.middleware import MESSAGE
from tests import slowdown
from tests.conftest import WorkerProcess, wait_for, worker_env
from tests.ingest import logs
from tests.resilience.conftest import terminate_backends, upload

pytestmark = pytest.mark.timeout(60)


@contextlib.contextmanager
def connection_dropped(when: Callable[[str, int], bool]) -> Iterator[list[str]]:
    """End this process's database backend just before the first statement ``when``
    (sql, index) picks, from another connection; the statement then fails."""
    seen: list[str] = []
    dropped = False

    def wrapper(execute, sql, params, many, context):
        nonlocal dropped
        seen.append(sql)
        if not dropped and when(sql, len(seen)):
            dropped = True
            assert terminate_backends(pids=[context["connection"].connection.info.backend_pid])
        return execute(sql, params, many, context)

    try:
        with connection.execute_wrapper(wrapper):
            yield seen
    finally:
        connection.close()  # what Django does at the end of a request or task
    assert dropped, "the connection was never dropped"


def _insert_into(table: str) -> Callable[[str, int], bool]:
    return lambda sql, _: sql.startswith(f'INSERT INTO "{table}"')


def test_a_page_whose_database_connection_drops_mid_request_answers_a_clear_503(
    transactional_db, incident, owner_client, outsider_client
):
    url = reverse("incidents:detail", args=[incident.code])
    with connection_dropped(lambda _, i: i == 3):  # after the session and the user
        resp = owner_client.get(url)
    assert resp.status_code == 503
    assert resp["Retry-After"] == "5"
    html = resp.content.decode()
    assert "Database unavailable" in html and MESSAGE in html and "Traceback" not in html
    # the broken connection was dropped: the next request reconnects and works
    assert owner_client.get(url).status_code == 200
    assert outsider_client.get(url).status_code == 404


def test_the_api_answers_json_503_when_the_database_connection_drops(
    transactional_db, incident, owner_client
):
    with connection_dropped(lambda _, i: i == 3):
        resp = owner_client.get(reverse("api:incidents"))
    assert resp.status_code == 503
    assert resp.json() == {"detail": MESSAGE, "code": "database_unavailable"}
    assert owner_client.get(reverse("api:incidents")).status_code == 200


def test_an_incident_is_not_half_created_when_the_connection_drops(transactional_db, team, owner):
    # the incident row is written first; the drop hits the timeline row after it
    with (
        pytest.raises(OperationalError),
        connection_dropped(_insert_into(IncidentEvent._meta.db_table)) as seen,
    ):
        incident_create(team=team, title="never half-written", actor=owner, job_id="77")
    assert any(s.startswith(f'INSERT INTO "{Incident._meta.db_table}"') for s in seen)
    assert not Incident.objects.exists()
    assert not PhaseTransition.objects.exists() and not IncidentEvent.objects.exists()


def test_an_upload_whose_row_cannot_be_written_keeps_no_row_and_no_bytes(
    transactional_db, incident, owner_client
):
    with connection_dropped(_insert_into(Artifact._meta.db_table)):
        resp = owner_client.post(
            reverse("ingest:upload", args=[incident.code]),
            {"files": SimpleUploadedFile("rank_0.log", logs.node_log(0))},
            HTTP_ACCEPT="application/json",
        )
    assert resp.status_code == 503 and resp.json()["code"] == "database_unavailable"
    assert not Artifact.objects.exists()
    directory = f"incidents/{incident.code}"
    assert not default_storage.exists(directory) or default_storage.listdir(directory) == ([], [])
    # sending the same file again works
    outcome = services.artifact_upload(
        incident=incident, fileobj=io.BytesIO(logs.node_log(0)), name="rank_0.log", actor=None
    )
    assert outcome[0].status == "stored"


def test_a_parse_is_not_half_written_when_the_connection_drops_and_a_rerun_finishes_it(
    transactional_db, incident, owner
):
    artifact = upload(incident, owner, logs.node_log(2, hung_rank=19), "node-02.out")
    with (
        pytest.raises(OperationalError),
        connection_dropped(_insert_into(RankDigest._meta.db_table)),
    ):
        services.artifact_parse(artifact_id=artifact.pk)
    a = Artifact.objects.get(pk=artifact.pk)
    # the status update before the digests was rolled back with them
    assert a.parse_status == ParseStatus.PARSING and a.line_count is None
    assert not RankDigest.objects.filter(artifact=a).exists()
    assert services.artifact_parse(artifact_id=a.pk) == ParseStatus.PARSED
    assert RankDigest.objects.filter(artifact=a).count() == 8


def test_a_parse_task_whose_connection_is_terminated_retries_and_finishes(
    transactional_db, team, owner
):
    from apps.celery import app

    app.control.purge()
    incident = incident_create(team=team, title="database failover mid-parse", actor=owner)
    worker = WorkerProcess(queues="ingest", concurrency=1).start(
        worker_env({slowdown.PARSE_SLEEP_ENV: "1.5"})
    )
    try:
        artifact = upload(incident, owner, logs.node_log(1, hung_rank=13), "node-01.out")
        wait_for(
            lambda: Artifact.objects.filter(pk=artifact.pk, parse_status="parsing").exists(),
            timeout=30,
            message=lambda: f"the worker never started the parse:\n{worker.log()[-3000:]}",
        )
        assert terminate_backends(others=True) >= 1  # the worker's connection
        wait_for(
            lambda: Artifact.objects.filter(pk=artifact.pk, parse_status="parsed").exists(),
            timeout=30,
            message=lambda: f"the parse did not retry to completion:\n{worker.log()[-3000:]}",
        )
    finally:
        worker.stop()
    a = Artifact.objects.get(pk=artifact.pk)
    assert a.parse_attempts == 2 and a.parse_error == ""
    assert "retry" in worker.log().lower()
    assert sorted(RankDigest.objects.filter(artifact=a).values_list("rank", flat=True)) == list(
        range(8, 16)
    )
