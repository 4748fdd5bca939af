"""Find candidate lines in a block of bytes with one multi-pattern pass.

Hyperscan (block mode, one compiled database per process) when it is
importable and compiles; otherwise Python ``re`` over the same patterns,
which is slower but gives the same candidates (tests run both).
Set ``RANKSCOPE_SCANNER=re`` to force the fallback.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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


def _cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "rankscope"


def _hyperscan_db(patterns: Sequence[str]) -> Any:
    """The compiled prefilter, from the on-disk cache when this exact set was compiled before.

    Compiling takes ~0.1 s, a third of a small triage's run; loading a serialised
    database takes microseconds. The key covers the patterns and the library version;
    a cache entry that does not load (another CPU, a damaged file) is compiled again.
    A cache that cannot be written (read-only home) is simply not used.
    """
    import hyperscan

    key = hashlib.sha256(
        "\0".join([str(getattr(hyperscan, "__version__", "")), *patterns]).encode()
    ).hexdigest()[:32]
    path = _cache_dir() / f"prefilter-{key}.hsdb"
    with contextlib.suppress(OSError, hyperscan.error, TypeError, ValueError):
        db = hyperscan.loadb(path.read_bytes(), mode=hyperscan.HS_MODE_BLOCK)
        db.scratch = hyperscan.Scratch(db)  # compile() allocates one; a loaded db has none
        return db
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(
        expressions=[p.encode() for p in patterns],
        ids=list(range(len(patterns))),
        elements=len(patterns),
        flags=0,
    )
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(hyperscan.dumpb(db))
        os.replace(tmp, path)  # atomic: a concurrent reader sees all of it or nothing
    return db


class HyperscanScanner:
    name = "hyperscan"

    def __init__(self, patterns: Sequence[str] = PATTERNS) -> None:
        self._db = _hyperscan_db(patterns)

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
