"""Settings for the test suite: the production settings module, pointed at PostgreSQL and Redis.

`make test` exports these variables explicitly; the defaults make a bare `pytest` behave
the same. They are set in os.environ (not only here) so that worker processes and
scripts the tests start inherit them.
"""

import os
from pathlib import Path

os.environ.setdefault("DATABASE_URL", "postgres://postgres:postgres@127.0.0.1:5432/rankscope")
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/14")
os.environ.setdefault("CACHE_URL", "redis://127.0.0.1:6379/13")
os.environ.setdefault(
    "RANKSCOPE_VAR_DIR", str(Path(__file__).resolve().parent.parent / "var" / "test")
)

from apps.settings import *  # noqa: F403

# Test-only steps that can be slowed down in worker processes (see tests/slowdown.py).
INSTALLED_APPS = [*INSTALLED_APPS, "tests.slowdown.SlowdownConfig"]  # noqa: F405
