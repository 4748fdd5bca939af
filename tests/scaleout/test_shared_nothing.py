"""The whole path on the scale-out shape: a web host and two worker hosts that share
nothing but PostgreSQL, Redis and a real S3 API (SeaweedFS).

Each host has its own working, temporary and var directories (so on the filesystem
backend none could read another's uploads); every process records the files it opens
(``openaudit/sitecustomize.py``). Uploads through the page (files and a ``.tar.gz``) and
the API, parsing in the worker processes, analysis, the evidence viewer, the post-mortem
export and deletion all go through HTTP to gunicorn, as a user's browser or an epilog
would.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys

import pytest
import requests

from apps.accounts.services import api_token_create
from apps.analysis.models import AnalysisRun
from apps.ingest import selectors as ingest_selectors
from apps.ingest.models import Artifact, ParseStatus
from tests.conftest import PASSWORD, wait_for, worker_env
from tests.hosts import Host, free_port
from tests.ingest import logs

pytestmark = [pytest.mark.worker, pytest.mark.timeout(300)]

MARKER = "rankscope-shares-nothing-7f3a"


def _big_log() -> bytes:
    """A 3 MiB rank log: over the in-memory upload limit, so the web host spools it."""
    line = f"[rank3]:[I1121 10:00:00.000000 42 train.py:10] iteration ok {MARKER}\n".encode()
    return line * (3 * (1 << 20) // len(line) + 1)


def _login(base: str, username: str) -> requests.Session:
    s = requests.Session()
    s.get(f"{base}/login/", timeout=30).raise_for_status()
    r = s.post(
        f"{base}/login/",
        data={
            "username": username,
            "password": PASSWORD,
            "csrfmiddlewaretoken": s.cookies["csrftoken"],
        },
        timeout=30,
        allow_redirects=False,
    )
    assert r.status_code == 302, r.text[:500]
    return s


def test_web_and_two_workers_sharing_only_the_stores_run_the_whole_path(
    transactional_db, s3, owner, team, incident, tmp_path
):
    from apps.celery import app

    app.control.purge()
    hosts_dir = tmp_path / "hosts"
    env = worker_env(
        {
            **s3.env(),
            "DJANGO_SECRET_KEY": "one key for every web host of the site",
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        }
    )
    web = Host(hosts_dir, "web-1", env, audit_root=hosts_dir)
    workers = [Host(hosts_dir, f"worker-{n}", env, audit_root=hosts_dir) for n in (1, 2)]
    hosts = [web, *workers]

    def all_logs() -> str:
        return "\n".join(h.logs() for h in hosts)

    try:
        for w in workers:
            w.start_worker(concurrency=1)
        base = web.start_web(port=free_port(), workers=2)
        wait_for(
            lambda: _up(base),
            timeout=60,
            message=lambda: f"gunicorn did not answer:\n{all_logs()}",
        )
        wait_for(
            lambda: all(w.logs().count("ready.") == 2 for w in workers),
            timeout=60,
            message=lambda: f"workers not ready:\n{all_logs()}",
        )

        # --- upload through the page: a .tar.gz of 8 node logs and a plain 3 MiB file
        browser = _login(base, owner.username)
        files = logs.job_64_ranks(hung_rank=37)
        r = browser.post(
            f"{base}/incidents/{incident.code}/artifacts/upload/",
            files=[
                ("files", ("job-123.tar.gz", logs.tar_gz(files), "application/gzip")),
                ("files", ("rank3-extra.log", _big_log(), "text/plain")),
            ],
            headers={"X-CSRFToken": browser.cookies["csrftoken"], "Accept": "application/json"},
            timeout=120,
        )
        assert r.status_code == 200, r.text[:1000]
        assert [o["status"] for o in r.json()["outcomes"]] == ["stored"] * 9

        # --- and through the API, as an epilog does
        _, token = api_token_create(team=team, name="epilog", scope="write", actor=owner)
        api = requests.Session()
        api.headers["Authorization"] = f"Bearer {token}"
        r = api.post(
            f"{base}/api/v1/incidents/{incident.code}/artifacts/",
            files=[
                (
                    "file",
                    (
                        "epilog-node-04.tar.gz",
                        logs.tar_gz({"slurm-123.out": b"srun: error: node-04: task 37: Exited\n"}),
                    ),
                )
            ],
            timeout=60,
        )
        assert r.status_code == 202, r.text[:1000]
        assert Artifact.objects.filter(
            incident=incident, display_name="epilog-node-04.tar.gz/slurm-123.out"
        ).exists()

        def parsed() -> bool:
            qs = Artifact.objects.filter(incident=incident)
            return qs.count() == 10 and not qs.exclude(parse_status=ParseStatus.PARSED).exists()

        wait_for(parsed, timeout=180, message=lambda: f"not all parsed:\n{all_logs()}")
        for w in workers:  # both worker hosts took a share of the parsing
            assert re.search(r"artifact_parse\[[^\]]+\] succeeded", w.logs()), w.logs()

        def analysed() -> AnalysisRun | None:
            run = incident.analysis_runs.order_by("-pk").first()
            inputs_done = incident.events.filter(kind="ingest.parsed").exists()
            return run if inputs_done and run and run.status == "succeeded" else None

        run = wait_for(analysed, timeout=120, message=lambda: f"no analysis:\n{all_logs()}")
        wait_for(
            lambda: not incident.analysis_runs.exclude(status__in=["succeeded", "failed"]).exists(),
            timeout=120,
            message=lambda: f"analysis still running:\n{all_logs()}",
        )
        run = incident.analysis_runs.filter(status="succeeded").order_by("-pk").first()
        doc = run.document
        # rank 37 is the one whose watchdog fired in node-04's log
        assert doc["triage"]["shape"] == "hang", doc["triage"]
        assert 37 in doc["localization"]["initiator_ranks"] + doc["localization"]["culprit_ranks"]

        # --- the evidence viewer, on the web host, of a line a finding cites
        evidence = [e for f in doc["findings"] for e in f.get("evidence", []) if e.get("line")]
        assert evidence, doc["findings"]
        ev = evidence[0]
        url = ingest_selectors.evidence_url(incident, ev["file"], ev["line"])
        assert url, ev
        page = browser.get(f"{base}{url}", timeout=60)
        assert page.status_code == 200
        assert html.escape(ev["text"], quote=False) in page.text or ev["text"] in page.text

        # --- the post-mortem, drafted and exported as markdown
        r = browser.post(
            f"{base}/incidents/{incident.code}/postmortem/draft/",
            headers={"X-CSRFToken": browser.cookies["csrftoken"]},
            timeout=60,
            allow_redirects=False,
        )
        assert r.status_code == 302, r.text[:500]
        md = browser.get(f"{base}{r.headers['Location']}markdown/", timeout=60)
        assert md.status_code == 200 and incident.title in md.text

        # --- deletion: the artifact and every object stored for it go
        extra = Artifact.objects.get(incident=incident, display_name="rank3-extra.log")
        before = set(s3.keys())
        own = {k for k in before if extra.storage_key in k}
        assert len(own) == 3, own  # the log, its parse result, its line index
        r = api.delete(
            f"{base}/api/v1/incidents/{incident.code}/artifacts/{extra.code}/", timeout=60
        )
        assert r.status_code == 204, r.text[:500]
        assert set(s3.keys()) == before - own
        assert (
            browser.get(f"{base}/incidents/{incident.code}/artifacts/{extra.code}/").status_code
            == 404
        )
    finally:
        for h in hosts:
            h.stop()

    # --- shares nothing: no host opened a file on another host's disk ...
    for h in hosts:
        opened = h.opened()
        assert opened, f"{h.name} recorded no file opens: the audit hook did not load"
        foreign = [p for p in opened if not p.startswith(str(h.dir) + "/")]
        assert foreign == [], f"{h.name} opened other hosts' files: {foreign[:5]}"
    # the web host spooled the 3 MiB upload in its own temporary directory, and no host
    # kept a copy of uploaded bytes on its disk: they are in the object store only
    assert any(p.startswith(str(web.var / "tmp")) for p in web.opened()), web.opened()[:20]
    for path in hosts_dir.rglob("*"):
        if path.is_file() and not path.name.endswith(".log"):
            assert MARKER.encode() not in path.read_bytes(), path


def _up(base: str) -> bool:
    try:
        return requests.get(f"{base}/healthz", timeout=5).status_code < 500
    except requests.RequestException:
        return False


def test_the_open_audit_records_a_file_read_on_another_hosts_disk(tmp_path):
    """The shares-nothing check above can fail: a read of another host's file shows."""
    hosts_dir = tmp_path / "hosts"
    a = Host(hosts_dir, "a", dict(os.environ), audit_root=hosts_dir)
    b = Host(hosts_dir, "b", dict(os.environ), audit_root=hosts_dir)
    theirs = b.var / "upload-kept-on-b"
    theirs.write_text("x")
    subprocess.run(
        [sys.executable, "-c", f"open({str(theirs)!r}).read()"],
        cwd=a.work,
        env=a.env(),
        check=True,
    )
    assert a.opened() == [str(theirs.resolve())]
    assert b.opened() == []
