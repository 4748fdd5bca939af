"""Helpers for the isolation/root-cause tests: parse generated files and analyze them."""

from __future__ import annotations

import io
from typing import Any

import rankscope as engine


def parse_all(files: dict[str, bytes]) -> list[engine.ParseResult]:
    return [engine.parse_artifact(io.BytesIO(b), name=n) for n, b in files.items()]


def analyze(files: dict[str, bytes], **opts: Any) -> dict[str, Any]:
    return engine.analyze(parse_all(files), options=engine.Options(**opts))


def kinds(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for f in doc["findings"]:
        out.setdefault(f["kind"], []).append(f)
    return out


def assert_evidence_exact(
    doc: dict[str, Any], files: dict[str, bytes], kinds_: tuple[str, ...] | None = None
) -> None:
    """Every evidence line of these finding kinds (default: every finding) is quoted exactly
    from its file and line."""
    for f in doc["findings"]:
        if kinds_ is not None and f["kind"] not in kinds_:
            continue
        assert f["evidence"], f
        for ev in f["evidence"]:
            if ev["file"] not in files:
                continue
            lines = files[ev["file"]].decode().split("\n")
            assert lines[ev["line"] - 1] == ev["text"], (f["kind"], ev)
