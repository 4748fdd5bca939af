"""The peel's first-character table (``envelope._WRAPPERS_BY_FIRST``) only skips
wrappers that cannot match: on every line of the corpus it peels exactly as trying
every wrapper does. A new wrapper missing from the table fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from rankscope import envelope

CASES = Path(__file__).resolve().parents[2] / "corpus" / "cases"


def _lines() -> list[str]:
    out: list[str] = []
    for f in sorted(CASES.glob("*/*")):
        if f.name == "case.toml" or not f.is_file():
            continue
        out.extend(f.read_text(encoding="utf-8", errors="replace").splitlines())
    return out


def test_first_character_dispatch_peels_like_trying_every_wrapper(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = _lines()
    assert len(lines) > 1000
    fast = [envelope.peel(x) for x in lines]
    every = {chr(i): envelope._ALL_WRAPPERS for i in range(128)}
    monkeypatch.setattr(envelope, "_WRAPPERS_BY_FIRST", every)
    slow = [envelope.peel(x) for x in lines]
    differ = [(x, a, b) for x, a, b in zip(lines, fast, slow, strict=True) if a != b]
    assert not differ, differ[:3]
