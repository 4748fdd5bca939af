"""A malformed setting stops start-up with a message that names the variable."""

import ast
import os
import re
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


def test_the_embedded_brokers_poll_interval_is_read_and_checked(tmp_path):
    env = {k: "" for k in ("DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL")}
    env["RANKSCOPE_VAR_DIR"] = str(tmp_path)
    result = _check({**env, "CELERY_FILESYSTEM_POLL_SECONDS": "often"})
    assert result.returncode != 0
    assert "CELERY_FILESYSTEM_POLL_SECONDS" in result.stderr
    assert "Traceback" not in result.stderr
    assert _check({**env, "CELERY_FILESYSTEM_POLL_SECONDS": "0.5"}).returncode == 0


@pytest.mark.parametrize(
    ("env", "name"),
    [
        ({"RANKSCOPE_LOG_LEVEL": "chatty"}, "RANKSCOPE_LOG_LEVEL"),
        ({"RANKSCOPE_ANALYSIS_HEARTBEAT_SECONDS": "40"}, "RANKSCOPE_ANALYSIS_STALE_SECONDS"),
        (
            {"RANKSCOPE_ANALYSIS_SOFT_TIME_LIMIT": "600", "RANKSCOPE_ANALYSIS_TIME_LIMIT": "300"},
            "RANKSCOPE_ANALYSIS_SOFT_TIME_LIMIT",
        ),
        (
            {"RANKSCOPE_ANALYSIS_TIME_LIMIT": "9000", "CELERY_BROKER_URL": "redis://h:6379/0"},
            "CELERY_VISIBILITY_TIMEOUT",
        ),
        ({"RANKSCOPE_API_MAX_REQUEST_BYTES": "0"}, "RANKSCOPE_API_MAX_REQUEST_BYTES"),
    ],
)
def test_a_combination_that_cannot_work_stops_startup_naming_the_variable(env, name):
    result = _check(env)
    assert result.returncode != 0
    assert name in result.stderr
    assert "Traceback" not in result.stderr


# --- every setting is read once, from the environment, and documented -----------------

SETTINGS_PY = ROOT / "apps" / "settings.py"
CONFIGURATION_MD = ROOT / "docs" / "configuration.md"
NAME = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")
RANKSCOPE_NAME = re.compile(r"\bRANKSCOPE_[A-Z0-9_]*[A-Z0-9]\b(?!_)")


def _read_from_environment() -> set[str]:
    """Names apps/settings.py reads through the apps.lib.env helpers."""
    tree = ast.parse(SETTINGS_PY.read_text())
    return {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id.startswith("env_")
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    }


def _table_rows(section: str) -> list[list[str]]:
    """The cells of the table under the ``## section`` heading of configuration.md."""
    text = CONFIGURATION_MD.read_text()
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in body.splitlines() if line.startswith("| `")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]


def _documented_settings() -> set[str]:
    return {name for row in _table_rows("Server settings") for name in NAME.findall(row[0])}


def _other_programs() -> dict[str, str]:
    return {
        name: row[1].strip("`")
        for row in _table_rows("Variables read by other programs")
        for name in NAME.findall(row[0])
    }


def test_every_variable_settings_reads_is_documented_and_nothing_else():
    assert _read_from_environment() == _documented_settings()


def test_every_rankscope_variable_named_in_the_docs_is_read_somewhere():
    mentioned: dict[str, str] = {}
    for path in [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]:
        for name in RANKSCOPE_NAME.findall(path.read_text()):
            mentioned.setdefault(name, path.name)
    read = _read_from_environment() | set(_other_programs())
    assert {n: where for n, where in mentioned.items() if n not in read} == {}


def test_variables_of_other_programs_are_read_where_the_docs_say():
    for name, program in _other_programs().items():
        assert name in (ROOT / program).read_text(), f"{program} does not read {name}"
        assert name not in _read_from_environment(), f"{name} is a server setting too"


def test_only_settings_reads_the_environment():
    """Code reads settings.X; only apps/settings.py (through apps/lib/env.py) reads os.environ."""
    readers = []
    for path in sorted((ROOT / "apps").rglob("*.py")):
        if path in (SETTINGS_PY, ROOT / "apps" / "lib" / "env.py"):
            continue
        source = path.read_text()
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            # wsgi/asgi/celery only say which settings module to load
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("environ", "getenv")
                and "DJANGO_SETTINGS_MODULE" not in lines[node.lineno - 1]
            ):
                readers.append(where)
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "getattr"
                and len(node.args) == 3
                and isinstance(node.args[0], ast.Name)
                and node.args[0].id == "settings"
            ):
                readers.append(f"{where} getattr(settings, …)")
    assert readers == []
