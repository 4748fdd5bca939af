"""Slow steps for the tests that kill a worker (or its database connection) mid-task.

A test-only Django app, installed by ``tests/settings.py`` and therefore in every worker
process a test starts. With one of the variables below set in the worker's environment
it wraps a step of the parse or of the analysis in a sleep; production code knows
nothing about it.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from django.apps import AppConfig

# Seconds to sleep after a parse's outputs are stored and before its rows are written.
PARSE_SLEEP_ENV = "RANKSCOPE_TEST_PARSE_SLEEP"
# Seconds to sleep per input an analysis loads.
ANALYSIS_SLEEP_ENV = "RANKSCOPE_TEST_ANALYSIS_SLEEP_PER_ARTIFACT"


def _slowed(fn: Callable[..., Any], seconds: float) -> Callable[..., Any]:
    @functools.wraps(fn)
    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(seconds)
        return fn(*args, **kwargs)

    return slow


def _wrap_where_used(used_by: Callable[..., Any], name: str, seconds: float) -> None:
    """Replace ``name`` in the module that defines ``used_by`` (its global lookup)."""
    module = sys.modules[used_by.__module__]
    setattr(module, name, _slowed(getattr(module, name), seconds))


class SlowdownConfig(AppConfig):
    name = "tests.slowdown"
    label = "tests_slowdown"

    def ready(self) -> None:
        from apps.analysis import services as analysis_services
        from apps.ingest import services as ingest_services

        parse_sleep = float(os.environ.get(PARSE_SLEEP_ENV) or 0)
        if parse_sleep:
            # rank_digests runs once the outputs are in storage, before the row is written.
            _wrap_where_used(ingest_services.artifact_parse, "rank_digests", parse_sleep)
        analysis_sleep = float(os.environ.get(ANALYSIS_SLEEP_ENV) or 0)
        if analysis_sleep:
            _wrap_where_used(
                analysis_services.analysis_execute, "artifact_parse_result_load", analysis_sleep
            )
