"""Redis (cache and broker) goes away: the API keeps accepting uploads and serving reads.

The test runs its own ``redis-server`` as both the cache and the broker and stops it.
Uploads are stored and left pending (202, with a note), the rate limit fails open with a
logged warning, idempotency keys are served without their guarantee, reads work, and no
answer is a 5xx. Once Redis is back, the auditor hands the pending files to the queue.
"""

from __future__ import annotations

import json
import logging
import time

import pytest
from django.core.files.storage import default_storage
from django.urls import reverse

from apps.ingest.models import Artifact, ParseStatus
from apps.ingest.services import QUEUE_DOWN_NOTE
from tests.api.conftest import ApiClient
from tests.ingest import logs
from tests.resilience.conftest import broker_switched_to

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def tokens(transactional_db, team, owner) -> tuple[ApiClient, ApiClient]:
    from apps.accounts.services import api_token_create

    ingest = api_token_create(team=team, name="epilog", scope="ingest", actor=owner)[1]
    read = api_token_create(team=team, name="dashboard", scope="read", actor=owner)[1]
    return ApiClient(ingest), ApiClient(read)


def test_with_redis_down_uploads_are_accepted_and_reads_work_and_nothing_answers_5xx(
    tokens, incident, redis_server, settings, caplog
):
    ingest, reader = tokens
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{redis_server.port}/1",
        }
    }
    caplog.set_level(logging.WARNING)
    answers: list[tuple[str, int, float]] = []

    def call(label: str, fn, *args, **kwargs):
        t0 = time.monotonic()
        resp = fn(*args, **kwargs)
        answers.append((label, resp.status_code, time.monotonic() - t0))
        assert resp.status_code < 500, (label, resp.status_code, resp.content[:300])
        assert resp["Content-Type"].startswith("application/json"), label
        return resp

    with broker_switched_to(redis_server.url):
        up = ingest.post(
            reverse("api:artifacts", args=[incident.code]) + "?name=node-00.out",
            data=logs.node_log(0),
            content_type="application/octet-stream",
        )
        assert up.status_code == 202  # Redis up: the usual path
        redis_server.stop()

        raw = call(
            "raw upload",
            ingest.post,
            reverse("api:artifacts", args=[incident.code]) + "?name=node-01.out",
            data=logs.node_log(1, hung_rank=13),
            content_type="application/octet-stream",
            HTTP_IDEMPOTENCY_KEY="node-01-attempt",
        )
        assert raw.status_code == 202
        assert raw.json()["note"] == QUEUE_DOWN_NOTE
        (out,) = raw.json()["files"]
        assert out["status"] == "stored" and QUEUE_DOWN_NOTE in out["message"]

        slurm = call(
            "slurm epilog post",
            ingest.post,
            reverse("api:ingest-slurm"),
            {
                "cluster": "eos",
                "job_id": "900001",
                "stage": "node",
                "node": "node002",
                "file": [_file("rank-16.log", logs.node_log(2))],
            },
        )
        assert slurm.status_code == 202 and slurm.json()["note"] == QUEUE_DOWN_NOTE
        ctld = call(
            "controller post",
            ingest.post,
            reverse("api:ingest-slurm"),
            {
                "cluster": "eos",
                "job_id": "900001",
                "stage": "controller",
                "exit_code": "1",
                "job": json.dumps({"job_name": "llama-70b", "job_nodelist": "node[001-002]"}),
            },
        )
        assert ctld.status_code == 202 and ctld.json()["analysis"] == "requested"

        listing = call("list incidents", reader.get, reverse("api:incidents"))
        assert incident.code in {i["code"] for i in listing.json()["results"]}
        call("incident", reader.get, reverse("api:incident", args=[incident.code]))
        arts = call("artifacts", reader.get, reverse("api:artifacts", args=[incident.code]))
        assert arts.json()["count"] == 2
        call("analysis", reader.get, reverse("api:analysis", args=[incident.code]))

    assert all(seconds < 15 for _, _, seconds in answers), answers
    assert any("rate limit not enforced" in r.getMessage() for r in caplog.records)
    # Stored, and left pending for the auditor: nothing handed to a queue that was gone.
    kept = Artifact.objects.get(incident=incident, display_name="node-01.out")
    assert kept.parse_status == ParseStatus.PENDING and kept.enqueued_at is None
    assert default_storage.exists(kept.storage_key)
    assert Artifact.objects.filter(incident__job_id="900001").exclude(storage_key="").count() == 2


def _file(name: str, data: bytes):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data, content_type="application/octet-stream")
