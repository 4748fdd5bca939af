"""Artifact uploads over the API: multipart, raw body, gzip, duplicates, limits."""

from __future__ import annotations

import gzip
import hashlib
import io

from django.test import override_settings

LOG = b"".join(f"[rank7]: step {i} loss 2.{i:03d} NCCL watchdog ok\n".encode() for i in range(500))


def _url(incident) -> str:
    return f"/api/v1/incidents/{incident.code}/artifacts/"


def test_multipart_upload_stores_files_and_answers_202(api, incident):
    files = [io.BytesIO(LOG), io.BytesIO(b"second file\n")]
    files[0].name, files[1].name = "rank_7.log", "notes.txt"
    response = api.post(_url(incident), {"file": files})
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["incident"] == incident.code
    assert [f["status"] for f in body["files"]] == ["stored", "stored"]
    stored = body["files"][0]["artifact"]
    assert stored["sha256"] == hashlib.sha256(LOG).hexdigest()
    assert stored["size"] == len(LOG)
    assert incident.artifacts.count() == 2


def test_the_same_file_twice_is_stored_once_and_answered_200_with_the_record(api, incident):
    first = api.post(
        _url(incident) + "?name=rank_7.log", LOG, content_type="application/octet-stream"
    )
    assert first.status_code == 202
    second = api.post(
        _url(incident) + "?name=rank_7.log", LOG, content_type="application/octet-stream"
    )
    assert second.status_code == 200
    outcome = second.json()["files"][0]
    assert outcome["status"] == "duplicate"
    assert outcome["artifact"]["code"] == first.json()["files"][0]["artifact"]["code"]
    assert incident.artifacts.count() == 1


def test_a_gzip_encoded_raw_body_is_decompressed_while_streaming(api, incident):
    response = api.post(
        _url(incident),
        gzip.compress(LOG),
        content_type="text/plain",
        HTTP_CONTENT_ENCODING="gzip",
        HTTP_X_FILENAME="rank_7.log",
    )
    assert response.status_code == 202, response.content
    artifact = response.json()["files"][0]["artifact"]
    assert artifact["sha256"] == hashlib.sha256(LOG).hexdigest()
    assert artifact["display_name"] == "rank_7.log"


def test_a_truncated_gzip_body_is_a_clear_400_and_nothing_is_stored(api, incident):
    response = api.post(
        _url(incident) + "?name=x.log",
        gzip.compress(LOG)[:-20],
        content_type="application/octet-stream",
        HTTP_CONTENT_ENCODING="gzip",
    )
    assert response.status_code == 400
    assert "gzip" in response.json()["detail"]
    assert incident.artifacts.count() == 0


def test_an_unknown_content_encoding_is_415(api, incident):
    response = api.post(
        _url(incident) + "?name=x.log", b"x", content_type="text/plain", HTTP_CONTENT_ENCODING="br"
    )
    assert response.status_code == 415


def test_a_raw_body_without_a_name_is_400(api, incident):
    response = api.post(_url(incident), LOG, content_type="application/octet-stream")
    assert response.status_code == 400
    assert "name" in response.json()["detail"]


@override_settings(RANKSCOPE_MAX_FILE_BYTES=1000)
def test_it_refuses_an_oversized_body_from_its_declared_length_with_413(api, incident):
    response = api.post(
        _url(incident) + "?name=big.log", LOG, content_type="application/octet-stream"
    )
    assert response.status_code == 413
    assert incident.artifacts.count() == 0


@override_settings(RANKSCOPE_MAX_FILE_BYTES=1000)
def test_a_gzip_bomb_stops_at_the_limit_with_413(api, incident):
    bomb = gzip.compress(b"\0" * 5_000_000)
    response = api.post(
        _url(incident) + "?name=bomb.log",
        bomb,
        content_type="application/octet-stream",
        HTTP_CONTENT_ENCODING="gzip",
    )
    assert response.status_code == 413
    assert incident.artifacts.count() == 0


def test_an_ingest_token_may_upload_but_not_list(ingester, incident):
    response = ingester.post(
        _url(incident) + "?name=a.log", b"hello\n", content_type="application/octet-stream"
    )
    assert response.status_code == 202
    assert ingester.get(_url(incident)).status_code == 403


def test_list_and_read_artifacts_by_code_and_outsiders_get_404(api, intruder, incident):
    code = api.post(
        _url(incident) + "?name=a.log", b"hello\n", content_type="application/octet-stream"
    ).json()["files"][0]["artifact"]["code"]
    listing = api.get(_url(incident)).json()
    assert [a["code"] for a in listing["results"]] == [code]
    assert api.get(f"{_url(incident)}{code}/").json()["display_name"] == "a.log"
    assert intruder.get(f"{_url(incident)}{code}/").status_code == 404
    assert (
        intruder.post(
            _url(incident) + "?name=b.log", b"x\n", content_type="application/octet-stream"
        ).status_code
        == 404
    )
    assert incident.artifacts.count() == 1


def test_analysis_status_reports_parse_progress_before_any_run(api, incident):
    api.post(_url(incident) + "?name=a.log", b"hello\n", content_type="application/octet-stream")
    body = api.get(f"/api/v1/incidents/{incident.code}/analysis/").json()
    assert sum(body["artifacts"].values()) == 1
    assert api.get(f"/api/v1/incidents/{incident.code}/findings/").json() == []
