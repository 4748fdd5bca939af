"""Every API error is JSON with a ``detail`` and a ``code``, including the ones Django
raises before a view runs: too many files or fields, an unknown path."""

from __future__ import annotations

import logging

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from apps.ingest.models import Artifact


def _json_error(resp, status: int) -> dict:
    assert resp.status_code == status, resp.content[:300]
    assert resp["Content-Type"].startswith("application/json")
    body = resp.json()
    assert body["detail"] and body["code"]
    return body


def test_too_many_files_is_a_json_400_not_an_html_page_or_an_error_log(
    api, incident, settings, caplog
):
    settings.DATA_UPLOAD_MAX_NUMBER_FILES = 5
    caplog.set_level(logging.ERROR)
    files = [SimpleUploadedFile(f"rank-{i}.log", b"x %d\n" % i) for i in range(6)]
    resp = api.post(reverse("api:artifacts", args=[incident.code]), {"file": files})
    assert _json_error(resp, 400)["code"] == "too_many_files"
    assert not Artifact.objects.exists()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_too_many_fields_is_a_json_400(api, incident, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 10
    data = {f"f{i}": "x" for i in range(20)}
    data["cluster"] = "eos"
    resp = api.post(reverse("api:ingest-slurm"), data)
    assert _json_error(resp, 400)["code"] == "too_many_fields"


@pytest.mark.parametrize("path", ["/api/v1/nothing-here/", "/api/v2/incidents/"])
def test_an_unknown_api_path_is_a_json_404(api, path):
    _json_error(api.get(path), 404)


def test_a_wrong_method_is_a_json_405(api, incident):
    _json_error(api.delete(reverse("api:incidents")), 405)


def test_pages_outside_the_api_keep_their_html_errors(owner_client):
    resp = owner_client.get("/incidents/does-not-exist-at-all/")
    assert resp.status_code == 404 and not resp["Content-Type"].startswith("application/json")
