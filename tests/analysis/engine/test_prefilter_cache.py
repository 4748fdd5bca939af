"""The compiled prefilter is cached on disk: the same candidates, and a bad entry is rebuilt."""

from __future__ import annotations

import pytest

from rankscope import scan

pytest.importorskip("hyperscan")

BLOCK = (
    b"step 1 loss 2.0\n"
    b"[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    b"step 2 loss 1.9\n"
    b"NCCL WARN NET/IB : Got completion from peer with error 12\n"
)


def test_a_cached_prefilter_finds_what_a_fresh_compile_finds(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    fresh = scan.HyperscanScanner()
    (entry,) = (tmp_path / "rankscope").iterdir()
    cached = scan.HyperscanScanner()
    assert cached.line_spans(BLOCK) == fresh.line_spans(BLOCK) == scan.ReScanner().line_spans(BLOCK)
    assert len(fresh.line_spans(BLOCK)) == 2
    # a damaged entry (truncated copy, another machine's CPU) is compiled again
    entry.write_bytes(entry.read_bytes()[:100])
    assert scan.HyperscanScanner().line_spans(BLOCK) == fresh.line_spans(BLOCK)
    assert entry.stat().st_size > 100


def test_an_unwritable_cache_only_costs_the_compile(tmp_path, monkeypatch):
    blocked = tmp_path / "file-not-dir"
    blocked.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    assert len(scan.HyperscanScanner().line_spans(BLOCK)) == 2


HEAD = (
    "[rank0]: NeMo trainer \u00e9t\u00e9 started; torch.distributed ready\n"
    "#  out-of-place                       in-place\n"
    "#       size    count   type   redop  root  time  algbw  busbw\n"
).encode() + b"\xe2\x82_perf -b 8\n\xff# Avg bus bandwidth    : 12.3\n"


def test_a_literal_set_answers_as_the_in_tests_do(tmp_path, monkeypatch):
    # the recognisers' and head readers' one-pass literal test: same answers with and
    # without Hyperscan, on text and on the raw bytes (invalid UTF-8 included)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    lits = ["NeMo", "torch.distributed", "out-of-place", "busbw", "_perf -b", "# nThread "]
    lits += ["# Avg bus bandwidth", "megatron"]
    text = HEAD.decode("utf-8", errors="replace")
    expected = {lit for lit in lits if lit in text}
    assert expected == set(lits) - {"# nThread ", "megatron"}
    fast = scan.LiteralSet(lits)
    assert fast.present(HEAD) == fast.present(text) == expected
    monkeypatch.setenv("RANKSCOPE_SCANNER", "re")
    plain = scan.LiteralSet(lits)
    assert plain.present(HEAD) == plain.present(text) == expected
    assert fast.present(b"") == plain.present("") == frozenset()
