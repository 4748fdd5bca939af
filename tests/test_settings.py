"""A malformed setting stops start-up with a message that names the variable."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _check(env_overrides: dict[str, str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, **env_overrides)
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DATABASE_URL", "mysql://nope"),
        ("CELERY_BROKER_URL", "amqp:/broken"),
        ("DJANGO_DEBUG", "maybe"),
        ("RANKSCOPE_MAX_FILE_BYTES", "lots"),
        ("RANKSCOPE_STORAGE", "floppy"),
    ],
)
def test_a_malformed_setting_stops_startup_naming_the_variable(name, value):
    result = _check({name: value})
    assert result.returncode != 0
    assert name in result.stderr
    assert "Traceback" not in result.stderr


def test_the_embedded_defaults_start_without_any_server(tmp_path):
    env = {k: "" for k in ("DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL")}
    env["RANKSCOPE_VAR_DIR"] = str(tmp_path)
    result = _check(env)
    assert result.returncode == 0, result.stderr
