"""Rankscope's analysis engine: pure Python, no Django.

Public API (the web, Celery tasks, the CLI and the tests all call these):

- ``ENGINE_VERSION``, ``artifact_kinds()``
- ``detect_kind(name, head) -> str``
- ``parse_artifact(stream, *, name, kind=None, progress=None) -> ParseResult``
- ``ParseResult`` (``to_json``/``from_json``), ``MetricsTable`` (``write``/``read``)
- ``analyze(results, *, options=None, progress=None) -> dict`` (``rankscope.triage/v1``)
- ``render_markdown(doc)``, ``render_text(doc)``
- ``read_paths(paths)`` → ``(name, binary stream)`` with archive expansion
- ``Options``; plugin registries: ``register_parser``, ``register_analyzer``

See docs/analysis.md for what each analyzer reads and concludes.
"""

from __future__ import annotations

from .analyzers import Analyzer, Context, register_analyzer, registered_analyzers
from .document import SCHEMA
from .metrics import MetricsTable
from .model import Event, Options, ParseResult, RankInfo
from .parsers import (
    ParseError,
    Parser,
    artifact_kinds,
    detect_kind,
    parse_artifact,
    register_parser,
    registered_parsers,
)
from .pipeline import analyze
from .render import render_markdown, render_text
from .sources import read_paths

ENGINE_VERSION = "0.1.0"

__all__ = [
    "ENGINE_VERSION",
    "SCHEMA",
    "Analyzer",
    "Context",
    "Event",
    "MetricsTable",
    "Options",
    "ParseError",
    "ParseResult",
    "Parser",
    "RankInfo",
    "analyze",
    "artifact_kinds",
    "detect_kind",
    "parse_artifact",
    "read_paths",
    "register_analyzer",
    "register_parser",
    "registered_analyzers",
    "registered_parsers",
    "render_markdown",
    "render_text",
]
