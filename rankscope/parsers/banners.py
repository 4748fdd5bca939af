"""Version and environment banners of each process, for the cross-rank odd-one-out.

What every process prints once at start-up, read per process (a global rank when the
line's prefix or the file tells it, else NCCL's ``host:pid``):

- ``NCCL INFO NCCL version 2.18.1+cuda12.1`` → ``nccl_version``;
- ``NCCL INFO cudaDriverVersion 12020`` → ``cuda_driver``;
- ``NCCL INFO NCCL_IB_TIMEOUT set by environment to 22.`` → ``env.NCCL_IB_TIMEOUT``;
- PyTorch's ``ProcessGroupNCCL environments: NCCL version: 2.20.5, TORCH_NCCL_…: 1, …``
  and ``PGNCCL Watchdog environments: TORCH_NCCL_…: 1`` → the version and each setting;
- ``torch version 2.4.0`` / ``PyTorch version: 2.4.0`` / ``DeepSpeed info: version=0.14.0``.

Kept in ``result.facts["banners"]``: ``{process: {attribute: [value, line, text]}}``,
at most ``MAX_PROCS`` processes per file and ``MAX_ATTRS`` attributes per process.
"""

from __future__ import annotations

import re
from typing import Any

from .._lazy import lazy_compile
from ..envelope import peel
from ..model import ParseResult

MAX_PROCS = 4096
MAX_ATTRS = 64
LITERALS: tuple[bytes, ...] = (
    b"NCCL version",
    b"set by environment to",
    b"cudaDriverVersion",
    b"environments:",
    b"torch version",
    b"PyTorch version",
    b"DeepSpeed info: version=",
    b" nvmlDev ",
)
_NCCL_HOST = lazy_compile(r"(?P<host>[\w.-]+):(?P<pid>\d+):\d+\s+\[\d+\]\s+NCCL\s")
# what follows the host in that banner: it starts with a literal, so it is searched for
# quickly; ``_NCCL_HOST`` itself starts with a character class and is tried at every
# position of the line (~20 µs a banner line)
_NCCL_HOST_TAIL = lazy_compile(r":(?P<pid>\d+):\d+\s+\[\d+\]\s+NCCL\s")


def nccl_host(raw: str) -> tuple[str, str] | None:
    """``(host, pid)`` of ``_NCCL_HOST.search(raw)``, or None: the first place its tail
    follows a run of host characters (``[\\w.-]``: ``str.isalnum`` is ``\\w`` less the
    underscore), the host being that whole run — where the search's first match starts."""
    for t in _NCCL_HOST_TAIL.finditer(raw):
        end = start = t.start()
        while start and (raw[start - 1].isalnum() or raw[start - 1] in "_.-"):
            start -= 1
        if start < end:
            return raw[start:end], t.group("pid")
    return None


# (a literal every match contains, the rule): the literal is looked for first — a regex
# without a literal prefix is tried at every position of the line. A word start ("\b") is
# tested behind the word's first letter, ``X(?<!\w.)…`` for ``\bX…``: the regex then starts
# with its letter and the search skips every position without it
_RULES: tuple[tuple[str, re.Pattern[str], str | None], ...] = (
    (
        "NCCL INFO NCCL version",
        lazy_compile(r"NCCL INFO NCCL version\s+(?P<v>\S+)"),
        "nccl_version",
    ),
    ("NCCL version:", lazy_compile(r"N(?<!\w.)CCL version:\s*(?P<v>[\w.+-]+)"), "nccl_version"),
    ("cudaDriverVersion", lazy_compile(r"cudaDriverVersion\s+(?P<v>\d+)"), "cuda_driver"),
    (
        " set by environment to ",
        lazy_compile(r"(?P<k>N(?<!\w.)CCL_\w+) set by environment to (?P<v>.+?)\.?\s*$"),
        None,
    ),
    (
        "h version",  # "torch version", "PyTorch version"
        lazy_compile(r"(?:torch|PyTorch) version:?\s*(?P<v>\d[\w.+-]*)"),
        "torch_version",
    ),
    (
        "DeepSpeed info: version=",
        lazy_compile(r"DeepSpeed info: version=(?P<v>[\w.+-]+)"),
        "deepspeed_version",
    ),
)
# NCCL's "comm 0x… rank 7 nranks 16 cudaDev 3 nvmlDev 3 busId 4b000 …": the GPU (NVML index,
# as nvidia-smi and DCGM number it) a process drives
_NVML = lazy_compile(r"c(?<!\w.)udaDev\s+\d+\s+nvmlDev\s+(?P<v>\d+)")
# "\b(?P<k>(?:TORCH_)?NCCL_…" written with its first letter ahead of the word-start test
# (``(?<!\w.)`` behind it): the search then skips every position that is not a T or an N
# instead of testing a word boundary there
_ENV_PAIRS = lazy_compile(
    r"(?P<k>(?:T(?<!\w.)ORCH_NCCL_|N(?<!\w.)CCL_)[A-Z0-9_]+):\s*(?P<v>[^,\s]+)"
)


class BannerReader:
    def __init__(self) -> None:
        self.procs: dict[str, dict[str, list[Any]]] = {}

    def take(self, raw: str, line: int) -> None:
        """One candidate line (text, 1-based number)."""
        self._line(raw, line)

    def _line(self, raw: str, line: int) -> None:
        env = peel(raw)
        msg = env.message
        rank = env.rank if env.rank is not None else env.task
        found: list[tuple[str, str]] = []
        for lit, rx, attr in _RULES:
            mm = rx.search(msg) if lit in msg else None
            if mm:
                found.append((attr or f"env.{mm.group('k')}", mm.group("v").strip()))
        mg = _NVML.search(msg) if "nvmlDev" in msg else None
        if mg and rank is not None:
            found.append(("_gpu", mg.group("v")))
        if "environments:" in msg:
            found += [(f"env.{k}", v) for k, v in _ENV_PAIRS.findall(msg)]
        if not found:
            return
        # NCCL's "host:pid" names the process when the line has no rank, and gives its host
        # once: searched only then (it is most of a banner line's reading)
        if rank is not None:
            proc, m = str(rank), None
        else:
            m = nccl_host(raw) if "NCCL" in raw else None
            proc = f"{m[0]}:{m[1]}" if m else "?"
        if proc not in self.procs and len(self.procs) >= MAX_PROCS:
            return
        attrs = self.procs.setdefault(proc, {})
        if "_host" not in attrs:
            if rank is not None and "NCCL" in raw:
                m = nccl_host(raw)
            if m:
                attrs["_host"] = [m[0], line, raw[:500]]
        for attr, value in found:
            if attr not in attrs and len(attrs) < MAX_ATTRS:
                attrs[attr] = [value[:80], line, raw[:500]]

    def finish(self, result: ParseResult, file_rank: int | None) -> None:
        if not self.procs:
            return
        if file_rank is not None and set(self.procs) <= {"?"} | {p for p in self.procs if ":" in p}:
            # a per-rank file whose lines carry no rank: every process here is that rank
            merged: dict[str, list[Any]] = {}
            for attrs in self.procs.values():
                for k, v in attrs.items():
                    merged.setdefault(k, v)
            self.procs = {str(file_rank): merged}
        self.procs.pop("?", None)
        if self.procs:
            result.facts["banners"] = self.procs
