"""Readers that see every chunk of a text log beside the prefilter-driven classification.

They look for frequent lines the prefilter is built to skip (iteration lines, start-up
banners). With Hyperscan their literals are in the prefilter's database as their own ids,
so the text parser's one pass finds them (iteration lines only while they fit the read
budget); otherwise one more multi-literal pass over the chunk (Hyperscan, or Python
``re``) looks for them here. They write their own results at the end: ``result.metrics``
(``iterations.py``) and ``result.facts["banners"]`` (``banners.py``). The text parser
calls ``feed`` once per chunk and ``finish`` once per file.
"""

from __future__ import annotations

import os
import re
from itertools import pairwise
from typing import Any

from .._lazy import lazy_compile
from ..model import ParseResult
from ..scan import HyperscanScanner, ReScanner
from . import banners, iterations
from .banners import BannerReader
from .iterations import IterationReader
from .newlines import NewlineCounter

# NCCL's choice of inter-node transport, read with the banner pass (no extra scan):
# (literal, regex, fact) — the first line of each fact in a file is kept
TRANSPORT: tuple[tuple[bytes, re.Pattern[str], str], ...] = (
    (b"Using network ", lazy_compile(r"NCCL INFO Using network (?P<v>\w+)"), "net"),
    (
        b"NET/IB : No device",
        lazy_compile(r"NCCL INFO NET/IB\s*:\s*No device found"),
        "no_ib_device",
    ),
    (
        b"libibverbs",
        lazy_compile(r"NCCL WARN .*(?:Failed to open|Could not find) libibverbs"),
        "no_ibverbs",
    ),
    (
        b"NCCL_IB_HCA set",
        lazy_compile(r"NCCL INFO NCCL_IB_HCA set(?: by environment)? to \S"),
        "ib_hca",
    ),
)
TRANSPORT_LITERALS = tuple(lit for lit, _, _ in TRANSPORT)
_TRANSPORT_STR = tuple((lit.decode(), rx, fact) for lit, rx, fact in TRANSPORT)
_SCANNERS: dict[str, ReScanner | HyperscanScanner] = {}


def banner_patterns() -> list[str]:
    """The banner reader's literals (start-up banners, NCCL transport) as patterns."""
    return [re.escape(x.decode()) for x in banners.LITERALS + TRANSPORT_LITERALS]


def iteration_patterns() -> list[str]:
    """The iteration reader's literals as patterns."""
    return [re.escape(x.decode()) for x in iterations.LITERALS]


NOT_SCANNED: Any = object()  # feed(): the caller did not look for iteration lines


def side_scanner(which: str) -> ReScanner | HyperscanScanner:
    """The process-wide scanner for one reader's literals ("iterations" or "banners")."""
    got = _SCANNERS.get(which)
    if got is None:
        lits = (
            iterations.LITERALS if which == "iterations" else banners.LITERALS + TRANSPORT_LITERALS
        )
        pats = [re.escape(x.decode()) for x in lits]
        if os.environ.get("RANKSCOPE_SCANNER", "").lower() == "re":
            got = ReScanner(pats)
        else:
            try:
                got = HyperscanScanner(pats)
            except Exception:  # ImportError, CPU without SSSE3, compile failure
                got = ReScanner(pats)
        _SCANNERS[which] = got
    return got


def _numbered(
    data: bytes, spans: list[tuple[int, int]], first_line: int, newlines: NewlineCounter
) -> list[tuple[bytes, int]]:
    """(raw line, 1-based number) of each span."""
    if not spans:
        return []
    starts = [start for start, _ in spans]
    if starts == sorted(starts):
        before = newlines.before_each(starts)
    else:
        before = [newlines.before(s) for s in starts]
    return [(data[a:b], first_line + n + 1) for (a, b), n in zip(spans, before, strict=True)]


class TransportReader:
    """The first line of each NCCL transport fact of a file → ``facts["nccl_transport"]``:
    ``{fact: [value, line, text]}`` (``net``: the network NCCL chose, Socket/IB/…;
    ``no_ib_device``, ``no_ibverbs``: the RDMA stack missing; ``ib_hca``: IB was asked for)."""

    def __init__(self) -> None:
        self.facts: dict[str, list[Any]] = {}

    def take(self, raw: str, line: int) -> None:
        for lit, rx, fact in _TRANSPORT_STR:
            if fact in self.facts or lit not in raw:
                continue
            m = rx.search(raw)
            if m:
                value = m.groupdict().get("v") or "yes"
                self.facts[fact] = [value, line, raw[:500]]

    def finish(self, result: ParseResult) -> None:
        if self.facts:
            result.facts["nccl_transport"] = self.facts


class SideReaders:
    def __init__(self) -> None:
        self.iterations = IterationReader()
        self.banners = BannerReader()
        self.transport = TransportReader()
        self.dense = False  # the last chunk had more iteration lines than the budget

    def iteration_limit(self, nbytes: int) -> int | None:
        """How many iteration lines the next ``nbytes`` of log may have for all of them
        to be read — or None when the last chunk had more (look for them here, by
        sampling, rather than in the caller's full pass)."""
        if self.dense:
            return None
        return int(self.iterations.allowance + nbytes / iterations.BYTES_PER_LINE)

    def feed(
        self,
        data: bytes | bytearray,
        size: int,
        first_line: int,
        banner_spans: list[tuple[int, int]] | None = None,
        iteration_spans: list[tuple[int, int]] | None = NOT_SCANNED,
        *,
        newlines: NewlineCounter,
    ) -> None:
        """``data[:size]``: whole lines — the chunk, read in place (the caller's parse
        buffer: no copy); its first line is number ``first_line + 1``.
        ``banner_spans``: the banner literals' lines when the prefilter's pass found them
        (``banner_patterns`` in its database); else they are scanned for here.
        ``iteration_spans``: likewise the iteration lines (``iteration_patterns``), all of
        them within ``iteration_limit``, or None when there were more.
        ``newlines``: the block's counter (the prefilter's pass has counted up to the lines
        it found; the budget picks which iteration lines to read before any is numbered)."""
        spans = self._iteration_spans(data, size, iteration_spans)
        self.iterations.take(_numbered(data, spans, first_line, newlines))
        if banner_spans is None:
            with memoryview(data) as view:
                banner_spans = side_scanner("banners").line_spans(view[:size])
        for raw, ln in _numbered(data, banner_spans, first_line, newlines):
            text = raw.decode("utf-8", errors="replace").rstrip("\r")
            self.banners.take(text, ln)
            self.transport.take(text, ln)

    def _iteration_spans(
        self,
        data: bytes | bytearray,
        size: int,
        found: list[tuple[int, int]] | None = NOT_SCANNED,
    ) -> list[tuple[int, int]]:
        """The iteration lines of a chunk (``data[:size]``) that the work budget lets us
        read. The scan stops as soon as the chunk has shown more candidates than the budget
        allows; then the chunk is cut into as many line-aligned segments as the budget keeps
        and the first candidate of each is read (each segment's scan stops at its first
        match) — the series stays evenly spaced and the scan's cost follows what is read,
        not the log's size or how many of its lines are iteration lines."""
        scanner = side_scanner("iterations")
        reader = self.iterations
        want = reader.allowance + size / iterations.BYTES_PER_LINE
        if found is NOT_SCANNED:
            spans, complete = scanner.lines_upto(data, int(want), size)
        else:  # the caller's pass: all of them, or None when over the budget
            spans, complete = found or [], found is not None
        self.dense = not complete
        if complete:
            return reader.pick(spans, size)  # all of them fit: pick keeps every one
        reader.allowance = want
        reader.sampled = True
        n = max(1, int(want))
        cuts = [data.rfind(b"\n", 0, k * size // n) + 1 for k in range(n)] + [size]
        out = scanner.first_lines(data, [(lo, hi) for lo, hi in pairwise(cuts) if hi > lo])
        reader.allowance -= len(out)
        return out

    def finish(self, result: ParseResult, file_rank: int | None) -> None:
        self.iterations.finish(result, file_rank)
        self.banners.finish(result, file_rank)
        self.transport.finish(result)
