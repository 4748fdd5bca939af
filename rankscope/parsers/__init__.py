"""Parser plugins: one artifact (a binary stream) → one ``ParseResult``.

The interface every parser implements::

    class MyParser:
        name = "my_parser"                 # stable, stored in ParseResult.parser
        kinds = ("nvidia_smi",)            # artifact kinds it handles (see KINDS)

        def parse(self, stream: BinaryIO, result: ParseResult, progress: Progress | None) -> None:
            # Read ``stream`` ONCE, front to back, in bounded memory. Fill ``result``
            # (events with exact raw line text and 1-based line numbers, ranks, hosts,
            # facts, metrics). Raise ParseError (or anything) on content it cannot read:
            # ``parse_artifact`` turns that into ``result.error`` and never raises.

Register with ``register_parser(MyParser())``; a later registration for the same
kind wins, so an extension module (the nvidia-smi, nccl-tests, AIStore
parsers) only has to be imported. ``parse_artifact`` is the only entry point callers use.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import BinaryIO, Protocol

from ..detect import KINDS, detect_kind
from ..model import ParseResult

Progress = Callable[[int, int, str], None]
HEAD_BYTES = 65536


class ParseError(Exception):
    """Content the parser understands to be unreadable; the message is shown to users."""


class Parser(Protocol):
    name: str
    kinds: tuple[str, ...]

    def parse(self, stream: BinaryIO, result: ParseResult, progress: Progress | None) -> None: ...


_REGISTRY: dict[str, Parser] = {}


def register_parser(parser: Parser) -> Parser:
    for kind in parser.kinds:
        if kind not in KINDS:
            raise ValueError(f"unknown artifact kind {kind!r}")
        _REGISTRY[kind] = parser
    return parser


def parser_for(kind: str) -> Parser | None:
    _load_builtin()
    return _REGISTRY.get(kind)


def registered_parsers() -> dict[str, str]:
    _load_builtin()
    return {k: p.name for k, p in _REGISTRY.items()}


class _Prepended(io.RawIOBase):
    """A stream that yields ``head`` and then the rest of ``stream`` (no seeking needed)."""

    def __init__(self, head: bytes, stream: BinaryIO) -> None:
        self._head = head
        self._stream = stream

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if self._head:
            if size is None or size < 0:
                out, self._head = self._head + self._stream.read(), b""
                return out
            if size <= len(self._head):
                out, self._head = self._head[:size], self._head[size:]
                return out
            out, self._head = self._head, b""
            return out  # a short read: no copy of the next chunk onto the head
        return self._stream.read(size if size is not None else -1) or b""

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        if self._head:
            n = min(len(b), len(self._head))
            b[:n] = self._head[:n]
            self._head = self._head[n:]
            return n  # a short read; callers loop
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
    if kind is None or kind not in KINDS:
        kind = detect_kind(name, head)
    result = ParseResult(name=name, kind=kind)
    parser = parser_for(kind)
    if parser is None:
        parser = parser_for("rank_log") if kind != "other" else None
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


_loaded = False


def _load_builtin() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    from . import (  # noqa: F401  # noqa: F401, PLC0415
        aistore,
        bisection,
        flight_recorder,
        metrics_csv,
        nccl_tests,
        nvidia_smi,
        textlog,
        topology,
    )
