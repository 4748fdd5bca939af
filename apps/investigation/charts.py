"""Plotly figures for the incident page, built as plain dicts (unit-testable, no plotly import).

Every figure is ``{"id", "title", "data", "layout", "note"}``; the page emits each one with
``json_script`` and ``static/js/charts.js`` draws every ``[data-plotly]`` element. All
per-rank, per-step figures are downsampled here so a 1,024-rank job draws quickly:
at most ``MAX_STEP_BINS`` step columns and ``MAX_RANK_ROWS`` rank rows.

Log text that ends up in hover labels goes through ``_plain`` (plotly reads a small
HTML subset in labels; ``<`` must not reach it as markup).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import numpy as np
from plotly.colors import get_colorscale

from rankscope.document import read_document

MAX_STEP_BINS = 600
MAX_RANK_ROWS = 1024
MAX_LINE_POINTS = 1200

ROLES = ["healthy", "notified", "initiator", "straggler", "missing", "crashed"]
ROLE_COLOURS = {
    "healthy": "#cfe8d5",
    "notified": "#9ec5f0",
    "initiator": "#1f5fbf",
    "straggler": "#f0a030",
    "missing": "#6b7280",
    "crashed": "#b3261e",
}
CRASH_KINDS = ("oom", "crash", "segfault", "sigkill", "sigabrt", "exit", "xid", "exception")

_BASE_LAYOUT: dict[str, Any] = {
    "margin": {"l": 64, "r": 16, "t": 36, "b": 44},
    "font": {"family": "system-ui, sans-serif", "size": 12},
    "paper_bgcolor": "#fff",
    "plot_bgcolor": "#fff",
    "legend": {"orientation": "h", "y": -0.2},
}


def _plain(text: Any) -> str:
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _layout(title: str, **extra: Any) -> dict[str, Any]:
    layout = {**_BASE_LAYOUT, "title": {"text": _plain(title), "x": 0, "font": {"size": 14}}}
    layout.update(extra)
    return layout


def _json_list(arr: Any) -> list[Any]:
    """numpy → JSON list with NaN/inf as None (JSON has no NaN)."""
    out = []
    for v in np.asarray(arr, dtype=float).tolist():
        out.append(v if math.isfinite(v) else None)
    return out


def _figure(fig_id: str, title: str, data: list, layout: dict, note: str = "") -> dict[str, Any]:
    return {"id": fig_id, "title": title, "data": data, "layout": layout, "note": note}


# ---------------------------------------------------------------- rank map


def rank_roles(doc: dict[str, Any]) -> dict[int, str]:
    """Role of every rank the document knows about (worst role wins)."""
    view = read_document(doc)
    job, loc, triage = view.job, view.localization, view.triage
    roles: dict[int, str] = {}

    def put(ranks: Iterable[Any], role: str) -> None:
        for r in ranks or []:
            try:
                r = int(r)
            except (TypeError, ValueError):
                continue
            if ROLES.index(role) >= ROLES.index(roles.get(r, "healthy")):
                roles[r] = role

    seen = set(job.get("ranks_seen") or [])
    for ranks in (job.get("hosts") or {}).values():
        seen.update(ranks or [])
    world = job.get("world_size")
    if isinstance(world, int) and 0 < world <= 65536:
        seen.update(range(world))
    put(seen, "healthy")
    for entry in loc.get("nccl") or []:
        role = entry.get("role")
        if role in ("initiator", "notified", "straggler"):
            put([entry.get("rank")], role)
    put(loc.get("notified_ranks"), "notified")
    put(loc.get("initiator_ranks"), "initiator")
    put(loc.get("straggler_ranks"), "straggler")
    put(job.get("ranks_missing"), "missing")
    crashed: list[Any] = []
    for f in view.findings:
        kind = str(f.get("kind", "")).lower()
        if any(k in kind for k in CRASH_KINDS):
            crashed.extend(f.get("ranks") or [])
    if triage.get("shape") == "crash":
        crashed.extend(loc.get("culprit_ranks") or [])
    put(crashed, "crashed")
    return roles


def rank_map_figure(doc: dict[str, Any] | None) -> dict[str, Any] | None:
    """Nodes x local ranks, coloured by role. None when no rank is known."""
    if not doc:
        return None
    roles = rank_roles(doc)
    if not roles:
        return None
    rows, width = _rank_map_rows(doc, roles)
    # straggler scores (peers' median ÷ the rank's own time; 1 = typical), when metrics gave them
    scores = read_document(doc).localization.get("straggler_scores") or {}
    z, text = _rank_map_cells(rows, width, roles, scores)
    n = len(ROLES)
    counts = defaultdict(int)
    for role in roles.values():
        counts[role] += 1
    legend = " · ".join(f"{role} {counts[role]}" for role in reversed(ROLES) if counts[role])
    data = [
        {
            "type": "heatmap",
            "z": z,
            "x": [str(i) for i in range(width)],
            "y": [_plain(h) for h, _ in rows],
            "text": text,
            "hoverinfo": "text",
            "zmin": -0.5,
            "zmax": n - 0.5,
            "colorscale": _role_colorscale(),
            "xgap": 1,
            "ygap": 1,
            "colorbar": {
                "tickvals": list(range(n)),
                "ticktext": ROLES,
                "thickness": 12,
                "len": 1,
            },
        }
    ]
    # Tall enough for the colour bar's role labels even on a one-node job (they overlapped
    # into a blob at 14 px per row).
    height = min(900, max(120 + 14 * len(rows), 90 + 26 * n))
    layout = _layout(
        "Rank map (nodes x local ranks)",
        height=height,
        xaxis={"title": {"text": "local rank"}, "side": "top", "type": "category"},
        yaxis={"autorange": "reversed", "type": "category", "automargin": True},
    )
    return _figure("rank-map", "Rank map", data, layout, note=legend)


def _rank_map_rows(
    doc: dict[str, Any], roles: dict[int, str]
) -> tuple[list[tuple[str, list[int]]], int]:
    """One row per host (in rank order), then rows of ranks whose host is unknown; the width."""
    hosts: dict[str, list[int]] = {
        h: sorted(int(r) for r in rs or [])
        for h, rs in (read_document(doc).job.get("hosts") or {}).items()
    }
    placed = {r for rs in hosts.values() for r in rs}
    unplaced = sorted(r for r in roles if r not in placed)
    width = max([len(rs) for rs in hosts.values()] + [8])
    rows: list[tuple[str, list[int]]] = sorted(
        hosts.items(), key=lambda kv: (kv[1][0] if kv[1] else 1 << 30, kv[0])
    )
    # Ranks without a known host (often the missing ones) get rows of their own.
    for i in range(0, len(unplaced), width):
        chunk = unplaced[i : i + width]
        rows.append((f"ranks {chunk[0]}-{chunk[-1]} (host unknown)", chunk))
    return rows, width


def _rank_map_cells(
    rows: list[tuple[str, list[int]]],
    width: int,
    roles: dict[int, str],
    scores: dict[str, Any],
) -> tuple[list[list[int | None]], list[list[str]]]:
    """Each cell's role index and hover text."""
    z, text = [], []
    for host, ranks in rows:
        z_row: list[int | None] = []
        t_row: list[str] = []
        for local in range(width):
            if local < len(ranks):
                r = ranks[local]
                role = roles.get(r, "healthy")
                z_row.append(ROLES.index(role))
                score = scores.get(str(r))
                t_row.append(
                    f"rank {r} · {_plain(host)} · local {local} · {role}"
                    + (f" · straggler score {float(score):.2f}" if score is not None else "")
                )
            else:
                z_row.append(None)
                t_row.append("")
        z.append(z_row)
        text.append(t_row)
    return z, text


def _role_colorscale() -> list[list[Any]]:
    """One flat band of colour per role."""
    n = len(ROLES)
    colorscale = []
    for i, role in enumerate(ROLES):
        colorscale.append([i / n, ROLE_COLOURS[role]])
        colorscale.append([(i + 1) / n, ROLE_COLOURS[role]])
    return colorscale


# ---------------------------------------------------------------- metrics helpers


def _col(table: Any, name: str) -> np.ndarray | None:
    if table is None or not table.has(name):
        return None
    return np.asarray(table.numpy(name), dtype=float)


def _bin_edges(values: np.ndarray, max_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Unique sorted values, and the bin index of each unique value (≤ max_bins bins)."""
    uniq = np.unique(values)
    if len(uniq) <= max_bins:
        return uniq, np.arange(len(uniq))
    idx = (np.arange(len(uniq)) * max_bins) // len(uniq)
    return uniq, idx


def binned_matrix(
    rows: np.ndarray,
    cols: np.ndarray,
    values: np.ndarray,
    *,
    max_rows: int = MAX_RANK_ROWS,
    max_cols: int = MAX_STEP_BINS,
) -> tuple[list[float], list[float], np.ndarray]:
    """Mean of ``values`` per (row bin, column bin). Returns (row labels, col labels, matrix).

    Labels are the first row/column value of each bin; empty cells are NaN.
    """
    ok = np.isfinite(rows) & np.isfinite(cols)
    rows, cols, values = rows[ok], cols[ok], values[ok]
    r_uniq, r_bin_of_uniq = _bin_edges(rows, max_rows)
    c_uniq, c_bin_of_uniq = _bin_edges(cols, max_cols)
    r_bins = r_bin_of_uniq[np.searchsorted(r_uniq, rows)]
    c_bins = c_bin_of_uniq[np.searchsorted(c_uniq, cols)]
    n_r = int(r_bin_of_uniq[-1]) + 1 if len(r_uniq) else 0
    n_c = int(c_bin_of_uniq[-1]) + 1 if len(c_uniq) else 0
    total = np.zeros((n_r, n_c))
    count = np.zeros((n_r, n_c))
    finite = np.isfinite(values)
    np.add.at(total, (r_bins[finite], c_bins[finite]), values[finite])
    np.add.at(count, (r_bins[finite], c_bins[finite]), 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        matrix = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    r_labels = [float(r_uniq[np.argmax(r_bin_of_uniq == b)]) for b in range(n_r)]
    c_labels = [float(c_uniq[np.argmax(c_bin_of_uniq == b)]) for b in range(n_c)]
    return r_labels, c_labels, matrix


def step_time_heatmap(table: Any) -> dict[str, Any] | None:
    """Per-rank step time as a rank x step heatmap, downsampled to screen resolution."""
    step, rank, st = _col(table, "step"), _col(table, "rank"), _col(table, "step_time")
    if step is None or rank is None or st is None or not np.isfinite(st).any():
        return None
    r_labels, c_labels, matrix = binned_matrix(rank, step, st)
    n_ranks = len(np.unique(rank[np.isfinite(rank)]))
    n_steps = len(np.unique(step[np.isfinite(step)]))
    note = f"{n_ranks} ranks x {n_steps} steps"
    if len(r_labels) < n_ranks or len(c_labels) < n_steps:
        note += f", shown as {len(r_labels)} x {len(c_labels)} bins (mean per bin)"
    data = [
        {
            "type": "heatmap",
            "z": [_json_list(row) for row in matrix],
            "x": [int(c) for c in c_labels],
            "y": [int(r) for r in r_labels],
            # An explicit light→dark scale: plotly.js's *named* YlOrRd runs the other way
            # (dark for the fastest cells). Slow (stalled) cells must be the dark red ones.
            "colorscale": get_colorscale("YlOrRd"),
            "colorbar": {"title": {"text": "s"}, "thickness": 12},
            "hovertemplate": "rank %{y} · step %{x}<br>step time %{z:.3f} s<extra></extra>",
        }
    ]
    layout = _layout(
        "Step time per rank",
        height=min(700, 200 + 2 * len(r_labels)),
        xaxis={"title": {"text": "step"}},
        yaxis={"title": {"text": "rank"}, "autorange": "reversed"},
    )
    return _figure("step-time", "Step time per rank", data, layout, note=note)


def compute_comm_figure(table: Any) -> dict[str, Any] | None:
    """Mean compute vs communication time per rank (and per host when hosts are known)."""
    rank, comp, comm = _col(table, "rank"), _col(table, "compute_time"), _col(table, "comm_time")
    if rank is None or comp is None or comm is None:
        return None
    ok = np.isfinite(rank)
    rank, comp, comm = rank[ok], comp[ok], comm[ok]
    if not len(rank):
        return None
    labels, _, comp_m = binned_matrix(rank, np.zeros_like(rank), comp, max_cols=1)
    _, _, comm_m = binned_matrix(rank, np.zeros_like(rank), comm, max_cols=1)
    ranks_x = [int(r) for r in labels]
    data = [
        {
            "type": "bar",
            "name": "compute",
            "x": ranks_x,
            "y": _json_list(comp_m[:, 0]),
            "marker": {"color": "#1f5fbf"},
        },
        {
            "type": "bar",
            "name": "communication",
            "x": ranks_x,
            "y": _json_list(comm_m[:, 0]),
            "marker": {"color": "#f0a030"},
        },
    ]
    layout = _layout(
        "Compute vs communication per rank (mean s/step)",
        barmode="stack",
        height=320,
        xaxis={"title": {"text": "rank"}},
        yaxis={"title": {"text": "seconds"}},
    )
    note = _host_comm_bars(table, data, layout) if table.has("host") else ""
    return _figure("compute-comm", "Compute vs communication", data, layout, note=note)


def _host_comm_bars(table: Any, data: list[dict[str, Any]], layout: dict[str, Any]) -> str:
    """Per-host bars under the per-rank ones (when there are several hosts), and a note on
    the host that communicates longest."""
    hosts = [h or "" for h in table.column("host")]
    by_host: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    all_comp = _col(table, "compute_time")
    all_comm = _col(table, "comm_time")
    for h, c, m in zip(hosts, all_comp, all_comm, strict=False):
        if h and math.isfinite(c) and math.isfinite(m):
            acc = by_host[h]
            acc[0] += c
            acc[1] += m
            acc[2] += 1
    if len(by_host) <= 1:
        return ""
    names = sorted(by_host)
    data += [
        {
            "type": "bar",
            "name": f"{part} (host)",
            "x": [_plain(n) for n in names],
            "y": [by_host[n][i] / by_host[n][2] for n in names],
            "xaxis": "x2",
            "yaxis": "y2",
            "marker": {"color": colour},
            "showlegend": False,
        }
        for i, part, colour in ((0, "compute", "#1f5fbf"), (1, "communication", "#f0a030"))
    ]
    layout.update(
        height=560,
        grid={"rows": 2, "columns": 1, "pattern": "independent"},
        xaxis2={"title": {"text": "host"}, "type": "category"},
        yaxis2={"title": {"text": "seconds"}},
    )
    per_host = {n: by_host[n][1] / by_host[n][2] for n in names}
    worst = max(names, key=per_host.__getitem__)
    median = float(np.median(list(per_host.values())))
    ratio = per_host[worst] / median if median > 0 else 0.0
    if ratio >= 1.2:
        return (
            f"{worst} spends {per_host[worst]:.2f} s per step communicating, "
            f"{ratio:.1f} times the median host ({median:.2f} s): look at its links first"
        )
    return (
        f"Communication time is even across hosts (at most {ratio:.1f} times the "
        "median): no single host's fabric stands out"
    )


def _per_step(table: Any, name: str, how: str = "mean") -> tuple[np.ndarray, np.ndarray] | None:
    step, vals = _col(table, "step"), _col(table, name)
    if step is None or vals is None:
        return None
    ok = np.isfinite(step)
    step, vals = step[ok], vals[ok]
    if not len(step):
        return None
    uniq, inv = np.unique(step, return_inverse=True)
    out = np.full(len(uniq), np.nan)
    if how == "max":
        finite = np.isfinite(vals)
        tmp = np.full(len(uniq), -np.inf)
        np.maximum.at(tmp, inv[finite], vals[finite])
        out = np.where(np.isfinite(tmp), tmp, np.nan)
    else:
        # NaN anywhere in a step makes that step NaN: a NaN loss on one rank matters.
        total = np.zeros(len(uniq))
        np.add.at(total, inv, vals)
        count = np.bincount(inv, minlength=len(uniq))
        out = total / np.maximum(count, 1)
    return uniq, out


def _thin(x: np.ndarray, y: np.ndarray, n: int = MAX_LINE_POINTS) -> tuple[np.ndarray, np.ndarray]:
    if len(x) <= n:
        return x, y
    idx = np.linspace(0, len(x) - 1, n).astype(int)
    return x[idx], y[idx]


def loss_figure(table: Any) -> dict[str, Any] | None:
    """Loss and grad norm per step (mean over ranks) with NaN/inf steps marked."""
    series = [(n, _per_step(table, n)) for n in ("loss", "grad_norm")]
    series = [(n, s) for n, s in series if s is not None]
    if not series:
        return None
    data: list[dict[str, Any]] = []
    bad_steps: list[int] = []
    for i, (name, (x, y)) in enumerate(series):
        bad = x[~np.isfinite(y)]
        if name == "loss":
            bad_steps = [int(b) for b in bad]
        tx, ty = _thin(x, y)
        trace = {
            "type": "scatter",
            "mode": "lines",
            "name": name,
            "x": _json_list(tx),
            "y": _json_list(ty),
            "connectgaps": False,
        }
        if i == 1:
            trace["yaxis"] = "y2"
        data.append(trace)
        if len(bad):
            finite = y[np.isfinite(y)]
            level = float(finite.max()) if len(finite) else 0.0
            data.append(
                {
                    "type": "scatter",
                    "mode": "markers",
                    "name": f"{name} NaN/inf",
                    "x": _json_list(bad[:MAX_LINE_POINTS]),
                    "y": [level] * min(len(bad), MAX_LINE_POINTS),
                    "marker": {"symbol": "x", "size": 10, "color": "#b3261e"},
                    **({"yaxis": "y2"} if i == 1 else {}),
                }
            )
    layout = _layout(
        "Loss and gradient norm",
        height=320,
        xaxis={"title": {"text": "step"}},
        yaxis={"title": {"text": series[0][0]}},
    )
    if len(series) > 1:
        # automargin: the right axis' title and ticks get room instead of being clipped
        layout["yaxis2"] = {
            "title": {"text": series[1][0]},
            "overlaying": "y",
            "side": "right",
            "automargin": True,
        }
    note = f"First non-finite loss at step {bad_steps[0]}" if bad_steps else ""
    return _figure("loss", "Loss and gradient norm", data, layout, note=note)


# ---------------------------------------------------------------- memory


# The memory analyzer (rankscope/analyzers/memory.py) names each rank's curve; the chart
# draws the curves and says what the analyzer concluded, never a shape of its own.
MEMORY_SHAPES = {
    "flat": "Flat — healthy",
    "staircase": "Staircase — a leak: memory steps up and never comes back",
    "slope": "Steady slope — growth every step (leak or fragmentation)",
    "fragmentation": "Fragmentation — reserved pulls away from allocated",
    "irregular": "Irregular — no steady pattern",
    "unknown": "Too few points to name the shape",
}


def memory_figure(doc: dict[str, Any] | None, table: Any) -> dict[str, Any] | None:
    """Allocated / reserved / peak memory per step (max over ranks), titled with the shape
    the memory analyzer found (the most telling one when ranks differ)."""
    names = [
        n
        for n in ("mem_allocated", "mem_reserved", "mem_peak")
        if table is not None and table.has(n)
    ]
    if not names:
        return None
    data = []
    for n in names:
        s = _per_step(table, n, how="max")
        if s is None:
            continue
        tx, ty = _thin(*s)
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": n.removeprefix("mem_"),
                "x": _json_list(tx),
                "y": _json_list(ty),
            }
        )
    if not data:
        return None
    view = read_document(doc)
    shape = view.memory_shape
    title, note = "Memory", "The analysis named no memory-curve shape"
    if shape is not None:
        label = MEMORY_SHAPES.get(shape, shape)
        title = f"Memory: {label.split(' — ')[0]}"
        counts = (view.memory or {}).get("shapes") or {}
        note = label
        if len(counts) > 1:
            note += " (" + ", ".join(f"{k}: {v} rank(s)" for k, v in sorted(counts.items())) + ")"
    layout = _layout(
        title,
        height=320,
        xaxis={"title": {"text": "step"}},
        yaxis={"title": {"text": "memory (max over ranks)"}},
    )
    fig = _figure("memory", "Memory", data, layout, note=note)
    fig["shape"] = shape
    return fig


# ---------------------------------------------------------------- first errors


_NOISE_EVENTS = {"retry", "connection_error"}


def first_errors_figure(doc: dict[str, Any] | None) -> dict[str, Any] | None:
    """Each rank's first timeline event, in time order: who failed first."""
    if not doc:
        return None
    from apps.investigation.selectors import is_noise_ref, noise_refs

    noise = noise_refs(doc)
    first: dict[int, dict[str, Any]] = {}
    for ev in read_document(doc).timeline:
        r, t = ev.get("rank"), ev.get("time")
        if r is None or not t:
            continue
        # A retry that recovered is not an error: it must not be "first".
        if ev.get("event") in _NOISE_EVENTS or is_noise_ref(ev, noise):
            continue
        try:
            r = int(r)
        except (TypeError, ValueError):
            continue
        if r not in first or str(t) < str(first[r]["time"]):
            first[r] = ev
    if not first:
        return None
    events = sorted(first.values(), key=lambda e: (str(e["time"]), int(e["rank"])))
    if len(events) > 2000:
        events = events[:2000]
    data = [
        {
            "type": "scatter",
            "mode": "markers",
            "x": [str(e["time"]) for e in events],
            "y": [int(e["rank"]) for e in events],
            "text": [
                f"rank {int(e['rank'])}: {_plain(str(e.get('event', ''))[:160])}" for e in events
            ],
            "hoverinfo": "text+x",
            "marker": {"size": 7, "color": "#b3261e"},
        }
    ]
    layout = _layout(
        "First error per rank, over time",
        height=320,
        xaxis={"title": {"text": "time"}, "type": "date"},
        yaxis={"title": {"text": "rank"}},
    )
    e0 = events[0]
    at = str(e0["time"]).replace("T", " ")[:19]
    what = _plain(str(e0.get("event") or "")).replace("_", " ")
    note = f"First error: rank {int(e0['rank'])} at {at}" + (f" ({what})" if what else "")
    return _figure("first-errors", "First errors", data, layout, note=note)


def incident_figures(doc: dict[str, Any] | None, table: Any | None) -> list[dict[str, Any]]:
    """Every figure that has data, in page order."""
    figs = [
        rank_map_figure(doc),
        step_time_heatmap(table),
        compute_comm_figure(table),
        loss_figure(table),
        memory_figure(doc, table),
        first_errors_figure(doc),
    ]
    return [f for f in figs if f is not None]
