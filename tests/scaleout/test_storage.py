"""Artifact bytes against a real S3 API (SeaweedFS) and the filesystem: multipart writes,
aborted uploads, ranged reads of the evidence viewer, deletion."""

from __future__ import annotations

import hashlib
import io
from datetime import timedelta

import pytest

from apps.ingest import lineindex, selectors, services, storage
from apps.ingest.models import Artifact, ParseStatus

MiB = 1 << 20


def _log(lines: int) -> bytes:
    """A rank log whose every line says its own number (so a wrong line shows)."""
    return b"".join(
        f"[rank{n % 8}]:[I1121 10:00:{n % 60:02d}.000000 42 train.py:10] step {n} of the "
        f"run: line {n} | lm loss 2.{n % 1000:03d}\n".encode()
        for n in range(1, lines + 1)
    )


class _Breaks(io.RawIOBase):
    """A client that sends ``good`` bytes and then drops the connection."""

    def __init__(self, good: int) -> None:
        self.left = good

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self.left <= 0:
            raise ConnectionResetError("the client went away mid-upload")
        n = min(len(b), self.left)
        b[:n] = b"x" * n
        self.left -= n
        return n


def test_a_large_upload_goes_to_s3_in_parts_and_reads_back_identical(s3, settings):
    settings.RANKSCOPE_S3_PART_BYTES = 5 * MiB
    data = _log(260_000)  # ~23 MiB: five parts
    assert len(data) > 4 * 5 * MiB
    key, size, sha = services.store_stream(
        key=f"incidents/x/{len(data)}", head=data[:100], stream=io.BytesIO(data[100:])
    )
    assert size == len(data) and sha == hashlib.sha256(data).hexdigest()
    head = s3.store.client().head_object(Bucket="rankscope", Key=f"{s3.prefix}/{key}")
    assert head["ContentLength"] == len(data)
    assert head["ETag"].strip('"').endswith("-5")  # a multipart object of 5 parts
    with storage.open_stream(key) as fp:
        assert hashlib.sha256(fp.read()).hexdigest() == sha
    assert s3.uploads() == []


def test_an_upload_cut_off_mid_stream_leaves_no_object_and_no_open_multipart_upload(s3, settings):
    settings.RANKSCOPE_S3_PART_BYTES = 5 * MiB
    with pytest.raises(ConnectionResetError):
        services.store_stream(
            key="incidents/x/cut", head=b"", stream=io.BufferedReader(_Breaks(12 * MiB))
        )
    assert s3.keys() == []
    assert s3.uploads() == []  # aborted: no parts left to be billed


def test_the_auditor_aborts_multipart_uploads_a_killed_process_left(s3):
    client = s3.store.client()
    upload = client.create_multipart_upload(Bucket="rankscope", Key=f"{s3.prefix}/incidents/k")
    client.upload_part(
        Bucket="rankscope",
        Key=f"{s3.prefix}/incidents/k",
        UploadId=upload["UploadId"],
        PartNumber=1,
        Body=b"y" * (5 * MiB),
    )
    assert storage.abort_stale_uploads(older_than=timedelta(hours=1)) == 0  # still young
    assert len(s3.uploads()) == 1
    assert storage.abort_stale_uploads(older_than=timedelta(0)) == 1
    assert s3.uploads() == []


@pytest.fixture(params=["filesystem", "s3"])
def backend(request):
    if request.param == "s3":
        return request.getfixturevalue("s3")
    return None


@pytest.mark.django_db
def test_the_evidence_viewer_reads_only_the_lines_it_shows(backend, incident, owner):
    data = _log(120_000)  # ~10 MiB
    (outcome,) = services.artifact_upload(
        incident=incident, fileobj=io.BytesIO(data), name="node-07.out", actor=owner
    )
    artifact = outcome.artifact
    assert services.artifact_parse(artifact_id=artifact.pk) == ParseStatus.PARSED
    artifact.refresh_from_db()
    assert storage.exists(lineindex.key_for(artifact.storage_key))
    lines = data.decode().splitlines()

    for start in (1, 64, 65, 77_777, 119_990):
        storage.fetched.reset()
        page = selectors.artifact_lines(artifact=artifact, start=start, count=50, highlight=start)
        want = lines[start - 1 : start + 49]
        assert [v.text for v in page.lines] == want
        assert [v.number for v in page.lines] == list(range(start, start + len(want)))
        assert page.lines[0].highlight and page.has_more == (start + 49 < len(lines))
        # the page is ~4.5 KiB; at most 63 lines before it and one index entry more
        assert storage.fetched.bytes < 64 * 1024, (start, storage.fetched.bytes)

    # Past the end: nothing shown, nothing like the whole file read.
    storage.fetched.reset()
    page = selectors.artifact_lines(artifact=artifact, start=500_000, count=50)
    assert page.lines == [] and storage.fetched.bytes < 64 * 1024


@pytest.mark.django_db
def test_a_file_parsed_before_the_line_index_existed_is_still_shown(backend, incident, owner):
    data = _log(30_000)
    (outcome,) = services.artifact_upload(
        incident=incident, fileobj=io.BytesIO(data), name="node-01.out", actor=owner
    )
    services.artifact_parse(artifact_id=outcome.artifact.pk)
    artifact = Artifact.objects.get(pk=outcome.artifact.pk)
    storage.delete(lineindex.key_for(artifact.storage_key))
    page = selectors.artifact_lines(artifact=artifact, start=20_001, count=3)
    assert [v.text for v in page.lines] == data.decode().splitlines()[20_000:20_003]


@pytest.mark.django_db
def test_deleting_an_artifact_removes_every_object_stored_for_it(s3, incident, owner):
    (outcome,) = services.artifact_upload(
        incident=incident, fileobj=io.BytesIO(_log(5_000)), name="node-02.out", actor=owner
    )
    services.artifact_parse(artifact_id=outcome.artifact.pk)
    artifact = Artifact.objects.get(pk=outcome.artifact.pk)
    assert len(s3.keys()) == 3  # the log, its parse result, its line index
    services.artifact_delete(artifact=artifact, actor=owner)
    assert s3.keys() == []
    assert not Artifact.objects.filter(pk=artifact.pk).exists()
    assert incident.events.filter(kind="ingest.deleted").count() == 1
