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


# -- declarations ------------------------------------------------------------------

# helper modules whose fact reads belong to the analyzer that calls them
HELPERS = {"advice.py": "verdict.py"}
_FACT = re.compile(r"ctx\.facts\.(\w+)(\s*(?:=(?!=)|\.update\(|\.append\(|\[[^\]]*\]\s*=))?")


def _declared() -> dict[str, object]:
    from rankscope.analyzers import registered_analyzers

    return {f"{type(a).__module__.rsplit('.', 1)[-1]}.py": a for a in registered_analyzers()}


def test_analyzers_declare_the_facts_they_read_and_write() -> None:
    declared = _declared()
    for name, src in _sources().items():
        owner = declared.get(HELPERS.get(name, name))
        if owner is None:
            continue
        for m in _FACT.finditer(src):
            fact = f"facts.{m.group(1)}"
            if m.group(2):
                assert fact in owner.writes, (name, fact, "written, not declared")
            else:
                assert fact in owner.reads or fact in owner.writes, (name, fact, "read")


def test_every_fact_read_is_written_earlier() -> None:
    from rankscope.analyzers import registered_analyzers
    from rankscope.model import Facts

    fields = set(get_type_hints(Facts))
    analyzers = registered_analyzers()
    for a in analyzers:
        for r in a.reads:
            if not r.startswith("facts."):
                continue
            assert r.removeprefix("facts.") in fields, (a.name, r)
            writers = [b for b in analyzers if r in b.writes and b.order < a.order]
            assert writers, (a.name, r, "no analyzer of lower order writes it")


def test_a_section_cannot_get_a_second_writer() -> None:
    from rankscope.analyzers import register_analyzer

    class Rogue:
        name, phase, order = "rogue", "triage", 5
        reads: tuple[str, ...] = ()
        writes = ("doc.localization",)

        def run(self, ctx: object) -> None: ...

    with pytest.raises(ValueError, match=r"both write doc\.localization"):
        register_analyzer(Rogue())


# -- parsers declare their kinds --------------------------------------------------


def test_a_new_parser_is_detected_from_its_own_declaration() -> None:
    from rankscope import parsers
    from rankscope.detect import Recognizer
    from rankscope.model import ParseResult

    class GpuBurn:
        name = "gpu_burn"
        kinds = ("gpu_burn",)
        recognizers = (Recognizer("gpu_burn", 45, lambda h: h.text.startswith("GPU_BURN")),)

        def parse(self, stream, result: ParseResult, progress) -> None:
            result.facts["burned"] = True

    before = (dict(parsers._REGISTRY), list(parsers._RECOGNIZERS))
    try:
        parsers.register_parser(GpuBurn())
        assert parsers.detect_kind("burn.txt", b"GPU_BURN 100%\n") == "gpu_burn"
        assert "gpu_burn" in parsers.artifact_kinds()
        import io

        r = parsers.parse_artifact(io.BytesIO(b"GPU_BURN 100%\n"), name="burn.txt")
        assert (r.kind, r.parser, r.facts.get("burned")) == ("gpu_burn", "gpu_burn", True)
    finally:
        parsers._REGISTRY.clear()
        parsers._REGISTRY.update(before[0])
        parsers._RECOGNIZERS[:] = before[1]


def test_every_parser_and_analyzer_is_listed_in_the_docs() -> None:
    from rankscope.analyzers import registered_analyzers
    from rankscope.parsers import registered_parsers

    docs = (Path(__file__).resolve().parents[3] / "docs" / "analysis.md").read_text("utf-8")
    for name in sorted(set(registered_parsers().values())):
        assert f"`{name}`" in docs, f"parser {name} is missing from docs/analysis.md"
    for a in registered_analyzers():
        assert f"**{a.name}**" in docs or f"`{a.name}`" in docs, f"analyzer {a.name}"


def test_the_typed_view_reads_absent_and_partial_documents_as_empty() -> None:
    from rankscope.document import read_document

    for raw in (None, {}, {"triage": None, "findings": None}):
        view = read_document(raw)
        assert view.triage == {} and view.localization == {} and view.findings == []
        assert view.memory is None and view.memory_shape is None
    view = read_document({"triage": {"shape": "hang"}, "isolation": {"memory": {"shapes": {}}}})
    assert view.triage.get("shape") == "hang" and view.triage.get("category") is None
    assert view.memory_shape is None


def test_the_memory_shape_is_the_most_telling_one_any_rank_has() -> None:
    from rankscope.document import read_document

    doc = {"isolation": {"memory": {"shapes": {"flat": 63, "staircase": 1}, "ranks": []}}}
    assert read_document(doc).memory_shape == "staircase"
