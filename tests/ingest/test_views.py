"""Upload, file list and evidence viewer over HTTP: owners see them, outsiders get 404."""

from __future__ import annotations

import io

from django.core.files.uploadedfile import SimpleUploadedFile
from django.template import Context, Template
from django.urls import reverse

from apps.ingest import services
from apps.ingest.models import Artifact
from tests.ingest import logs


def _file(name: str, data: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/octet-stream")


def test_the_incident_page_shows_the_upload_panel_with_a_labelled_field(owner_client, incident):
    html = owner_client.get(reverse("incidents:detail", args=[incident.code])).content.decode()
    assert (
        'for="upload-files-' in html and 'type="file" name="files"' in html and "multiple" in html
    )
    assert reverse("ingest:list", args=[incident.code]) in html  # real link beside hx-get


def test_the_empty_list_says_what_to_upload(owner_client, incident):
    html = owner_client.get(reverse("ingest:list", args=[incident.code])).content.decode()
    assert "No files yet" in html


def test_many_files_upload_in_one_form_post(owner_client, incident):
    resp = owner_client.post(
        reverse("ingest:upload", args=[incident.code]),
        {
            "files": [
                _file("rank_0.log", b"[rank0]: a\n"),
                _file("x.tgz", logs.tar_gz({"rank_1.log": b"b\n"})),
            ]
        },
    )
    assert resp.status_code == 200
    html = resp.content.decode()
    assert "rank_0.log" in html and "x.tgz/rank_1.log" in html and "stored" in html
    assert Artifact.objects.filter(incident=incident).count() == 2


def test_the_xhr_upload_answers_json_per_file_including_duplicates(owner_client, incident):
    url = reverse("ingest:upload", args=[incident.code])
    first = owner_client.post(
        url, {"files": _file("a.log", b"same\n")}, HTTP_ACCEPT="application/json"
    )
    second = owner_client.post(
        url, {"files": _file("b.log", b"same\n")}, HTTP_ACCEPT="application/json"
    )
    assert first.json()["outcomes"][0]["status"] == "stored"
    out = second.json()["outcomes"][0]
    assert out["status"] == "duplicate" and "a.log" in out["message"]


def test_an_oversized_file_is_refused_with_413_before_it_is_stored(
    owner_client, incident, settings
):
    settings.RANKSCOPE_MAX_FILE_BYTES = 1024
    url = reverse("ingest:upload", args=[incident.code])
    resp = owner_client.post(
        url, {"files": _file("big.log", b"x" * 5000)}, HTTP_ACCEPT="application/json"
    )
    assert resp.status_code == 413
    assert "limit" in resp.json()["outcomes"][0]["message"]
    assert not Artifact.objects.filter(incident=incident).exists()
    # Mixed: the small one is still accepted.
    resp = owner_client.post(
        url,
        {"files": [_file("big.log", b"x" * 5000), _file("small.log", b"ok\n")]},
        HTTP_ACCEPT="application/json",
    )
    statuses = {o["name"]: o["status"] for o in resp.json()["outcomes"]}
    assert statuses == {"big.log": "rejected", "small.log": "stored"}


def test_the_single_file_header_refuses_by_content_length_without_reading(
    owner_client, incident, settings
):
    settings.RANKSCOPE_MAX_FILE_BYTES = 1024
    resp = owner_client.post(
        reverse("ingest:upload", args=[incident.code]),
        {"files": _file("big.log", b"x" * 200_000)},
        HTTP_ACCEPT="application/json",
        HTTP_X_RANKSCOPE_SINGLE_FILE="1",
        HTTP_X_RANKSCOPE_FILE_NAME="big%20one.log",
    )
    assert resp.status_code == 413 and resp.json()["outcomes"][0]["name"] == "big one.log"


def test_an_upload_without_files_says_so(owner_client, incident):
    resp = owner_client.post(reverse("ingest:upload", args=[incident.code]), {})
    assert resp.status_code == 400 and "Choose at least one file" in resp.content.decode()


def test_outsiders_get_404_everywhere(outsider_client, incident, owner):
    a = services.artifact_upload(
        incident=incident, fileobj=io.BytesIO(b"x\n"), name="r.log", actor=owner
    )[0].artifact
    assert outsider_client.get(reverse("ingest:list", args=[incident.code])).status_code == 404
    assert (
        outsider_client.get(reverse("ingest:view", args=[incident.code, a.code])).status_code == 404
    )
    resp = outsider_client.post(
        reverse("ingest:upload", args=[incident.code]), {"files": _file("r.log", b"y\n")}
    )
    assert resp.status_code == 404
    assert Artifact.objects.filter(incident=incident).count() == 1


def test_the_list_polls_while_parsing_and_stops_with_286(owner_client, incident, owner):
    a = services.artifact_upload(
        incident=incident, fileobj=io.BytesIO(b"x\n"), name="r.log", actor=owner
    )[0].artifact
    url = reverse("ingest:list", args=[incident.code])
    resp = owner_client.get(url, HTTP_HX_REQUEST="true")
    assert resp.status_code == 200 and "every 2s" in resp.content.decode()
    services.artifact_parse(artifact_id=a.pk)
    resp = owner_client.get(url, HTTP_HX_REQUEST="true")
    assert resp.status_code == 286 and "every 2s" not in resp.content.decode()


def test_the_evidence_viewer_highlights_the_line_escaped_with_context(
    owner_client, incident, owner
):
    text = "".join(f"line {i}\n" for i in range(1, 100)).replace(
        "line 50\n", "<script>alert(1)</script>\n"
    )
    a = services.artifact_upload(
        incident=incident, fileobj=io.BytesIO(text.encode()), name="r.log", actor=owner
    )[0].artifact
    services.artifact_parse(artifact_id=a.pk)
    html = owner_client.get(
        reverse("ingest:view", args=[incident.code, a.code]) + "?line=50"
    ).content.decode()
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert 'id="L50" value="50" class="hl"' in html
    assert 'id="L30"' in html and 'id="L29"' not in html  # 20 lines of context before


def test_the_evidence_viewer_pages_a_long_file_using_the_line_index(owner_client, incident, owner):
    text = "".join(f"row {i:07d}\n" for i in range(1, 300_001))
    a = services.artifact_upload(
        incident=incident, fileobj=io.BytesIO(text.encode()), name="big.log", actor=owner
    )[0].artifact
    services.artifact_parse(artifact_id=a.pk)
    url = reverse("ingest:view", args=[incident.code, a.code])
    html = owner_client.get(url + "?line=290000").content.decode()
    assert "row 0290000" in html and 'class="hl"' in html and "Later lines" in html
    html = owner_client.get(
        url + "?start=299950", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="evidence-lines"
    ).content.decode()
    assert "row 0300000" in html and "Later lines" not in html and "<h1" not in html


def test_the_evidence_url_tag_links_a_display_name_to_its_line(incident, owner):
    a = services.artifact_upload(
        incident=incident, fileobj=io.BytesIO(b"x\n"), name="logs/rank_3.log", actor=owner
    )[0].artifact
    out = Template(
        "{% load evidence %}{% evidence_url incident f 12 %}|{% evidence_url incident 'nope' 1 %}"
    ).render(Context({"incident": incident, "f": "logs/rank_3.log"}))
    assert out == f"/incidents/{incident.code}/artifacts/{a.code}/?line=12#L12|"


def test_the_evidence_viewer_filters_a_file_that_mixes_ranks(owner_client, incident, owner):
    lines = []
    for i in range(40):
        r = i % 8
        lines.append(f"[rank{r}]:[2026-01-10 02:47:{i:02d}] step {i} on rank {r}\n")
        if r == 5:
            lines.append("Traceback (most recent call last): continues rank 5\n")
    a = services.artifact_upload(
        incident=incident, fileobj=io.BytesIO("".join(lines).encode()), name="all.log", actor=owner
    )[0].artifact
    services.artifact_parse(artifact_id=a.pk)
    url = reverse("ingest:view", args=[incident.code, a.code])
    html = owner_client.get(url).content.decode()
    assert 'id="rank-filter"' in html  # offered: the file holds 8 ranks
    html = owner_client.get(url + "?rank=5").content.decode()
    assert "on rank 5" in html and "continues rank 5" in html  # untagged lines follow
    assert "on rank 4" not in html and "on rank 6" not in html
    assert "Rank 5: 10 lines" in html
    html = owner_client.get(url + "?rank=five").content.decode()
    assert "is not a rank number" in html


def test_an_empty_file_and_a_corrupt_archive_say_what_is_wrong(owner_client, incident):
    url = reverse("ingest:upload", args=[incident.code])
    resp = owner_client.post(
        url, {"files": _file("rank_0.log", b"")}, HTTP_ACCEPT="application/json"
    )
    (out,) = resp.json()["outcomes"]
    assert out["status"] == "rejected" and "empty file (0 bytes)" in out["message"]
    resp = owner_client.post(
        url, {"files": _file("job.tar.gz", bytes(range(256)) * 8)}, HTTP_ACCEPT="application/json"
    )
    (out,) = resp.json()["outcomes"]
    assert "not a readable archive" in out["message"] and "binary" not in out["message"]


def test_a_metrics_file_with_an_unreadable_column_is_not_a_green_parsed(
    owner_client, incident, owner
):
    csv = b"step,rank,loss,step_time\n1,0,2.1,abc\n2,0,2.0,xyz\n"
    a = services.artifact_upload(
        incident=incident, fileobj=io.BytesIO(csv), name="metrics.csv", actor=owner
    )[0].artifact
    services.artifact_parse(artifact_id=a.pk)
    html = owner_client.get(reverse("ingest:list", args=[incident.code])).content.decode()
    assert '<span class="badge warn">Parsed, 1 warning</span>' in html
    assert "step_time" in html  # the warning itself says which column
