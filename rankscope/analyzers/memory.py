"""Memory curve shape per rank (from per-step metrics) and headroom.

After warm-up (the first 10 % of steps), a rank's allocated-memory curve is:
- ``flat`` — spread under 2 % of its level: healthy;
- ``staircase`` — mostly flat with ≥ 2 upward jumps that make most of the rise: a leak
  (something is kept every N steps: a list of losses, a cache, a hook);
- ``slope`` — a steady rise (correlation with the step ≥ 0.9): fragmentation or a slow leak;
- ``fragmentation`` — reserved - allocated grows (when the metrics carry ``mem_reserved``);
- ``irregular`` — none of these.
Headroom: the GPU's capacity (from a CUDA OOM message or nvidia-smi ``memory.total``)
minus the peak; for a rising curve, the step at which the trend reaches capacity.
"""

from __future__ import annotations

import re
from typing import Any

from .._lazy import lazy_module
from . import Context, register_analyzer
from ._rc import metrics_files, row_event

np = lazy_module("numpy")

_UNIT = {
    "b": 1 / 2**30,
    "kib": 1 / 2**20,
    "mib": 1 / 1024,
    "gib": 1.0,
    "tib": 1024.0,
    "kb": 1e3 / 2**30,
    "mb": 1e6 / 2**30,
    "gb": 1e9 / 2**30,
}


def shape_of(y: np.ndarray) -> str:
    y = y[~np.isnan(y)]
    if y.size < 8:
        return "unknown"
    level = float(np.median(np.abs(y))) or 1.0
    spread = float(y.max() - y.min())
    if spread <= 0.02 * level:
        return "flat"
    d = np.diff(y)
    rise = float(y[-1] - y[0])
    big = d > max(5 * float(np.median(np.abs(d))), 0.005 * level)
    if rise > 0 and big.sum() >= 2 and d[big].sum() >= 0.6 * rise and big.mean() < 0.2:
        return "staircase"
    x = np.arange(y.size, dtype=float)
    r = float(np.corrcoef(x, y)[0, 1]) if np.std(y) > 0 else 0.0
    if r >= 0.9 and rise > 0:
        return "slope"
    return "irregular"


def capacity_gib(ctx: Context) -> float | None:
    for e in ctx.by_kind.get("cuda_oom", []):
        m = re.match(r"([\d.]+) ?([KMGT]i?B)", str(e.fields.get("capacity", "")))
        if m:
            return float(m.group(1)) * _UNIT[m.group(2).lower()]
    for e in ctx.by_kind.get("gpu_reading", []):
        total = (e.fields.get("readings") or {}).get("mem_total_mib")
        if isinstance(total, int | float) and total > 0:
            return total / 1024
    return None


class MemoryAnalyzer:
    name = "memory"
    phase = "isolation"
    order = 62
    reads = ("results", "events")
    writes = ("doc.isolation.memory", "findings")

    def run(self, ctx: Context) -> None:
        cap = capacity_gib(ctx)
        report: list[dict[str, Any]] = []
        flagged: dict[tuple[str, str], list[tuple[dict[str, Any], list[Any]]]] = {}
        for name, m in metrics_files(ctx):
            if not m.has("step", "mem_allocated"):
                continue
            for entry, evs in _file_curves(name, m, cap):
                report.append(entry)
                if entry["shape"] in ("staircase", "slope", "fragmentation"):
                    flagged.setdefault((name, entry["shape"]), []).append((entry, evs))
        for (_name, shape), items in sorted(flagged.items()):
            _add_shape_finding(ctx, shape, items)
        if report:
            shapes: dict[str, int] = {}
            for r in report:
                shapes[r["shape"]] = shapes.get(r["shape"], 0) + 1
            ctx.doc.setdefault("isolation", {})["memory"] = {
                "shapes": shapes,
                "ranks": report[:256],
            }


def _file_curves(name: str, m: Any, cap: float | None) -> list[tuple[dict[str, Any], list[Any]]]:
    """Each rank's allocated-memory curve of one metrics file (warm-up left out): its shape,
    peak and headroom, with the rows of its start and its peak."""
    out: list[tuple[dict[str, Any], list[Any]]] = []
    steps = m.numpy("step").astype(float)
    mem = m.numpy("mem_allocated").astype(float)
    reserved = m.numpy("mem_reserved").astype(float) if m.has("mem_reserved") else None
    ranks = m.numpy("rank").astype(float) if m.has("rank") else np.zeros(len(steps))
    for rank in sorted({r for r in ranks if not np.isnan(r)}):
        idx = np.flatnonzero(ranks == rank)
        idx = idx[np.argsort(steps[idx], kind="stable")]
        idx = idx[int(len(idx) * 0.1) :]
        y = mem[idx]
        ok = ~np.isnan(y)
        if ok.sum() < 8:
            continue
        idx, y = idx[ok], y[ok]
        shape = _curve_shape(y, reserved[idx] if reserved is not None else None)
        peak_i = int(idx[int(np.argmax(y))])
        entry: dict[str, Any] = {
            "file": name,
            "rank": int(rank),
            "shape": shape,
            "peak": round(float(y.max()), 3),
            "start": round(float(y[0]), 3),
        }
        if cap:
            entry["capacity_gib"] = round(cap, 2)
            entry["headroom"] = round(cap - float(y.max()), 3)
            if shape in ("slope", "staircase") and y[-1] > y[0]:
                per_step = (y[-1] - y[0]) / max(1.0, steps[idx[-1]] - steps[idx[0]])
                if per_step > 0:
                    entry["full_at_step"] = int(steps[idx[-1]] + (cap - y[-1]) / per_step)
        evs = [
            row_event(name, m, int(idx[0]), "metrics_row", ["mem_allocated"]),
            row_event(name, m, peak_i, "metrics_row", ["mem_allocated"]),
        ]
        out.append((entry, evs))
    return out


def _curve_shape(y: Any, reserved: Any) -> str:
    """The allocated curve's shape; a growing reserved - allocated gap is fragmentation."""
    shape = shape_of(y)
    if reserved is not None and shape not in ("staircase",):
        gap = reserved - y
        if shape_of(gap) in ("slope", "staircase") and gap[-1] - gap[0] > 0.05 * float(
            np.median(y)
        ):
            shape = "fragmentation"
    return shape


_SHAPE_MEANS = {
    "staircase": "a staircase: memory is kept every few steps (a leak)",
    "slope": "a steady slope: fragmentation or a slow leak",
    "fragmentation": "reserved - allocated grows: allocator fragmentation",
}


def _add_shape_finding(
    ctx: Context, shape: str, items: list[tuple[dict[str, Any], list[Any]]]
) -> None:
    items.sort(key=lambda x: -x[0]["peak"])
    entry = items[0][0]
    ranks = [x[0]["rank"] for x in items]
    fix = (
        "take a memory snapshot (torch.cuda.memory._record_memory_history) at two stair steps and diff them"
        if shape == "staircase"
        else "try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; fix dynamic shapes"
    )
    head = f"; headroom {entry['headroom']:.2f} GiB" if "headroom" in entry else ""
    full = f", full at about step {entry['full_at_step']}" if "full_at_step" in entry else ""
    who = (
        f"Rank {ranks[0]}"
        if len(ranks) == 1
        else f"{len(ranks)} ranks (worst: rank {entry['rank']})"
    )
    ctx.add_finding(
        phase="isolation",
        kind=f"memory_{shape}",
        title=f"{who}: memory curve is {_SHAPE_MEANS[shape]}{head}{full}",
        detail=f"Allocated went from {entry['start']:.3g} to a peak of {entry['peak']:.3g}. {fix}.",
        confidence=0.7 if shape != "slope" else 0.55,
        ranks=ranks,
        evidence_events=[ev for _, evs in items[:2] for ev in evs],
        category="OOM",
        shape=shape,
    )


register_analyzer(MemoryAnalyzer())
