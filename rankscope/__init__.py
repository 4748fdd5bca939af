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

import importlib
from typing import TYPE_CHECKING, Any

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
from .render import render_markdown, render_text
from .sources import read_paths

if TYPE_CHECKING:
    from .analyzers import Analyzer, Context, register_analyzer, registered_analyzers
    from .document import SCHEMA
    from .pipeline import analyze

ENGINE_VERSION = "0.1.0"

# The analysis side is imported at its first use, not with the package: the offline
# command's parse processes never need it, and its parent imports it while they parse
# (``cli.parse_paths``) instead of before the first file is read (~0.1 s of start-up).
_LAZY = {
    "SCHEMA": "document",  # its module holds the document's types (~2 ms to build)
    "Analyzer": "analyzers",
    "Context": "analyzers",
    "register_analyzer": "analyzers",
    "registered_analyzers": "analyzers",
    "analyze": "pipeline",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


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
