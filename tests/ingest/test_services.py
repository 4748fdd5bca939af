"""The upload and parse services against PostgreSQL and the real storage backend."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import pickle
import subprocess
import sys
import tarfile
import threading

import pytest
import zstandard
from django.core.files.storage import default_storage
from django.db import connection

from apps.ingest import selectors, services, signals
from apps.ingest.models import Artifact, ParseStatus, RankDigest
from rankscope.archives import Limits
from tests.conftest import ROOT, worker_env
from tests.ingest import logs


def upload(incident, owner, data: bytes, name: str, **kw):
    return services.artifact_upload(
        incident=incident, fileobj=io.BytesIO(data), name=name, actor=owner, **kw
    )


def only(outcomes):
    assert len(outcomes) == 1, outcomes
    return outcomes[0]


def stored_bytes(artifact: Artifact) -> bytes:
    with default_storage.open(artifact.storage_key, "rb") as fp:
        return fp.read()


def test_it_stores_a_plain_log_under_a_generated_key_with_its_sha256(incident, owner):
    data = logs.node_log(0)
    out = only(upload(incident, owner, data, "../../etc/error-1-node-00.out"))
    assert out.status == "stored"
    a = out.artifact
    assert a.sha256 == hashlib.sha256(data).hexdigest()
    assert a.size == len(data)
    assert a.storage_key == f"incidents/{incident.code}/{a.code}"
    assert a.original_name == "etc/error-1-node-00.out"  # sanitised: no parent paths
    assert a.kind == "rank_log"
    assert stored_bytes(a) == data
    assert a.parse_status == ParseStatus.PENDING
    assert incident.events.filter(kind="ingest.upload").exists()


def test_the_same_content_uploaded_twice_is_stored_once_and_the_second_says_so(incident, owner):
    data = logs.node_log(1)
    first = only(upload(incident, owner, data, "a.log"))
    second = only(upload(incident, owner, data, "b.log"))
    assert second.status == "duplicate"
    assert second.artifact == first.artifact
    assert "a.log" in second.message and "stored once" in second.message
    assert Artifact.objects.filter(incident=incident).count() == 1
    keys = default_storage.listdir(f"incidents/{incident.code}")[1]
    assert keys == [first.artifact.code]


@pytest.mark.parametrize("name", ["logs.tar.gz", "logs.tgz"])
def test_a_tar_gz_expands_into_one_artifact_per_member(incident, owner, name):
    files = {"job/rank_0.log": b"[rank0]: hello\n", "job/rank_1.log": b"[rank1]: hello\n"}
    outs = upload(incident, owner, logs.tar_gz(files), name)
    assert [o.status for o in outs] == ["stored", "stored"]
    assert sorted(o.artifact.display_name for o in outs) == [
        f"{name}/job/rank_0.log",
        f"{name}/job/rank_1.log",
    ]
    assert all(o.artifact.original_name == name for o in outs)


def test_plain_tar_zip_and_gz_are_expanded(incident, owner):
    t = upload(incident, owner, logs.tar({"x/rank_2.log": b"two\n"}), "a.tar")
    z = upload(incident, owner, logs.zip_bytes({"rank_3.log": b"three\n"}), "b.zip")
    g = upload(incident, owner, logs.gz(b"four\n"), "rank_4.log.gz")
    assert only(t).artifact.display_name == "a.tar/x/rank_2.log"
    assert only(z).artifact.display_name == "b.zip/rank_3.log"
    assert only(g).artifact.display_name == "rank_4.log"
    assert stored_bytes(only(g).artifact) == b"four\n"  # stored expanded


def test_zstd_logs_and_zstd_tars_are_expanded(incident, owner):
    zst = zstandard.ZstdCompressor()
    one = only(upload(incident, owner, zst.compress(logs.node_log(5)), "node-05.log.zst"))
    assert one.artifact.display_name == "node-05.log"
    assert stored_bytes(one.artifact) == logs.node_log(5)
    many = upload(incident, owner, zst.compress(logs.tar({"a/rank_6.log": b"six\n"})), "j.tar.zst")
    assert only(many).artifact.display_name == "j.tar.zst/a/rank_6.log"
    cut = only(upload(incident, owner, zst.compress(logs.node_log(7) * 50)[:-30], "n.log.zst"))
    assert cut.status == "rejected" and "truncated" in cut.message


def test_it_rejects_a_zero_byte_file_without_storing_anything(incident, owner):
    out = only(upload(incident, owner, b"", "empty.log"))
    assert out.status == "rejected" and "empty" in out.message
    assert out.artifact.parse_status == ParseStatus.REJECTED and out.artifact.storage_key == ""
    assert not default_storage.exists(f"incidents/{incident.code}")


def test_it_rejects_a_binary_file(incident, owner):
    out = only(upload(incident, owner, bytes(range(256)) * 64, "core.bin"))
    assert out.status == "rejected" and "binary" in out.message


def test_a_latin1_log_is_kept_raw_and_says_it_is_not_utf8(incident, owner):
    data = "[rank0]: température élevée\n".encode("latin-1")
    out = only(upload(incident, owner, data, "rank_0.log"))
    assert out.status == "stored" and "UTF-8" in out.message
    assert stored_bytes(out.artifact) == data


def test_a_truncated_gzip_is_rejected_with_a_clear_message(incident, owner):
    data = logs.gz(logs.node_log(0) * 50)[:-40]
    out = only(upload(incident, owner, data, "node.log.gz"))
    assert out.status == "rejected" and "truncated" in out.message
    assert not Artifact.objects.exclude(parse_status=ParseStatus.REJECTED).exists()


def test_a_corrupt_zip_is_rejected(incident, owner):
    out = only(upload(incident, owner, b"PK\x03\x04" + b"\x00garbage" * 40, "logs.zip"))
    assert out.status == "rejected" and "zip" in out.message


def test_it_rejects_archives_with_parent_or_absolute_paths_and_keeps_the_rest(incident, owner):
    data = logs.tar_gz({"../evil.log": b"x\n", "/etc/passwd": b"y\n", "ok/rank_0.log": b"ok\n"})
    outs = {o.name: o for o in upload(incident, owner, data, "u.tar.gz")}
    assert "'..'" in outs["u.tar.gz/../evil.log"].message
    assert "absolute" in outs["u.tar.gz/etc/passwd"].message
    assert outs["u.tar.gz/ok/rank_0.log"].status == "stored"


def test_it_rejects_symlinks_and_devices_in_a_tar(incident, owner):
    link = tarfile.TarInfo("link.log")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/shadow"
    dev = tarfile.TarInfo("dev")
    dev.type = tarfile.CHRTYPE
    data = logs.tar_gz({"rank_0.log": b"fine\n"}, extra=[link, dev])
    outs = {o.name: o for o in upload(incident, owner, data, "u.tgz")}
    assert (
        outs["u.tgz/link.log"].status == "rejected"
        and "symbolic link" in outs["u.tgz/link.log"].message
    )
    assert outs["u.tgz/dev"].status == "rejected" and "device" in outs["u.tgz/dev"].message
    assert outs["u.tgz/rank_0.log"].status == "stored"


def test_a_zip_bomb_is_stopped_by_the_ratio_limit(incident, owner):
    bomb = logs.zip_bytes({"a.log": b"ok\n", "bomb.log": b"\0" * (30 << 20)})
    outs = {o.name: o for o in upload(incident, owner, bomb, "b.zip")}
    assert (
        outs["b.zip/bomb.log"].status == "rejected" and "zip bomb" in outs["b.zip/bomb.log"].message
    )
    assert outs["b.zip/a.log"].status == "stored"


def test_a_gzip_bomb_is_stopped_while_streaming_and_nothing_is_kept(incident, owner):
    bomb = logs.gz(b"A" * (40 << 20))
    out = only(upload(incident, owner, bomb, "x.log.gz"))
    assert out.status == "rejected" and "ratio" in out.message
    assert not Artifact.objects.exclude(parse_status=ParseStatus.REJECTED).exists()
    assert (
        default_storage.listdir(f"incidents/{incident.code}")[1] == []
        if default_storage.exists(f"incidents/{incident.code}")
        else True
    )


def test_the_member_count_and_total_limits_hold(incident, owner):
    files = {f"r/rank_{i}.log": f"[rank{i}]: x\n".encode() for i in range(5)}
    outs = upload(incident, owner, logs.tar_gz(files), "m.tgz", limits=Limits(max_members=3))
    assert [o.status for o in outs] == ["stored"] * 3 + ["rejected"]
    assert "more than 3 files" in outs[-1].message
    big = {f"r/{i}.log": (b"line %d\n" % i) * 3000 for i in range(4)}
    outs = upload(incident, owner, logs.tar_gz(big), "t.tgz", limits=Limits(max_total_bytes=50_000))
    assert outs[-1].status == "rejected" and "limit" in outs[-1].message


def test_a_file_over_the_size_limit_is_refused_before_it_is_stored(incident, owner, settings):
    settings.RANKSCOPE_MAX_FILE_BYTES = 1000
    out = only(upload(incident, owner, b"x" * 5000, "big.log"))
    assert out.status == "rejected" and "limit" in out.message
    assert not default_storage.exists(f"incidents/{incident.code}")


def test_a_pickle_that_names_a_class_is_refused_when_parsed(incident, owner):
    evil = pickle.dumps({"entries": [], "pg_status": {}, "owner": Limits()})
    out = only(upload(incident, owner, evil, "nccl_trace_rank_3"))
    assert out.status == "stored" and out.artifact.kind == "flight_recorder"
    assert services.artifact_parse(artifact_id=out.artifact.pk) == ParseStatus.FAILED
    out.artifact.refresh_from_db()
    assert "refused" in out.artifact.parse_error


def test_parse_stores_ranks_hosts_digests_and_the_result(incident, owner):
    out = only(upload(incident, owner, logs.node_log(2, hung_rank=19), "error-9-node-02.out"))
    assert services.artifact_parse(artifact_id=out.artifact.pk) == ParseStatus.PARSED
    a = Artifact.objects.get(pk=out.artifact.pk)
    assert a.ranks == list(range(16, 24))
    assert a.hosts == ["node-02"]
    digest = RankDigest.objects.get(artifact=a, rank=19)
    assert digest.host == "node-02" and digest.last_step == 300
    assert "watchdog timeout" in digest.last_nccl_state and "4201" in digest.last_nccl_state
    result = selectors.artifact_parse_result(artifact=a)
    ev = next(e for e in result.events if e.kind == "watchdog_timeout")
    assert ev.rank == 19 and ev.file == a.display_name
    assert logs.node_log(2, hung_rank=19).decode().splitlines()[ev.line - 1] == ev.text
    with default_storage.open(a.parsed_key, "rb") as fp:
        assert json.loads(gzip.decompress(fp.read()))["name"] == a.display_name


def test_parsing_twice_yields_the_same_rows_and_a_missing_row_is_a_no_op(incident, owner):
    out = only(upload(incident, owner, logs.node_log(3, hung_rank=25), "error-9-node-03.out"))
    services.artifact_parse(artifact_id=out.artifact.pk)
    first = list(
        RankDigest.objects.filter(artifact=out.artifact).values("rank", "host", "last_step")
    )
    Artifact.objects.filter(pk=out.artifact.pk).update(parse_status=ParseStatus.QUEUED)
    services.artifact_parse(artifact_id=out.artifact.pk)
    again = list(
        RankDigest.objects.filter(artifact=out.artifact).values("rank", "host", "last_step")
    )
    assert first == again and len(first) == 8
    assert services.artifact_parse(artifact_id=out.artifact.pk) is None  # already parsed
    assert services.artifact_parse(artifact_id=10**9) is None


def test_metrics_are_stored_columnar(incident, owner):
    csv = "step,rank,host,step_time_ms,loss\n" + "".join(
        f"{s},{r},node-0{r // 8},{100 + r},{2.0 - s / 100}\n" for s in range(50) for r in range(16)
    )
    out = only(upload(incident, owner, csv.encode(), "metrics.csv"))
    assert out.artifact.kind == "metrics"
    services.artifact_parse(artifact_id=out.artifact.pk)
    a = Artifact.objects.get(pk=out.artifact.pk)
    table = selectors.artifact_metrics(artifact=a)
    assert len(table) == 800 and table.has("step", "rank", "step_time")
    assert a.metrics_key.endswith(".metrics.arrow") and a.ranks == list(range(16))


def test_a_broken_broker_leaves_artifacts_pending_for_the_auditor(
    transactional_db, incident, owner, tmp_path
):
    # A real process whose broker is down (nothing listens on port 1): the CLI upload
    # still stores the file, and the row waits for the auditor.
    (tmp_path / "rank_0.log").write_bytes(b"[rank0]: x\n")
    env = worker_env({"CELERY_BROKER_URL": "redis://127.0.0.1:1/0"})
    proc = subprocess.run(
        [sys.executable, "manage.py", "ingest", incident.code, str(tmp_path / "rank_0.log")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    a = Artifact.objects.get(incident=incident)
    assert a.parse_status == ParseStatus.PENDING and a.enqueued_at is None
    assert default_storage.exists(a.storage_key)


def test_the_fan_in_requests_the_analysis_once_however_many_finish_together(
    transactional_db, incident, owner, monkeypatch
):
    calls = []
    monkeypatch.setattr(
        signals.artifacts_parsed, "send", lambda sender, incident: calls.append(incident.pk)
    )
    arts = [
        only(upload(incident, owner, logs.node_log(n), f"error-1-node-{n:02d}.out")).artifact
        for n in range(6)
    ]
    Artifact.objects.filter(pk__in=[a.pk for a in arts]).update(parse_status=ParseStatus.PARSED)
    barrier = threading.Barrier(6)

    def finish():
        barrier.wait()
        try:
            services.incident_parse_fan_in(incident_id=incident.pk)
        finally:
            connection.close()

    threads = [threading.Thread(target=finish) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [incident.pk]
    assert incident.events.filter(kind="ingest.parsed").count() == 1
