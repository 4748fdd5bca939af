"""The triage document has a declared shape and each section one writer."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_type_hints

import pytest

from rankscope.document import Job, Localization, RootCause, Triage, TriageDocument
from rankscope.testing.corpus import load_cases, run_engine

ANALYZERS = Path(__file__).resolve().parents[3] / "rankscope" / "analyzers"

# section → the only analyzer module that assigns it
WRITERS = {
    "job": "job.py",
    "triage": "verdict.py",
    "localization": "localization.py",
    "root_cause": "verdict.py",
    "timeline": "verdict.py",
    "recommendations": "verdict.py",
    "proposals": "proposals.py",
}


def _sources() -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(ANALYZERS.glob("*.py"))}


@pytest.mark.parametrize("section", sorted(WRITERS))
def test_each_section_has_one_writer(section: str) -> None:
    write = re.compile(
        rf'(?:ctx\.)?doc\["{section}"\]\s*(?:=|\[[^\]]+\]\s*=|\.update\()'
        rf'|doc\.setdefault\("{section}"'
    )
    writers = sorted(name for name, src in _sources().items() if write.search(src))
    assert writers in ([WRITERS[section]], []), writers


def test_analyzers_read_facts_as_attributes() -> None:
    untyped = re.compile(r"ctx\.facts(?:\[|\.get\(|\.setdefault\()")
    offenders = sorted(name for name, src in _sources().items() if untyped.search(src))
    assert offenders == []


def _keys(td: type) -> set[str]:
    return set(get_type_hints(td))


CASES = load_cases()


@pytest.mark.parametrize("case", CASES[:: max(1, len(CASES) // 40)], ids=lambda c: c.id)
def test_documents_match_the_declared_shape(case) -> None:
    doc = run_engine(case)
    assert set(doc) <= _keys(TriageDocument)
    assert _keys(TriageDocument) - set(doc) <= {
        k for k in _keys(TriageDocument) if k not in TriageDocument.__required_keys__
    }
    for key, td in (
        ("job", Job),
        ("triage", Triage),
        ("localization", Localization),
        ("root_cause", RootCause),
    ):
        assert set(doc[key]) <= _keys(td), (key, set(doc[key]) - _keys(td))
        assert td.__required_keys__ <= set(doc[key]), key
    assert all(a["status"] == "ok" for a in doc["analysis"]["analyzers"])
