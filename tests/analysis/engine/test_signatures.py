"""The signature catalogue: every signature fires on its own examples, through the same
prefilter the parser uses, and nothing in it is dead."""

from __future__ import annotations

import io

import pytest

from rankscope import parse_artifact
from rankscope.scan import HyperscanScanner, ReScanner
from rankscope.signatures import CATALOGUE, Signature
from rankscope.testing.corpus import CORPUS

SCANNERS = [ReScanner, HyperscanScanner]


@pytest.mark.parametrize("scanner", SCANNERS, ids=lambda s: s.name)
@pytest.mark.parametrize("sig", CATALOGUE, ids=lambda s: s.id)
def test_signature_fires_on_its_examples(sig: Signature, scanner: type) -> None:
    assert sig.examples, f"{sig.id} has no example line"
    sc = scanner()
    for ex in sig.examples:
        data = ("some routine line\n" + ex + "\nanother routine line\n").encode()
        hits = sc.line_hits(data)
        lines = {data[s:e].decode(): sigs for s, e, sigs in hits}
        assert ex in lines, f"{sig.id}: the prefilter does not nominate {ex!r}"
        assert sig in lines[ex], f"{sig.id}: its prefilter did not fire on {ex!r}"
        assert sig.rx.search(ex), f"{sig.id}: its regex does not read {ex!r}"


@pytest.mark.parametrize("sig", CATALOGUE, ids=lambda s: s.id)
def test_every_prefilter_pattern_of_a_signature_is_used(sig: Signature) -> None:
    import re

    for p in sig.prefilter:
        assert any(re.search(p, ex) for ex in sig.examples), (
            f"{sig.id}: prefilter {p!r} matches none of its examples (dead or untested)"
        )


def test_signature_ids_are_unique_and_fields_valid() -> None:
    ids = [s.id for s in CATALOGUE]
    assert len(ids) == len(set(ids))
    cats = {"OOM", "NETWORK", "NUMERICAL", "HARDWARE", "STORAGE_IO", "DATA", "SOFTWARE", "INFRA"}
    for s in CATALOGUE:
        assert s.category is None or s.category in cats, s.id
        assert s.shape in (None, "crash", "hang", "diverge", "slow"), s.id
        assert s.severity in ("fatal", "error", "warning"), s.id
        assert s.meaning and s.action, s.id


def test_examples_come_from_the_corpus() -> None:
    if not CORPUS.is_dir():
        pytest.skip("no corpus in this checkout")
    text = "\n".join(
        p.read_text(encoding="utf-8", errors="replace")
        for p in CORPUS.rglob("*")
        if p.is_file() and p.name != "case.toml"
    )
    missing = [(s.id, ex) for s in CATALOGUE for ex in s.examples if ex not in text]
    assert not missing, f"examples not found in any corpus log: {missing}"


@pytest.mark.parametrize("sig", CATALOGUE, ids=lambda s: s.id)
def test_a_parsed_example_is_an_event_naming_its_signature(sig: Signature) -> None:
    ex = sig.examples[0]
    r = parse_artifact(io.BytesIO((ex + "\n").encode()), name="train.log", kind="rank_log")
    assert [e.fields.get("sig") for e in r.events] == [sig.id], (sig.id, r.events)


def test_the_prefilter_is_valid_ripgrep_syntax(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """bench/engine hands the same pattern file to ripgrep: every pattern must compile there."""
    import shutil
    import subprocess

    from rankscope.patterns import write_pattern_file

    rg = shutil.which("rg")
    if rg is None:
        pytest.skip("ripgrep not installed")
    pat = write_pattern_file(tmp_path / "patterns.txt")
    sample = tmp_path / "sample.log"
    sample.write_text("\n".join(ex for s in CATALOGUE for ex in s.examples) + "\n")
    out = subprocess.run([rg, "-c", "-f", str(pat), str(sample)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-500:]
    assert int(out.stdout.strip()) >= len(CATALOGUE)
