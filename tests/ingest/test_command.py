"""`manage.py ingest` and the demo seed go through the same upload service."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from apps.incidents.models import Incident
from apps.ingest.models import Artifact
from tests.ingest import logs


def test_the_ingest_command_uploads_files_directories_and_archives(
    incident, owner, tmp_path, capsys
):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "rank_0.log").write_bytes(b"[rank0]: hi\n")
    (tmp_path / "bundle.tgz").write_bytes(logs.tar_gz({"rank_1.log": b"[rank1]: hi\n"}))
    (tmp_path / "empty.log").write_bytes(b"")
    call_command(
        "ingest",
        incident.code,
        str(tmp_path / "logs"),
        str(tmp_path / "bundle.tgz"),
        str(tmp_path / "empty.log"),
        "--user",
        owner.username,
    )
    out = capsys.readouterr()
    assert "2 stored" in out.out and "1 rejected" in out.out and "empty" in out.err
    names = set(Artifact.objects.filter(incident=incident).values_list("display_name", "source"))
    assert ("logs/rank_0.log", "cli") in names and ("bundle.tgz/rank_1.log", "cli") in names


def test_the_ingest_command_fails_when_nothing_is_accepted(incident, tmp_path):
    (tmp_path / "empty.log").write_bytes(b"")
    with pytest.raises(CommandError, match="nothing was accepted"):
        call_command("ingest", incident.code, str(tmp_path / "empty.log"))
    with pytest.raises(CommandError, match="no incident"):
        call_command("ingest", "nope", str(tmp_path / "empty.log"))


def test_seed_demo_ingests_a_128_rank_job_once(db):
    call_command("seed_demo")
    incident = Incident.objects.get(title__startswith="Demo:")
    first = Artifact.objects.filter(incident=incident).count()
    assert first > 0
    assert Artifact.objects.filter(incident=incident, parse_status="rejected").count() == 0
    call_command("seed_demo")
    assert Artifact.objects.filter(incident=incident).count() == first
