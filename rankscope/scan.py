"""Find candidate lines in a block of bytes with one multi-pattern pass.

Hyperscan (block mode, one compiled database per process) when it is
importable and compiles; otherwise Python ``re`` over the same patterns,
which is slower but gives the same candidates (tests run both).
Set ``RANKSCOPE_SCANNER=re`` to force the fallback.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .patterns import HYPERSCAN_TRIGGERS, PATTERN_SIG, PATTERNS
from .signatures import Signature

if TYPE_CHECKING:
    from .parsers.newlines import NewlineCounter

try:  # CPython's own SHA-256, as the standard library's ``random`` imports it: hashlib
    from _sha2 import sha256  # loads OpenSSL first (~2 ms of every run's start-up)
except ImportError:  # another Python
    from hashlib import sha256

#: what the prefilter scans at a time (line-aligned): a piece stays in the core's cache
#: from its scan to the count of its newlines (``HyperscanScanner._scan``). Prefilter
#: patterns match within one line (``tests``: no negated class takes a newline), so no
#: match is lost at a piece's edge.
PIECE = 128 << 10

# (line start, line end, signatures that fired on the line — catalogue order, may be empty)
Hit = tuple[int, int, tuple[Signature, ...]]
_NO_SIGS: tuple[Signature, ...] = ()


def _sigs(ids: list[int]) -> tuple[Signature, ...]:
    out: list[Signature] = []
    for i in sorted(set(ids)):
        s = PATTERN_SIG[i] if i < len(PATTERN_SIG) else None
        if s is not None and s not in out:
            out.append(s)
    return tuple(out)


class ReScanner:
    name = "re"

    def __init__(self, patterns: Sequence[str] = PATTERNS) -> None:
        self._rx = re.compile("|".join(f"(?:{p})" for p in patterns).encode())
        # only for telling which signatures fired on a candidate line (the fallback's cost)
        self._sig_rx = [
            (i, re.compile(p.encode()))
            for i, p in enumerate(patterns)
            if i < len(PATTERN_SIG) and PATTERN_SIG[i] is not None
        ]

    def line_hits(self, data: bytes | memoryview) -> list[Hit]:
        buf = data.obj if isinstance(data, memoryview) else data
        out: list[Hit] = []
        for st, en in self.line_spans(data):
            line = buf[st:en]
            ids = [i for i, rx in self._sig_rx if rx.search(line)]
            out.append((st, en, _sigs(ids) if ids else _NO_SIGS))
        return out

    def lines_upto(
        self, data: bytes | bytearray, limit: int, size: int | None = None
    ) -> tuple[list[tuple[int, int]], bool]:
        """The candidate lines of ``data[:size]``, stopping after ``limit + 1`` of them; the
        flag tells whether the list is complete (at most ``limit`` lines)."""
        spans: list[tuple[int, int]] = []
        pos, n, search = 0, len(data) if size is None else size, self._rx.search
        while pos < n:
            m = search(data, pos, n)
            if not m:
                return spans, True
            start = data.rfind(b"\n", 0, m.start()) + 1
            end = data.find(b"\n", m.end(), n)
            end = n if end < 0 else end
            spans.append((start, end))
            if len(spans) > limit:
                return spans, False
            pos = end + 1
        return spans, len(spans) <= limit

    def first_line(self, data: bytes, lo: int, hi: int) -> tuple[int, int] | None:
        """The first candidate line of ``data[lo:hi]`` (``lo`` and ``hi`` at line starts)."""
        m = self._rx.search(data, lo, hi)
        if not m:
            return None
        end = data.find(b"\n", m.end(), hi)
        return data.rfind(b"\n", lo, m.start()) + 1 or lo, hi if end < 0 else end

    def first_lines(self, data: bytes, bounds: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
        """``first_line`` of each ``(lo, hi)`` of ``bounds``, those that have one, in order."""
        out = []
        for lo, hi in bounds:
            got = self.first_line(data, lo, hi)
            if got is not None:
                out.append(got)
        return out

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


_PER_THREAD = threading.local()


def _scratch(db: Any) -> Any:
    """This thread's Hyperscan scratch for ``db``. A scratch serves one scan at a time, and
    the web server detects kinds and reads heads from many threads at once (gunicorn's
    gthread workers): a shared one fails with ``ScratchInUseError``."""
    mine: dict[int, tuple[Any, Any]] = _PER_THREAD.__dict__.setdefault("scratch", {})
    got = mine.get(id(db))
    if got is None or got[0] is not db:
        import hyperscan

        got = mine[id(db)] = (db, hyperscan.Scratch(db))
    return got[1]


def _cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "rankscope"


def _hyperscan_db(patterns: Sequence[str], flags: int = 0) -> Any:
    """The compiled prefilter, from the on-disk cache when this exact set was compiled before.

    Compiling takes ~0.1 s, a third of a small triage's run; loading a serialised
    database takes microseconds. The key covers the patterns and the library version;
    a cache entry that does not load (another CPU, a damaged file) is compiled again.
    A cache that cannot be written (read-only home) is simply not used.
    """
    import hyperscan

    version = str(getattr(hyperscan, "__version__", ""))
    parts = [version, *patterns] if not flags else [version, f"flags={flags}", *patterns]
    key = sha256("\0".join(parts).encode()).hexdigest()[:32]
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
        flags=flags,
    )
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(hyperscan.dumpb(db))
        os.replace(tmp, path)  # atomic: a concurrent reader sees all of it or nothing
    return db


class HyperscanScanner:
    name = "hyperscan"

    def __init__(
        self,
        patterns: Sequence[str] = PATTERNS,
        side: Sequence[str] = (),
        budgeted: Sequence[str] = (),
    ) -> None:
        # side patterns ride along in the same database (ids after the prefilter's):
        # ``line_hits_side`` tells their lines apart, ``line_hits`` leaves them out.
        # ``budgeted`` patterns (iteration lines) are in a second database with all the
        # others, used by ``line_hits_budget``
        # a pattern with a trigger (``HYPERSCAN_TRIGGERS``) is compiled as the trigger and
        # checked as itself on the lines the trigger hits (``_lines``)
        compiled = [HYPERSCAN_TRIGGERS.get(p, p) for p in patterns]
        self._confirm: dict[int, re.Pattern[bytes]] = {
            i: re.compile(p.encode()) for i, p in enumerate(patterns) if p in HYPERSCAN_TRIGGERS
        }
        self._db = _hyperscan_db([*compiled, *side])
        self._db_all = _hyperscan_db([*compiled, *side, *budgeted]) if budgeted else None
        self._n_main = len(patterns)
        self._n_side = len(patterns) + len(side)
        self.side = tuple(side)
        self.budgeted = tuple(budgeted)

    def line_spans(self, data: bytes | memoryview) -> list[tuple[int, int]]:
        return [(s, e) for s, e, _ in self.line_hits(data)]

    def lines_upto(
        self, data: bytes | bytearray, limit: int, size: int | None = None
    ) -> tuple[list[tuple[int, int]], bool]:
        """The candidate lines of ``data[:size]``, the scan stopped as soon as ``limit + 1``
        were found (a log made of candidate lines costs ``limit`` callbacks, not one per
        line); the flag tells whether the list is complete (at most ``limit`` lines)."""
        assert not self._confirm, "the side readers' literals have no triggers"
        spans: list[tuple[int, int]] = []
        n = len(data) if size is None else size
        append, find, rfind = spans.append, data.find, data.rfind
        line_end = -1

        def on_match(_id: int, _start: int, end: int, _flags: int, _ctx: object) -> bool:
            nonlocal line_end
            if end <= line_end:
                return False  # another match on the line we already have
            line_end = find(b"\n", end, n)
            if line_end < 0:
                line_end = n
            append((rfind(b"\n", 0, end) + 1, line_end))
            return len(spans) > limit  # one line more than the budget: stop, not complete

        try:
            with memoryview(data) as view:
                self._db.scan(view[:n], match_event_handler=on_match, scratch=_scratch(self._db))
        except _terminated():
            return spans, False
        return spans, len(spans) <= limit

    def first_line(self, data: bytes, lo: int, hi: int) -> tuple[int, int] | None:
        """The first candidate line of ``data[lo:hi]`` (``lo`` and ``hi`` at line starts);
        the scan stops at the first match."""
        assert not self._confirm, "the side readers' literals have no triggers"
        got: list[int] = []

        def on_match(_id: int, _start: int, end: int, _flags: int, _ctx: object) -> bool:
            got.append(end)
            return True

        try:
            self._db.scan(
                memoryview(data)[lo:hi], match_event_handler=on_match, scratch=_scratch(self._db)
            )
        except _terminated():
            pass
        if not got:
            return None
        at = lo + got[0]
        end = data.find(b"\n", at, hi)
        return data.rfind(b"\n", lo, at) + 1 or lo, hi if end < 0 else end

    def first_lines(self, data: bytes, bounds: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
        """``first_line`` of each ``(lo, hi)`` of ``bounds``, those that have one, in order,
        for patterns that match within a line and do not look at its end (literals: the
        side readers'). In a log made of candidate lines the answer is nearly always the
        segment's first line: that line alone is scanned, to its end (no stop, hence no
        ``ScanTerminated`` raised and caught: ~2 µs less a segment); a segment whose first
        line has no match is scanned as ``first_line`` does."""
        assert not self._confirm, "the side readers' literals have no triggers"
        view = memoryview(data)
        scan, scratch, find = self._db.scan, _scratch(self._db), data.find
        hit = False

        def on_match(_id: int, _start: int, _end: int, _flags: int, _ctx: object) -> bool:
            nonlocal hit
            hit = True
            return False

        out: list[tuple[int, int]] = []
        for lo, hi in bounds:
            nl = find(b"\n", lo, hi)
            if nl < 0:
                nl = hi
            if nl > lo:
                hit = False
                scan(view[lo:nl], match_event_handler=on_match, scratch=scratch)
                if hit:
                    out.append((lo, nl))
                    continue
            got = self.first_line(data, lo, hi)
            if got is not None:
                out.append(got)
        return out

    def line_hits(self, data: bytes | memoryview) -> list[Hit]:
        return self.line_hits_side(data)[0]

    def line_hits_budget(
        self, data: bytes | memoryview, limit: int, newlines: NewlineCounter | None = None
    ) -> tuple[list[Hit], list[tuple[int, int]], list[tuple[int, int]] | None]:
        """One pass for the prefilter, the side patterns and the budgeted ones: the
        candidate lines, the side lines, and the budgeted lines — or None when there are
        more than ``limit`` of them (then the scan stops there and the chunk is scanned
        again without the budgeted patterns: a log made of iteration lines pays ``limit``
        callbacks and a short second pass, not one callback per line). ``newlines`` (the
        chunk's counter) is fed each piece of the pass (``_scan``)."""
        if self._db_all is None:
            return (*self.line_hits_side(data, newlines), None)
        buf = data.obj if isinstance(data, memoryview) else data
        n, find, n_side = len(data), buf.find, self._n_side
        count, line_end = 0, -1

        def stop(id_: int, end: int) -> bool:
            nonlocal count, line_end
            if id_ >= n_side and end > line_end:  # a budgeted pattern on a new line
                line_end = find(b"\n", end, n)
                if line_end < 0:
                    line_end = n
                count += 1
                return count > limit
            return False

        try:
            return self._scan(self._db_all, data, newlines, stop)
        except _terminated():
            if newlines is not None:
                newlines.reset()
            return (*self.line_hits_side(data, newlines), None)

    def line_hits_side(
        self, data: bytes | memoryview, newlines: NewlineCounter | None = None
    ) -> tuple[list[Hit], list[tuple[int, int]]]:
        """The prefilter's candidate lines and, from the same pass, the lines where one of
        the side literals (``side=``) occurs — ``(start, end)`` each, in file order."""
        hits, side, _ = self._scan(self._db, data, newlines)
        return hits, side

    def _scan(
        self,
        db: Any,
        data: bytes | memoryview,
        newlines: NewlineCounter | None,
        stop: Callable[[int, int], bool] | None = None,
    ) -> tuple[list[Hit], list[tuple[int, int]], list[tuple[int, int]]]:
        """Scan ``data`` (its buffer from offset 0) with ``db``, piece by piece: line-aligned
        pieces of about ``PIECE`` bytes (no match crosses a line, so none crosses a piece).
        Each piece's newlines are counted into ``newlines`` right after its scan, up to the
        start of each line it matched, while the piece is still in the core's cache: over
        a whole 6 MB log, the scan and then the count each went out to memory (and the
        scan itself is faster on pieces that stay in the cache). ``stop(id, end)`` may end
        the scan (``ScanTerminated``)."""
        buf = data.obj if isinstance(data, memoryview) else data  # find/rfind need the owner
        view = data if isinstance(data, memoryview) else memoryview(data)
        n = len(data)
        scan, scratch, rfind, find = db.scan, _scratch(db), buf.rfind, buf.find
        hits: list[Hit] = []
        side: list[tuple[int, int]] = []
        budget: list[tuple[int, int]] = []
        ends: list[tuple[int, int]] = []
        append = ends.append
        base = 0

        def on_match(id_: int, _start: int, end: int, _flags: int, _ctx: object) -> bool:
            append((base + end, id_))
            return stop is not None and stop(id_, base + end)

        while base < n:
            cut = n if n - base <= PIECE else rfind(b"\n", base, base + PIECE) + 1
            if cut <= base:  # a line longer than a piece: the piece ends with it
                nl = find(b"\n", base + PIECE, n)
                cut = n if nl < 0 else nl + 1
            scan(view[base:cut], match_event_handler=on_match, scratch=scratch)
            if ends:
                h, si, bu = self._lines(buf, cut, ends)
                hits += h
                side += si
                budget += bu
                ends.clear()
                if newlines is not None:
                    starts = {st for st, _e, _s in h}
                    starts.update(st for st, _e in si)
                    starts.update(st for st, _e in bu)
                    newlines.piece(base, cut, sorted(starts))
            elif newlines is not None:
                newlines.piece(base, cut, ())
            base = cut
        return hits, side, budget

    def _lines(
        self, buf: Any, n: int, ends: list[tuple[int, int]]
    ) -> tuple[list[Hit], list[tuple[int, int]], list[tuple[int, int]]]:
        """Match ends → (candidate lines, side lines, budgeted lines)."""
        hits: list[Hit] = []
        side: list[tuple[int, int]] = []
        budget: list[tuple[int, int]] = []
        if not ends:
            return hits, side, budget
        ends.sort()
        n_main, n_side, confirm = self._n_main, self._n_side, self._confirm
        last_end = -1
        start = 0
        ids: list[int] = []
        main = in_side = in_budget = False
        for e, i in ends:
            if e > last_end:  # a new line
                if main:
                    hits.append((start, last_end, _sigs(ids) if ids else _NO_SIGS))
                if in_side:
                    side.append((start, last_end))
                if in_budget:
                    budget.append((start, last_end))
                start = buf.rfind(b"\n", 0, e) + 1
                end = buf.find(b"\n", e, n)
                last_end = n if end < 0 else end
                ids, main, in_side, in_budget = [], False, False, False
            if i >= n_side:
                in_budget = True
            elif i >= n_main:
                in_side = True
            elif i not in confirm or confirm[i].search(buf, start, last_end):
                main = True
                if i >= _N_STRUCT:
                    ids.append(i)  # a signature's pattern
        if main:
            hits.append((start, last_end, _sigs(ids) if ids else _NO_SIGS))
        if in_side:
            side.append((start, last_end))
        if in_budget:
            budget.append((start, last_end))
        return hits, side, budget


def _terminated() -> type[Exception]:
    import hyperscan

    return hyperscan.ScanTerminated


_N_STRUCT = sum(1 for x in PATTERN_SIG if x is None)  # structural patterns come first

_SCANNER: ReScanner | HyperscanScanner | None = None
_LITERAL_SETS: list[_SmallDatabase] = []  # compiled before a pool forks


def get_scanner() -> ReScanner | HyperscanScanner:
    """The process-wide scanner (compiled once; safe to call after fork)."""
    global _SCANNER
    if _SCANNER is None:
        if os.environ.get("RANKSCOPE_SCANNER", "").lower() == "re":
            _SCANNER = ReScanner()
        else:
            try:
                _SCANNER = _with_side()
            except Exception:  # ImportError, CPU without SSSE3, compile failure
                _SCANNER = ReScanner()
    return _SCANNER


def _with_side() -> HyperscanScanner:
    """The prefilter with the text parser's side literals (start-up banners, NCCL
    transport; iteration lines within their budget) in the same database: one pass over
    each chunk for all three."""
    from .parsers.sidecar import banner_patterns, iteration_patterns

    return HyperscanScanner(PATTERNS, side=banner_patterns(), budgeted=iteration_patterns())


def set_scanner(name: str) -> None:
    """Force a scanner ("hyperscan" or "re"); used by tests and the benchmark."""
    global _SCANNER
    _SCANNER = _with_side() if name == "hyperscan" else ReScanner()


def prepare_literal_sets() -> None:
    """Compile (or load) every literal set now: called before the parse pool forks, so the
    workers inherit them as they inherit the prefilter."""
    for ls in _LITERAL_SETS:
        ls._database()


class _SmallDatabase:
    """A Hyperscan database of a reader's own, compiled (or loaded from the cache) at its
    first use or before a parse pool forks (``prepare_literal_sets``); None without
    Hyperscan or with ``RANKSCOPE_SCANNER=re``, and the reader falls back on Python."""

    def __init__(self) -> None:
        self._db: Any = None
        self._ready = False
        _LITERAL_SETS.append(self)

    def _compile(self) -> Any:
        raise NotImplementedError

    def _database(self) -> Any:
        if not self._ready:
            self._ready = True
            if os.environ.get("RANKSCOPE_SCANNER", "").lower() != "re":
                with contextlib.suppress(Exception):  # ImportError, CPU without SSSE3
                    self._db = self._compile()
        return self._db


class LiteralSet(_SmallDatabase):
    """Which of some fixed ASCII literals occur in a text, in one pass over it.

    A recogniser or a head reader that asks ``lit in text`` for a dozen literals goes over
    the text a dozen times (~0.3 ms for a 64 KiB head); one Hyperscan pass with every
    literal reported once gives the same answers. An ASCII literal occurs in a decoded text
    exactly when its bytes occur in the UTF-8 bytes (every non-ASCII character encodes to
    bytes ≥ 0x80, and a replacement character never swallows an ASCII byte), so the bytes
    read from the file can be scanned as they are. Without Hyperscan (or with
    ``RANKSCOPE_SCANNER=re``), the ``in`` tests themselves.
    """

    def __init__(self, literals: Sequence[str]) -> None:
        assert all(lit.isascii() and lit for lit in literals)
        self.literals = tuple(literals)
        super().__init__()

    def _compile(self) -> Any:
        import hyperscan

        return _hyperscan_db(
            ["".join(f"\\x{ord(c):02x}" for c in lit) for lit in self.literals],
            flags=hyperscan.HS_FLAG_SINGLEMATCH,
        )

    def present(self, data: str | bytes) -> frozenset[str]:
        """The literals that occur in ``data`` (text, or its UTF-8 bytes)."""
        db = self._database()
        if db is None:
            text = data if isinstance(data, str) else data.decode("utf-8", errors="replace")
            return frozenset(lit for lit in self.literals if lit in text)
        if isinstance(data, str):
            data = data.encode("utf-8", errors="surrogatepass")
        ids: list[int] = []
        append = ids.append

        def on_match(id_: int, _start: int, _end: int, _flags: int, _ctx: object) -> None:
            append(id_)

        db.scan(data, match_event_handler=on_match, scratch=_scratch(db))
        return frozenset(self.literals[i] for i in ids)


class MatchLines(_SmallDatabase):
    """The lines of an ASCII text where one of some regular expressions matches, in order,
    from one Hyperscan pass — for a reader that would otherwise run a Python regex that
    starts with a character class over a whole region (the engine then tries it at every
    position: ~60 ns a character) to find the few lines it wants.

    ``patterns`` are Hyperscan's spelling of the reader's regex, matching what it matches
    on ASCII text (Hyperscan's ``\\s`` lacks ``\\x1c``-``\\x1f``, which Python's has), and
    never across a line except by a newline as their last character. A match's line is the
    line of its last character before that newline. Without Hyperscan (or with
    ``RANKSCOPE_SCANNER=re``), ``starts`` answers None and the reader runs its regex.
    """

    def __init__(self, patterns: Sequence[str]) -> None:
        self.patterns = tuple(patterns)
        super().__init__()

    def _compile(self) -> Any:
        return _hyperscan_db(self.patterns)

    def starts(self, data: bytes, pos: int = 0, most: int = 8) -> tuple[list[int], bool] | None:
        """The starts of the first ``most`` lines at or after offset ``pos`` (a line start)
        with a match, ascending, and whether they are all of them (the scan stops at the
        next one); None without Hyperscan."""
        db = self._database()
        if db is None:
            return None
        found: list[int] = []
        rfind = data.rfind

        def on_match(_id: int, _start: int, end: int, _flags: int, _ctx: object) -> bool:
            at = pos + end - 1  # the last character; a newline there ends the line before
            start = rfind(b"\n", 0, at) + 1
            if not found or start > found[-1]:
                if len(found) == most:
                    return True
                found.append(start)
            return False

        try:
            db.scan(memoryview(data)[pos:], match_event_handler=on_match, scratch=_scratch(db))
        except _terminated():
            return found, False
        return found, True
