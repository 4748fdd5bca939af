"""The Rankscope project package: settings, URLs, Celery app, and the domain apps."""

import sys
from typing import Any


def _engine_cli_only() -> bool:
    """True in ``python -m apps.analysis.engine.cli`` (pure Python: no Django, no Celery)."""
    argv = sys.orig_argv
    return "-m" in argv and argv[argv.index("-m") + 1 :][:1] == ["apps.analysis.engine.cli"]


if not _engine_cli_only():
    # Django, manage.py and `celery -A apps` load the Celery app here, so that shared_task
    # binds to it. The offline engine CLI skips it (~0.2 s of every run) and gets it on demand.
    from apps.celery import app as celery_app
else:

    def __getattr__(name: str) -> Any:
        if name == "celery_app":
            from apps.celery import app

            return app
        raise AttributeError(f"module 'apps' has no attribute {name!r}")


__all__ = ["celery_app"]
