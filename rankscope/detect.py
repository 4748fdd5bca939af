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

from ._lazy import lazy_compile

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


class Head:
    """What a recogniser sees of an artifact: its name and its first bytes (≤ 64 KiB)."""

    def __init__(self, name: str, head: bytes) -> None:
        self.name = name
        self.head = head
        self.base = basename(name).lower()

    @cached_property
    def text(self) -> str:
        return self.head[:65536].decode("utf-8", errors="replace")

    @cached_property
    def first_line(self) -> str:
        """The first line, lower case, without spaces (CSV headers)."""
        return self.text.split("\n", 1)[0].lower().replace(" ", "")

    @cached_property
    def is_text(self) -> bool:
        return is_text(self.head)


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


# binary content nobody parses; after the binary formats that have a recogniser
# (flight-recorder pickles, Parquet), before every text format
BINARY = Recognizer("other", 20, lambda h: not h.is_text)
DEFAULT_KIND = "rank_log"


def classify_artifact(name: str, head: bytes, recognizers: Iterable[Recognizer]) -> str:
    """The kind the first matching recogniser names (``recognizers`` in ``order``)."""
    h = Head(name, head)
    for rec in recognizers:
        if rec.test(h):
            return rec.kind
    return DEFAULT_KIND
