"""Parser plugins: one artifact (a binary stream) → one ``ParseResult``.

A parser declares itself in its own module, in one place::

    class MyParser:
        name = "my_parser"                 # stable, stored in ParseResult.parser
        kinds = ("my_kind",)               # artifact kinds it reads
        recognizers = (                    # how each kind is told from name + first bytes
            Recognizer("my_kind", 45, lambda h: h.first_line.startswith("gpu,switch")),
            # a test that looks for literals in the head asks h.has(…) and declares them:
            # every recogniser's are found in one pass over the head
            Recognizer("my_log", 46, lambda h: h.has("MYTOOL v"), literals=("MYTOOL v",)),
        )

        def parse(self, stream: BinaryIO, result: ParseResult, progress: Progress | None) -> None:
            # Read ``stream`` ONCE, front to back, in bounded memory. Fill ``result``
            # (events with exact raw line text and 1-based line numbers, ranks, hosts,
            # facts, metrics). Raise ParseError (or anything) on content it cannot read:
            # ``parse_artifact`` turns that into ``result.error`` and never raises.

    register_parser(MyParser())

Every module of this package is imported on first use, so a new parser is one new
file: detection (``detect_kind``), the list of kinds (``artifact_kinds``) and
loading all derive from the registrations. Recognisers run in ascending order (see
``artifact_recognizers()`` for the built-in orders); a text kind without a parser of
its own is read by the ``fallback`` parser (``text_log``). ``parse_artifact`` is the
only entry point callers use.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import BinaryIO, Protocol

from ..detect import BINARY, Recognizer, classify_artifact, literal_set
from ..model import ParseResult
from ..plugins import load_plugins

Progress = Callable[[int, int, str], None]
HEAD_BYTES = 65536


class ParseError(Exception):
    """Content the parser understands to be unreadable; the message is shown to users."""


class Parser(Protocol):
    name: str
    kinds: tuple[str, ...]
    recognizers: tuple[Recognizer, ...]

    def parse(self, stream: BinaryIO, result: ParseResult, progress: Progress | None) -> None: ...


_REGISTRY: dict[str, Parser] = {}
_RECOGNIZERS: list[Recognizer] = [BINARY]
_FALLBACK: Parser | None = None


def register_parser(parser: Parser) -> Parser:
    """Make ``parser`` read its ``kinds`` and its ``recognizers`` name them."""
    global _FALLBACK
    for rec in getattr(parser, "recognizers", ()):
        if rec.kind not in parser.kinds:
            raise ValueError(f"{parser.name} recognises {rec.kind!r}, which it does not read")
        _RECOGNIZERS.append(rec)
    _RECOGNIZERS.sort(key=lambda r: r.order)
    for kind in parser.kinds:
        _REGISTRY[kind] = parser
    if getattr(parser, "fallback", False):
        _FALLBACK = parser
    return parser


def parser_for(kind: str) -> Parser | None:
    """The parser that reads ``kind``; the fallback for any other text kind."""
    _load_builtin()
    if kind == BINARY.kind:
        return None
    return _REGISTRY.get(kind) or _FALLBACK


def registered_parsers() -> dict[str, str]:
    _load_builtin()
    return {k: p.name for k, p in _REGISTRY.items()}


def artifact_kinds() -> tuple[str, ...]:
    """Every kind an artifact can have: those parsers read, and ``other`` (skipped)."""
    _load_builtin()
    return (*_REGISTRY, BINARY.kind)


def artifact_recognizers() -> list[Recognizer]:
    _load_builtin()
    return list(_RECOGNIZERS)


def detect_kind(name: str, head: bytes) -> str:
    """The artifact's kind from the path inside the upload/archive and the first ≤64 KiB."""
    return classify_artifact(name, head, artifact_recognizers())


class _Prepended(io.RawIOBase):
    """A stream that yields ``head`` and then the rest of ``stream`` (no seeking needed)."""

    def __init__(self, head: bytes, stream: BinaryIO) -> None:
        self._head = head
        self._stream = stream
        self._taken = False  # bytes of the stream read through this one

    def readable(self) -> bool:
        return True

    @property
    def head_and_stream(self) -> tuple[bytes, BinaryIO] | tuple[None, None]:
        """The head and the stream behind it, while nothing of the stream has been read
        through this one (a parser may then map the file itself: ``textlog._map_whole``)."""
        return (self._head, self._stream) if not self._taken else (None, None)

    def read(self, size: int = -1) -> bytes:
        if self._head:
            if size is None or size < 0:
                self._taken = True
                out, self._head = self._head + self._stream.read(), b""
                return out
            if size <= len(self._head):
                out, self._head = self._head[:size], self._head[size:]
                return out
            out, self._head = self._head, b""
            return out  # a short read: no copy of the next chunk onto the head
        self._taken = True
        return self._stream.read(size if size is not None else -1) or b""

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        if self._head:
            n = min(len(b), len(self._head))
            b[:n] = self._head[:n]
            self._head = self._head[n:]
            return n  # a short read; callers loop
        self._taken = True
        inner = getattr(self._stream, "readinto", None)
        if inner is not None:
            return inner(b) or 0
        data = self._stream.read(len(b)) or b""
        b[: len(data)] = data
        return len(data)


def parse_artifact(
    stream: BinaryIO, *, name: str, kind: str | None = None, progress: Progress | None = None
) -> ParseResult:
    """Parse one artifact. Streams once, bounded memory, never raises on bad content."""
    try:
        head = stream.read(HEAD_BYTES) or b""
    except Exception as exc:  # a broken archive member, a truncated gzip…
        return ParseResult(name=name, kind=kind or "other", error=f"cannot read: {exc}")
    if kind is None or kind not in artifact_kinds():
        kind = detect_kind(name, head)
    result = ParseResult(name=name, kind=kind)
    parser = parser_for(kind)
    if parser is None:
        result.error = "not a text log or a format Rankscope reads (binary content); skipped"
        result.parser = "none"
        return result
    result.parser = parser.name
    try:
        parser.parse(_Prepended(head, stream), result, progress)  # type: ignore[arg-type]
    except ParseError as exc:
        result.error = str(exc)
    except Exception as exc:
        result.error = f"{parser.name} failed on this file: {type(exc).__name__}: {exc}"
    return result


_built_in = False


def _load_builtin() -> None:
    global _built_in
    if not _built_in:
        load_plugins(__name__)
        _built_in = True
        # the recognisers' literals made into their set now, so that a parse pool compiles
        # it before it forks (``scan.prepare_literal_sets``), as it does the prefilter
        literal_set(tuple(_RECOGNIZERS))
