"""A 64-rank .tar.gz through the web upload, PostgreSQL, Redis and a real Celery worker."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from apps.ingest import selectors
from apps.ingest.models import Artifact, ParseStatus, RankDigest
from tests.conftest import wait_for
from tests.ingest import logs


@pytest.mark.timeout(120)
def test_a_64_rank_tar_gz_is_expanded_parsed_by_workers_and_analysed_once(
    celery_worker_process, owner_client, incident
):
    files = logs.job_64_ranks(hung_rank=37)
    upload = SimpleUploadedFile("job-123.tar.gz", logs.tar_gz(files))
    resp = owner_client.post(
        reverse("ingest:upload", args=[incident.code]),
        {"files": upload},
        HTTP_ACCEPT="application/json",
    )
    assert resp.status_code == 200
    assert [o["status"] for o in resp.json()["outcomes"]] == ["stored"] * 8

    def all_parsed():
        qs = Artifact.objects.filter(incident=incident)
        return qs.count() == 8 and not qs.exclude(parse_status=ParseStatus.PARSED).exists()

    wait_for(
        all_parsed,
        timeout=90,
        message=lambda: f"not parsed; worker log:\n{celery_worker_process.log()[-3000:]}",
    )

    artifacts = {a.display_name: a for a in Artifact.objects.filter(incident=incident)}
    node5 = artifacts["job-123.tar.gz/job-123/error-123-node-04.out"]
    assert node5.ranks == list(range(32, 40)) and node5.hosts == ["node-04"]
    assert sorted(r for a in artifacts.values() for r in a.ranks) == list(range(64))
    assert sorted(h for a in artifacts.values() for h in a.hosts) == [
        f"node-{n:02d}" for n in range(8)
    ]
    assert RankDigest.objects.filter(incident=incident).count() == 64
    assert RankDigest.objects.get(incident=incident, rank=37).host == "node-04"

    result = selectors.artifact_parse_result(artifact=node5)
    (ev,) = [e for e in result.events if e.kind == "watchdog_timeout"]
    raw = files["job-123/error-123-node-04.out"].decode().splitlines()
    assert ev.rank == 37 and raw[ev.line - 1] == ev.text and ev.file == node5.display_name

    # The fan-in: exactly one "all parsed" and one analysis for this input set.
    wait_for(lambda: incident.events.filter(kind="ingest.parsed").exists(), timeout=30)
    assert incident.events.filter(kind="ingest.parsed").count() == 1
    wait_for(lambda: incident.analysis_runs.exists(), timeout=30, message="no analysis requested")
    assert incident.analysis_runs.count() == 1
