"""The text-log scan reads in chunks into one reused buffer: what it finds must not depend on
chunk boundaries, on how the stream hands out its bytes, or on the file parsed before."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from rankscope import parse_artifact
from rankscope.cli import parse_paths
from rankscope.parsers import textlog
from rankscope.scan import get_scanner, set_scanner

NOISE = b"[rank3]: node-1:4100:4117 [3] NCCL INFO Channel 00/0 : 3[3] -> 4[4] via P2P/IPC\n"
WATCHDOG = (
    b"[rank3]:[E1121 10:22:33.123456 ProcessGroupNCCL.cpp:1794] [PG ID 0 PG GUID 0(default_pg) "
    b"Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, "
    b"OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600001 "
    b"milliseconds before timing out.\n"
)
OOM = b"[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"


def _log_across_chunks() -> tuple[bytes, list[int]]:
    """~2.5 chunks of routine lines with events at the start, across each chunk boundary, and
    as the last line without a newline; returns the bytes and the events' line numbers."""
    parts: list[bytes] = [WATCHDOG]
    lines = [1]
    size, n = len(WATCHDOG), 1
    for boundary in (textlog.CHUNK, 2 * textlog.CHUNK):
        k = (boundary - size - len(OOM) // 2) // len(NOISE)
        parts.append(NOISE * k)
        size, n = size + k * len(NOISE), n + k
        parts.append(OOM)  # straddles the boundary
        size, n = size + len(OOM), n + 1
        lines.append(n)
    parts.append(NOISE * 1000 + OOM.rstrip(b"\n"))
    lines.append(n + 1001)
    return b"".join(parts), lines


class _Trickle(io.RawIOBase):
    """A stream that hands out at most 4,099 bytes per read and has no readinto."""

    def __init__(self, data: bytes) -> None:
        self._f = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        return self._f.read(min(size, 4099) if size and size > 0 else 4099)

    def __getattribute__(self, name: str):  # no readinto: the copying path is used
        if name == "readinto":
            raise AttributeError(name)
        return super().__getattribute__(name)


def _summary(r) -> tuple:
    return (
        r.lines,
        r.bytes,
        [(e.kind, e.line, e.rank, e.text) for e in r.events],
        r.ranks,
        r.error,
    )


@pytest.mark.parametrize("scanner", ["hyperscan", "re"])
def test_events_across_chunk_boundaries_keep_their_line_numbers(scanner: str) -> None:
    data, want = _log_across_chunks()
    before = get_scanner().name
    set_scanner(scanner)
    try:
        r = parse_artifact(io.BytesIO(data), name="node-1.log")
    finally:
        set_scanner(before)
    assert r.error is None
    assert r.lines == data.count(b"\n") + 1
    assert [e.line for e in r.events] == want
    assert [e.kind for e in r.events] == ["watchdog_timeout", "cuda_oom", "cuda_oom", "cuda_oom"]
    for line_no, off in r.line_index:  # the sparse index points at line starts
        assert data.count(b"\n", 0, off) == line_no - 1


def test_short_reads_and_a_reused_buffer_change_nothing() -> None:
    data, _ = _log_across_chunks()
    fresh = _summary(parse_artifact(io.BytesIO(data), name="node-1.log"))
    trickled = _summary(parse_artifact(_Trickle(data), name="node-1.log"))  # type: ignore[arg-type]
    assert trickled == fresh
    # a long file leaves its bytes in the shared buffer; a short one parsed next must not see them
    parse_artifact(io.BytesIO(data), name="node-2.log")
    short = WATCHDOG + NOISE * 3
    after = _summary(parse_artifact(io.BytesIO(short), name="node-1.log"))
    textlog._BUFFERS.clear()
    alone = _summary(parse_artifact(io.BytesIO(short), name="node-1.log"))
    assert after == alone
    assert after[0] == 4 and [e[1] for e in after[2]] == [1]


def test_parallel_parse_returns_files_in_order_whatever_their_sizes(tmp_path: Path) -> None:
    for i, size in enumerate([10, 3000, 50, 20000, 1, 700]):
        (tmp_path / f"node-{i}.log").write_bytes(NOISE * size + OOM)
    serial = parse_paths([tmp_path], jobs=1)
    parallel = parse_paths([tmp_path], jobs=2)
    assert [r.name for r in parallel] == [r.name for r in serial]
    assert [_summary(r) for r in parallel] == [_summary(r) for r in serial]


def _settled(path: Path) -> Path:
    """A file last written long enough ago to be mapped (``textlog.STILL_WRITTEN_S``)."""
    old = path.stat().st_mtime - 3600
    os.utime(path, (old, old))
    return path


def _parse_file(path: Path):
    with open(path, "rb") as f:
        return parse_artifact(f, name=path.name)


@pytest.mark.parametrize("scanner", ["hyperscan", "re"])
def test_a_settled_file_is_mapped_and_read_the_same(
    tmp_path: Path, scanner: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, want = _log_across_chunks()
    path = tmp_path / "node-1.log"
    path.write_bytes(data)
    _settled(path)
    mapped: list[bool] = []
    real = textlog._map_whole

    def spy(stream):
        got = real(stream)
        mapped.append(got is not None)
        return got

    monkeypatch.setattr(textlog, "_map_whole", spy)
    before = get_scanner().name
    set_scanner(scanner)
    try:
        r = _parse_file(path)
    finally:
        set_scanner(before)
    assert mapped == [True]
    assert _summary(r) == _summary(parse_artifact(io.BytesIO(data), name="node-1.log"))
    assert [e.line for e in r.events] == want
    for line_no, off in r.line_index:  # the sparse index points at line starts
        assert data.count(b"\n", 0, off) == line_no - 1


def test_a_file_written_just_now_or_small_is_read_not_mapped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, _ = _log_across_chunks()
    fresh = tmp_path / "node-1.log"
    fresh.write_bytes(data)  # a live log may still grow or be truncated by a rotation
    small = tmp_path / "node-2.log"
    small.write_bytes(WATCHDOG + NOISE * 3)
    _settled(small)
    mapped: list[bool] = []
    real = textlog._map_whole
    monkeypatch.setattr(textlog, "_map_whole", lambda s: mapped.append(real(s) is not None))
    for p in (fresh, small):
        r = _parse_file(p)
        assert r.error is None and r.events
    assert mapped == [False, False]


def _log_across_pieces() -> tuple[bytes, list[int]]:
    """Events straddling the prefilter's piece boundaries (``scan.PIECE``), on a piece's
    first and last line, and one line longer than a piece holding an event at its end;
    returns the bytes and the events' line numbers."""
    from rankscope.scan import PIECE

    parts: list[bytes] = []
    lines: list[int] = []
    size = n = 0
    for boundary in (PIECE, 2 * PIECE, 3 * PIECE + 1):
        k = (boundary - size - len(OOM) // 2) // len(NOISE)
        parts.append(NOISE * k)
        size, n = size + k * len(NOISE), n + k
        parts.append(OOM)
        size, n = size + len(OOM), n + 1
        lines.append(n)
    long_line = (
        b"[rank3]: " + b"x" * (PIECE + 999) + b" torch.OutOfMemoryError: CUDA out of memory.\n"
    )
    parts += [NOISE * 7, long_line, WATCHDOG, NOISE * 3000]
    lines += [n + 8, n + 9]
    return b"".join(parts), lines


@pytest.mark.parametrize("how", ["read", "mapped"])
def test_events_across_the_prefilters_pieces_keep_their_lines(tmp_path: Path, how: str) -> None:
    # the prefilter scans a block in pieces and counts each piece's newlines as it goes:
    # every event found, on its own line, and the sparse index right
    data, want = _log_across_pieces()
    path = tmp_path / "node-1.log"
    path.write_bytes(data)
    if how == "mapped":
        _settled(path)
    before = get_scanner().name
    set_scanner("hyperscan")
    try:
        r = _parse_file(path)
    finally:
        set_scanner(before)
    assert r.facts["scanner"] == "hyperscan"
    assert r.lines == data.count(b"\n")  # the last line ends with one
    assert [e.line for e in r.events] == want
    assert [e.kind for e in r.events] == ["cuda_oom"] * 4 + ["watchdog_timeout"]
    for line_no, off in r.line_index:
        assert data.count(b"\n", 0, off) == line_no - 1


def test_threads_parsing_at_once_each_keep_their_line_numbers(tmp_path: Path) -> None:
    # the web server parses in several threads: each counts its pieces' newlines in a mask
    # of its own, so files of different layouts parsed at the same time keep their lines
    from concurrent.futures import ThreadPoolExecutor

    data, want = _log_across_pieces()
    paths, wants = [], []
    for i in range(6):
        lead = NOISE * (i * 97)
        path = tmp_path / f"node-{i}.log"
        path.write_bytes(lead + data)
        _settled(path)
        paths.append(path)
        wants.append([n + i * 97 for n in want])
    before = get_scanner().name
    set_scanner("hyperscan")
    try:
        with ThreadPoolExecutor(6) as pool:
            for _ in range(3):
                got = list(pool.map(_parse_file, paths))
                assert [[e.line for e in r.events] for r in got] == wants
    finally:
        set_scanner(before)


def test_prefilter_patterns_match_within_one_line() -> None:
    # the prefilter scans line-aligned pieces and reports the line a match ends on: a
    # pattern that could take a newline (a negated class without \n, \s, \W, \D) could match
    # across lines — found or not depending on where a piece ends
    import re

    from rankscope.parsers.sidecar import banner_patterns, iteration_patterns
    from rankscope.patterns import PATTERNS

    negated = re.compile(r"(?<!\\)\[\^((?:\\.|[^\]])*)\]")
    for p in [*PATTERNS, *banner_patterns(), *iteration_patterns()]:
        for m in negated.finditer(p):
            assert "\\n" in m.group(1), f"{p!r}: {m.group(0)} takes a newline"
        assert not re.search(r"(?<!\\)\\[sWD]", p), f"{p!r} may take a newline"
