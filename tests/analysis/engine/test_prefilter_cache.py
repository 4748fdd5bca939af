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
