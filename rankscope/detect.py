"""What an artifact is, and which rank/host its name tells, from its name and first bytes.

The kinds themselves are declared by the parsers (``Parser.recognizers``); this module
holds what they share: the ``Head`` a recogniser looks at, the ``Recognizer`` record,
the text/binary test and the rank/host read from a file name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, NamedTuple

from ._lazy import lazy_compile

if TYPE_CHECKING:
    from .scan import LiteralSet

_RANK_IN_NAME = lazy_compile(r"(?:^|[^a-z])rank[_-]?(\d+)(?!\d)", re.IGNORECASE)
_SLURM_OUT = lazy_compile(
    r"^(?:error|output|slurm|log|stderr|stdout)[-_](\d+)[-_](?P<node>[\w.-]+?)\.(?:out|err|log|txt)$"
)
_HOST_TOKEN = lazy_compile(r"(?P<h>(?:[a-z][a-z0-9]*-)+\d+|[a-z]+\d+[a-z0-9-]*)", re.I)


def basename(name: str) -> str:
    s = name.replace("\\", "/")
    if "/" not in s and s != ".":
        return s  # a bare file name is its own base name (no path parsing: 3 calls a file)
    return PurePosixPath(s).name


def rank_from_name(name: str) -> int | None:
    """Global rank when the file name says it (``rank_12.log``, ``nccl_trace_rank_5``)."""
    m = _RANK_IN_NAME.search(basename(name))
    if m:
        return int(m.group(1))
    return None


def host_from_name(name: str) -> str | None:
    """Host/node label from names like ``error-<job>-<node>.out`` or ``dmesg-node-03.log``."""
    base = basename(name)
    m = _SLURM_OUT.match(base)
    if m:
        return m.group("node")
    stem = base.split(".", 1)[0]
    for token in ("dmesg", "kern", "syslog", "nvidia-smi", "nvidia_smi", "topo", "journal"):
        if token in stem.lower():
            rest = re.sub(token, "", stem, flags=re.I).strip("-_.")
            m2 = _HOST_TOKEN.search(rest)
            if m2:
                return m2.group("h")
            # what is left may be a host without digits ("gpubox") or a word ("before", "T")
            return rest if len(rest) >= 3 and rest.lower() not in _NOT_HOSTS else None
    return None


# words people put in upload names next to the tool's name that are not hosts
_NOT_HOSTS = frozenset(
    [
        "all",
        "before",
        "after",
        "full",
        "raw",
        "old",
        "new",
        "out",
        "log",
        "logs",
        "txt",
        "iso",
        "plain",
        "boot",
        "kernel",
        "last",
        "first",
        "current",
        "latest",
        "query",
        "csv",
        "output",
        "table",
        "dump",
        "report",
    ]
)

_CONTROL = bytes([*range(9), *range(14, 32)])


def is_text(head: bytes) -> bool:
    """Text rather than binary: no NUL and under 2 % control bytes in the first 8 KiB."""
    if not head:
        return True
    if b"\x00" in head[:8192]:
        return False
    sample = head[:8192]
    bad = len(sample) - len(sample.translate(None, _CONTROL))
    return bad < len(sample) * 0.02


class HeadLiterals(NamedTuple):
    """The literals the recognisers declare, and the set that finds them in one pass."""

    declared: frozenset[str]
    finder: LiteralSet


class Head:
    """What a recogniser sees of an artifact: its name and its first bytes (≤ 64 KiB)."""

    def __init__(self, name: str, head: bytes, literals: HeadLiterals | None = None) -> None:
        self.name = name
        self.head = head
        self.base = basename(name).lower()
        self._literals = literals

    @cached_property
    def text(self) -> str:
        return self.head[:65536].decode("utf-8", errors="replace")

    @cached_property
    def first_line(self) -> str:
        """The first line, lower case, without spaces (CSV headers)."""
        # the first line's bytes decoded alone: the same text (a newline byte always decodes
        # to itself and ends any broken sequence before it), without decoding 64 KiB
        head = self.head[:65536]
        end = head.find(b"\n")
        line = (head[:end] if end >= 0 else head).decode("utf-8", errors="replace")
        return line.lower().replace(" ", "")

    @cached_property
    def is_text(self) -> bool:
        return is_text(self.head)

    @cached_property
    def _found(self) -> frozenset[str]:
        assert self._literals is not None
        return self._literals.finder.present(self.head[:65536])

    def has(self, literal: str) -> bool:
        """``literal in self.text``. The literals the recognisers declare
        (``Recognizer.literals``) are all looked for in one pass over the head, at the
        first question: a dozen ``in`` tests over 64 KiB cost ~50 µs a file, and most files
        are rank logs that every recogniser asks and none claims."""
        if self._literals is not None and literal in self._literals.declared:
            return literal in self._found
        return literal in self.text


@dataclass(frozen=True)
class Recognizer:
    """How one artifact kind is told from its name and first bytes.

    Recognisers run in ascending ``order`` and the first whose ``test`` holds names the
    kind; an artifact nothing recognises is a ``rank_log``. A parser declares its
    recognisers beside its ``parse`` (``Parser.recognizers``); orders leave room between
    them so a new one can go where its test is specific enough.
    """

    kind: str
    order: int
    test: Callable[[Head], bool]
    # the ASCII literals ``test`` asks ``Head.has`` about: answered by one shared pass
    literals: tuple[str, ...] = ()


# binary content nobody parses; after the binary formats that have a recogniser
# (flight-recorder pickles, Parquet), before every text format
BINARY = Recognizer("other", 20, lambda h: not h.is_text)
DEFAULT_KIND = "rank_log"


def classify_artifact(name: str, head: bytes, recognizers: Iterable[Recognizer]) -> str:
    """The kind the first matching recogniser names (``recognizers`` in ``order``)."""
    recs = tuple(recognizers)
    h = Head(name, head, literal_set(recs))
    for rec in recs:
        if rec.test(h):
            return rec.kind
    return DEFAULT_KIND


_LAST: tuple[tuple[Recognizer, ...], HeadLiterals | None] = ((), None)


def literal_set(recognizers: tuple[Recognizer, ...]) -> HeadLiterals | None:
    """Every literal ``recognizers`` declare, with one ``LiteralSet`` of them (None when
    they declare none); made once for a given list of recognisers (it changes only when a
    parser registers)."""
    global _LAST
    if _LAST[0] == recognizers:  # the same objects: an identity test each
        return _LAST[1]
    literals = dict.fromkeys(lit for rec in recognizers for lit in rec.literals)
    made = None
    if literals:
        from .scan import LiteralSet  # the catalogue behind it: only when a parser needs it

        made = HeadLiterals(frozenset(literals), LiteralSet(list(literals)))
    _LAST = (recognizers, made)
    return made
