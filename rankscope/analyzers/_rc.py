"""Helpers shared by the isolation / root-cause / resolution analyzers."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from .._lazy import lazy_module
from ..model import Event
from ..times import to_dt
from . import Context

np = lazy_module("numpy")


def metrics_files(ctx: Context) -> Iterator[tuple[str, Any]]:
    """(file name, MetricsTable) per metrics artifact, so rows keep their file and line.

    The table carries ``raw_rows`` ({line: raw text}) kept by the parser for evidence.
    """
    for r in ctx.results:
        if r.metrics is not None and len(r.metrics):
            if getattr(r.metrics, "raw_rows", None) is None:
                r.metrics.raw_rows = {  # type: ignore[attr-defined]
                    int(k): v for k, v in (r.facts.get("metrics_rows") or {}).items()
                }
            yield r.name, r.metrics


def _kept_row(table: Any, i: int) -> tuple[int, str] | None:
    """The kept raw row for table row ``i``: the row itself, else the nearest kept row of
    the same rank (the parser keeps first/last, evenly spaced and extreme rows per rank)."""
    raw: dict[int, str] = getattr(table, "raw_rows", None) or {}
    t = table.table
    if not raw or "line" not in t.column_names:
        return None
    line = t.column("line")[i].as_py()
    if line in raw:
        return line, raw[line]
    cache = getattr(table, "_kept_by_rank", None)
    if cache is None:
        lines = t.column("line").to_numpy(zero_copy_only=False)
        ranks = (
            t.column("rank").to_numpy(zero_copy_only=False).astype(float)
            if "rank" in t.column_names
            else np.zeros(len(lines))
        )
        kept = np.isin(lines, np.fromiter(raw, dtype=np.int64, count=len(raw)))
        cache = {}
        for rk, ln in zip(ranks[kept], lines[kept], strict=True):
            cache.setdefault(None if math.isnan(rk) else int(rk), []).append(int(ln))
        for v in cache.values():
            v.sort()
        table._kept_by_rank = cache
    rank = t.column("rank")[i].as_py() if "rank" in t.column_names else 0
    cands = cache.get(rank) or [ln for v in cache.values() for ln in v]
    if not cands or line is None:
        return None
    best = min(cands, key=lambda ln: abs(ln - line))
    return best, raw[best]


def row_event(name: str, table: Any, i: int, kind: str, cols: list[str], **fields: Any) -> Event:
    """An evidence event for metrics row ``i``, quoting the raw row of its file.

    The text is the exact raw line kept by the parser (the row itself, or the nearest kept
    row of the same rank — ``fields.quoted_line`` says which). Only files without text lines
    (Parquet) fall back to the row's values (``synthetic_text``).
    """
    t = table.table
    line = (
        int(t.column("line")[i].as_py())
        if "line" in t.column_names and t.column("line")[i].is_valid
        else i + 2
    )
    rank = t.column("rank")[i].as_py() if "rank" in t.column_names else None
    host = t.column("host")[i].as_py() if "host" in t.column_names else None
    kept = _kept_row(table, i)
    if kept is not None:
        if kept[0] != line:
            fields.setdefault("row_line", line)
        return Event(
            kind=kind, line=kept[0], text=kept[1], rank=rank, host=host, file=name, fields=fields
        )
    parts = []
    for c in ["step", "rank", *cols]:
        if c in t.column_names:
            v = t.column(c)[i].as_py()
            if v is not None:
                parts.append(f"{c}={_fmt(v)}")
    fields.setdefault("synthetic_text", True)
    return Event(
        kind=kind, line=line, text=", ".join(parts), rank=rank, host=host, file=name, fields=fields
    )


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return str(v)
        return f"{v:.6g}"
    return str(v)


def job_death(ctx: Context) -> Event | None:
    """The event that marks the job's end on the worker side (latest fatal event with a time)."""
    kinds = (
        "slurm_cancelled",
        "slurm_time_limit",
        "node_fail",
        "torchrun_failure",
        "torchrun_failed",
        "fatal_terminate",
        "teardown",
        "worker_group_failed",
        "sigterm_sent",
    )
    evs = [
        e
        for e in ctx.kinds(*kinds)
        if e.time and not e.file.startswith("ais") and e.kind != "ais_restart"
    ]
    evs = [e for e in evs if _is_worker(ctx, e)]
    if not evs:
        return None
    return max(evs, key=lambda e: to_dt(e.time) or datetime.min)


def _is_worker(ctx: Context, e: Event) -> bool:
    return ctx.kind_of_file(e.file) in ("rank_log", "slurm_job", None)
