"""The SLURM epilog scripts in docs/slurm/, run with bash and a SLURM-like environment
against a live server — and against no server at all."""

from __future__ import annotations

import getpass
import json
import socket
import subprocess
import time
from pathlib import Path

import pytest

from apps.incidents.models import Incident, IncidentEvent
from tests.conftest import ROOT, wait_for

NODE_EPILOG = ROOT / "docs" / "slurm" / "epilog.sh"
CTLD_EPILOG = ROOT / "docs" / "slurm" / "epilog_slurmctld.sh"


@pytest.fixture
def token(transactional_db, team) -> str:
    from apps.accounts.services import api_token_create

    return api_token_create(team=team, name="eos epilog", scope="ingest", actor=None)[1]


class Site:
    """A node's configuration file, token file, job log directory and spool."""

    def __init__(self, tmp: Path, url: str, token: str, *, foreground: bool = True) -> None:
        self.tmp = tmp
        self.logs = tmp / "joblogs"
        self.spool = tmp / "spool"
        self.ctld_spool = tmp / "ctld-spool"
        self.log = tmp / "epilog.log"
        (tmp / "token").write_text(token + "\n")
        self.conf = tmp / "epilog.conf"
        self.write_conf(url, foreground=foreground)

    def write_conf(
        self, url: str, *, foreground: bool = True, max_time: int = 10, extra: str = ""
    ) -> None:
        self.conf.write_text(
            f"RANKSCOPE_URL={url}\n"
            f"RANKSCOPE_TOKEN_FILE={self.tmp / 'token'}\n"
            f"RANKSCOPE_LOG_DIRS='{self.logs}/%j'\n"
            f"RANKSCOPE_SPOOL_DIR={self.spool}\n"
            f"RANKSCOPE_CTLD_SPOOL_DIR={self.ctld_spool}\n"
            f"RANKSCOPE_EPILOG_LOG={self.log}\n"
            f"RANKSCOPE_EPILOG_FOREGROUND={1 if foreground else 0}\n"
            "RANKSCOPE_EPILOG_MAX_JITTER=0\n"
            f"RANKSCOPE_MAX_TIME={max_time}\n"
            "RANKSCOPE_RETRIES=1\n"
            "RANKSCOPE_COLLECT_DMESG=0\n"
            "RANKSCOPE_RETRY_MAX_SECONDS=4\n" + extra
        )

    def job_logs(self, job_id: str, files: dict[str, bytes]) -> None:
        d = self.logs / job_id
        d.mkdir(parents=True, exist_ok=True)
        for name, body in files.items():
            (d / name).write_bytes(body)

    def env(self, job_id: str, **extra: str) -> dict[str, str]:
        # No PATH: slurmd sets none, so the scripts must use absolute paths.
        env = {
            "RANKSCOPE_EPILOG_CONF": str(self.conf),
            "SLURM_JOB_ID": job_id,
            "SLURM_CLUSTER_NAME": "eos",
            "SLURM_JOB_USER": getpass.getuser(),
            "SLURM_JOB_UID": "1000",
            "SLURM_JOB_EXIT_CODE": "256",
            "SLURM_JOB_EXIT_CODE2": "1:0",
            "SLURM_JOB_RESTART_COUNT": "0",
            "SLURM_JOB_NODELIST": "node[001-002]",
            "SLURM_JOB_PARTITION": "batch",
            "SLURM_JOB_WORK_DIR": "/home/alice/run",
        }
        env.update(extra)
        return env

    def run(self, script: Path, env: dict[str, str], timeout: float = 60) -> tuple[int, float]:
        started = time.monotonic()
        proc = subprocess.run(
            ["/bin/bash", str(script)], env=env, capture_output=True, timeout=timeout
        )
        return proc.returncode, time.monotonic() - started


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_node_epilog_posts_the_jobs_logs_into_the_job_run_incident(
    live_server, token, tmp_path, team
):
    site = Site(tmp_path, live_server.url, token)
    site.job_logs("5150", {"rank_0.log": b"[rank0]: step 10\n", "rank_1.log": b"[rank1]: NCCL\n"})
    for node in ("node001", "node002"):
        code, _ = site.run(NODE_EPILOG, site.env("5150", SLURMD_NODENAME=node))
        assert code == 0
    incident = Incident.objects.get(team=team, cluster="eos", job_id="5150", run_key="0")
    names = list(incident.artifacts.values_list("display_name", flat=True))
    assert any(n.startswith("node001/") and n.endswith("rank_0.log") for n in names), names
    # Both nodes sent the same bytes (a shared log directory): stored once.
    assert sum(n.endswith("rank_1.log") for n in names) == 1
    assert not any(site.spool.iterdir()), "a sent spool is removed"


def test_the_controller_epilog_posts_the_job_record_once_even_when_run_twice(
    live_server, token, tmp_path, team
):
    site = Site(tmp_path, live_server.url, token)
    env = site.env(
        "6160",
        SLURM_JOB_NAME='pretrain "70b"\nstage-2',
        SLURM_JOB_COMMENT="user says: <script>",
        SLURM_JOB_STDOUT="slurm-%j.out",
    )
    for _ in range(2):
        code, _ = site.run(CTLD_EPILOG, env)
        assert code == 0
    incident = Incident.objects.get(team=team, cluster="eos", job_id="6160")
    record_file = incident.artifacts.get(display_name="slurm-job-6160.json")
    from apps.ingest.services import open_for_reading

    with open_for_reading(record_file) as fp:
        record = json.load(fp)
    assert record["job_name"] == 'pretrain "70b"\nstage-2'
    assert record["job_nodes"] == ["node001", "node002"]
    assert record["exit_code2"] == "1:0" and record["stdout"] == "slurm-%j.out"
    assert IncidentEvent.objects.filter(incident=incident, kind="slurm.job_end").count() == 1


def test_a_detached_node_epilog_returns_at_once_and_its_sender_delivers(
    live_server, token, tmp_path, team
):
    site = Site(tmp_path, live_server.url, token, foreground=False)
    site.job_logs("7170", {"rank_3.log": b"[rank3]: step 7\n"})
    code, elapsed = site.run(NODE_EPILOG, site.env("7170", SLURMD_NODENAME="node003"))
    assert code == 0 and elapsed < 5
    wait_for(
        lambda: (
            Incident.objects.filter(job_id="7170").exists()
            and Incident.objects.get(job_id="7170").artifacts.exists()
        ),
        timeout=30,
        message="the detached sender never delivered",
    )


def test_with_the_service_down_both_epilogs_exit_0_within_their_bound_and_keep_the_spool(
    live_server, token, tmp_path, team
):
    site = Site(tmp_path, f"http://127.0.0.1:{_closed_port()}", token)
    site.write_conf(f"http://127.0.0.1:{_closed_port()}", max_time=3)
    site.job_logs("8180", {"rank_0.log": b"[rank0]: lost\n"})
    code, elapsed = site.run(NODE_EPILOG, site.env("8180", SLURMD_NODENAME="node001"))
    assert code == 0 and elapsed < 20
    code, elapsed = site.run(CTLD_EPILOG, site.env("8180"))
    assert code == 0 and elapsed < 20
    assert len(list(site.spool.iterdir())) == 1, "unsent evidence stays spooled"
    assert len(list(site.ctld_spool.iterdir())) == 1, "so does the unsent job record"

    # The service is back: the next job's epilog on this node also sends the old spool,
    # and the next job's controller epilog the old job record.
    site.write_conf(live_server.url)
    site.job_logs("8181", {"rank_0.log": b"[rank0]: next job\n"})
    code, _ = site.run(NODE_EPILOG, site.env("8181", SLURMD_NODENAME="node001"))
    assert code == 0
    assert Incident.objects.filter(team=team, job_id__in=["8180", "8181"]).count() == 2
    assert not any(site.spool.iterdir())
    code, _ = site.run(CTLD_EPILOG, site.env("8181"))
    assert code == 0
    assert not any(site.ctld_spool.iterdir())
    for job in ("8180", "8181"):
        incident = Incident.objects.get(team=team, job_id=job)
        assert incident.artifacts.filter(display_name=f"slurm-job-{job}.json").exists()


def test_a_hung_service_does_not_hold_the_node_the_sender_is_detached(tmp_path, token):
    # A server that accepts connections and never answers.
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(16)
    try:
        site = Site(tmp_path, f"http://127.0.0.1:{hung.getsockname()[1]}", token, foreground=False)
        site.write_conf(f"http://127.0.0.1:{hung.getsockname()[1]}", foreground=False, max_time=2)
        site.job_logs("9190", {"rank_0.log": b"x\n"})
        code, elapsed = site.run(NODE_EPILOG, site.env("9190", SLURMD_NODENAME="n1"), timeout=10)
        assert code == 0 and elapsed < 3
        code, elapsed = site.run(CTLD_EPILOG, site.env("9190"), timeout=10)
        assert code == 0 and elapsed < 3
    finally:
        hung.close()


def test_without_configuration_the_epilogs_do_nothing_and_exit_0(tmp_path):
    env = {"RANKSCOPE_EPILOG_CONF": str(tmp_path / "missing.conf"), "SLURM_JOB_ID": "1"}
    for script in (NODE_EPILOG, CTLD_EPILOG):
        proc = subprocess.run(["/bin/bash", str(script)], env=env, capture_output=True, timeout=10)
        assert proc.returncode == 0
