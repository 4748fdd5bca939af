"""Job facts read from the head and the tail of a text log with full regexes.

Frequent lines (banners, NCCL INFO, iteration lines) are never candidates of
the prefilter; what we need from them (framework, world size, rank↔host, first
and last step and timestamp per rank) is read here from the first and last
~256 KiB of each file only, which is bounded work whatever the file size.
"""

from __future__ import annotations

import re
from typing import Any

from ..envelope import find_time, peel
from ..model import ParseResult, RankInfo

_FRAMEWORKS = [
    ("nemo", re.compile(r"\bNeMo\b|nemo[._/]|nemo_logging")),
    ("megatron", re.compile(r"[Mm]egatron|\biteration\s+\d+/\s*\d+ \|")),
    ("deepspeed", re.compile(r"DeepSpeed|deepspeed")),
    ("lightning", re.compile(r"[Ll]ightning|Trainer\.fit")),
    ("pytorch", re.compile(r"torch\.distributed|torchrun|ProcessGroupNCCL")),
]
_WORLD = [
    ("WORLD_SIZE", re.compile(r"WORLD_SIZE[=: ]+(\d+)")),
    ("world size", re.compile(r"[Ww]orld[ _][Ss]ize[\"']?[=:]? *(\d+)")),
    ("NCCL nranks", re.compile(r"\bn[Rr]anks (\d+)")),
    ("Lightning MEMBER", re.compile(r"MEMBER: \d+/(\d+)")),
]
_NNODES = re.compile(r"\bnnodes[=: ]+(\d+)(?::\d+)?|\bnNodes (\d+)")
_NCCL_INIT = re.compile(
    r"(?P<host>[A-Za-z0-9][\w.-]*):\d+:\d+ \[\d+\] NCCL INFO .*?\brank (?P<r>\d+) n[Rr]anks (?P<n>\d+)"
)
_NCCL_HOST = re.compile(r"(?P<host>[A-Za-z][\w.-]*):\d+:\d+ \[\d+\] NCCL ")
_RESUME = re.compile(
    r"[Rr]esum(?:ing|ed) (?:training )?from (?:the )?checkpoint|[Ll]oading checkpoint from|"
    r"successfully loaded checkpoint|Restoring states from the checkpoint|Restored all states from the checkpoint|"
    r"loaded checkpoint from .* at iteration [1-9]"
)
_STEP = re.compile(
    r"\biteration\s+(?P<a>\d+)\s*/\s*\d+|\b(?:global_step|global step|step)[=: ]+(?P<b>\d+)\b"
)
_YEAR = re.compile(r"\b(20\d\d)-\d\d-\d\d[ T_]\d\d:\d\d")


def detect_framework(text: str) -> str | None:
    for name, rx in _FRAMEWORKS:
        if rx.search(text):
            return name
    return None


def read_region(text: str, result: ParseResult, file_rank: int | None, *, where: str) -> None:
    """Update ``result`` from one decoded region (``where`` is "head" or "tail")."""
    facts: dict[str, Any] = result.facts
    if where == "head":
        fw = detect_framework(text)
        if fw and "framework" not in facts:
            facts["framework"] = fw
        ws: list[list[Any]] = facts.setdefault("world_size_claims", [])
        for how, rx in _WORLD:
            vals = [int(v) for v in rx.findall(text)]
            if vals:
                ws.append([max(vals), how])
        nn = [int(a or b) for a, b in _NNODES.findall(text)]
        if nn:
            facts["nnodes"] = max(nn)
        m = _RESUME.search(text)
        if m:
            facts["resumed_from_checkpoint"] = True
    m = _YEAR.search(text)
    if m and "year" not in facts:
        facts["year"] = int(m.group(1))
    for m in _NCCL_INIT.finditer(text):
        host = m.group("host")
        if host not in result.hosts:
            result.hosts.append(host)
        inits: dict[str, list[int]] = facts.setdefault("nccl_init", {})
        inits.setdefault(host, [])
        pair = [int(m.group("r")), int(m.group("n"))]
        if pair not in inits[host] and len(inits[host]) < 64:
            inits[host].append(pair)
    _per_line(text, result, file_rank, where)


def _per_line(text: str, result: ParseResult, file_rank: int | None, where: str) -> None:
    info = result.rank_info
    for raw in text.splitlines():
        if not raw:
            continue
        env = peel(raw)
        rank = env.rank if env.rank is not None else file_rank
        if rank is None and env.task is not None:
            rank = env.task
        if rank is None:
            continue
        ri = info.get(rank)
        if ri is None:
            ri = info[rank] = RankInfo()
        ri.lines_seen += 1
        t = env.time or (find_time(env.message) if where == "tail" else None)
        if t:
            if where == "head" and ri.first_time is None:
                ri.first_time = t
            ri.last_time = t
        h = env.host
        if h is None and " NCCL " in env.message:
            mh = _NCCL_HOST.match(env.message)
            if mh:
                h = mh.group("host")
        if h and rank not in result.rank_hosts:
            result.rank_hosts[rank] = h
        if "step" in env.message or "iteration" in env.message:
            ms = _STEP.search(env.message)
            if ms:
                step = int(ms.group("a") or ms.group("b"))
                if ri.last_step is None or step >= ri.last_step:
                    ri.last_step = step
                first = result.facts.get("first_step")
                if first is None or step < first:
                    result.facts["first_step"] = step
