"""Expand SLURM hostlist expressions (``node[01-04,7],gpu-a1``) into host names."""

from __future__ import annotations

import re

MAX_HOSTS = 100_000


class HostlistError(ValueError):
    pass


def _split_top_level(expr: str) -> list[str]:
    parts, depth, current = [], 0, []
    for ch in expr:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError("unbalanced ']'")
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if depth:
        raise HostlistError("unbalanced '['")
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def _expand_one(part: str) -> list[str]:
    match = re.fullmatch(r"([^\[\]]*)\[([^\[\]]+)\]([^\[\]]*)", part)
    if not match:
        if "[" in part or "]" in part:
            raise HostlistError(f"cannot expand {part!r}")
        return [part]
    head, ranges, tail = match.groups()
    hosts: list[str] = []
    for item in ranges.split(","):
        item = item.strip()
        if re.fullmatch(r"\d+", item):
            hosts.append(f"{head}{item}{tail}")
            continue
        bounds = re.fullmatch(r"(\d+)-(\d+)", item)
        if not bounds:
            raise HostlistError(f"bad range {item!r}")
        lo, hi = bounds.groups()
        if int(hi) < int(lo) or int(hi) - int(lo) >= MAX_HOSTS:
            raise HostlistError(f"bad range {item!r}")
        width = len(lo)
        hosts.extend(f"{head}{n:0{width}d}{tail}" for n in range(int(lo), int(hi) + 1))
    return hosts


def expand_hostlist(expr: str) -> list[str]:
    hosts: list[str] = []
    for part in _split_top_level(expr):
        hosts.extend(_expand_one(part))
        if len(hosts) > MAX_HOSTS:
            raise HostlistError(f"more than {MAX_HOSTS} hosts")
    return hosts
