"""Find candidate lines in a block of bytes with one multi-pattern pass.

Hyperscan (block mode, one compiled database per process) when it is
importable and compiles; otherwise Python ``re`` over the same patterns,
which is slower but gives the same candidates (tests run both).
Set ``RANKSCOPE_SCANNER=re`` to force the fallback.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from .patterns import PATTERNS


class ReScanner:
    name = "re"

    def __init__(self, patterns: Sequence[str] = PATTERNS) -> None:
        self._rx = re.compile("|".join(f"(?:{p})" for p in patterns).encode())

    def line_spans(self, data: bytes | memoryview) -> list[tuple[int, int]]:
        buf = data.obj if isinstance(data, memoryview) else data  # find/rfind need the owner
        n = len(data)
        spans: list[tuple[int, int]] = []
        pos = 0
        search = self._rx.search
        while pos < n:
            m = search(buf, pos, n)
            if not m:
                break
            start = buf.rfind(b"\n", 0, m.start()) + 1
            end = buf.find(b"\n", m.end(), n)
            if end < 0:
                end = n
            spans.append((start, end))
            pos = end + 1
        return spans


class HyperscanScanner:
    name = "hyperscan"

    def __init__(self, patterns: Sequence[str] = PATTERNS) -> None:
        import hyperscan

        self._db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        self._db.compile(
            expressions=[p.encode() for p in patterns],
            ids=list(range(len(patterns))),
            elements=len(patterns),
            flags=0,
        )

    def line_spans(self, data: bytes | memoryview) -> list[tuple[int, int]]:
        buf = data.obj if isinstance(data, memoryview) else data  # find/rfind need the owner
        ends: list[int] = []
        append = ends.append

        def on_match(_id: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
            append(end)

        self._db.scan(data, match_event_handler=on_match)
        if not ends:
            return []
        ends.sort()
        spans: list[tuple[int, int]] = []
        n = len(data)
        last_end = -1
        for e in ends:
            if e <= last_end:
                continue  # another match on a line we already have
            start = buf.rfind(b"\n", 0, e) + 1
            end = buf.find(b"\n", e, n)
            if end < 0:
                end = n
            spans.append((start, end))
            last_end = end
        return spans


_SCANNER: ReScanner | HyperscanScanner | None = None


def get_scanner() -> ReScanner | HyperscanScanner:
    """The process-wide scanner (compiled once; safe to call after fork)."""
    global _SCANNER
    if _SCANNER is None:
        if os.environ.get("RANKSCOPE_SCANNER", "").lower() == "re":
            _SCANNER = ReScanner()
        else:
            try:
                _SCANNER = HyperscanScanner()
            except Exception:  # ImportError, CPU without SSSE3, compile failure
                _SCANNER = ReScanner()
    return _SCANNER


def set_scanner(name: str) -> None:
    """Force a scanner ("hyperscan" or "re"); used by tests and the benchmark."""
    global _SCANNER
    _SCANNER = HyperscanScanner() if name == "hyperscan" else ReScanner()
