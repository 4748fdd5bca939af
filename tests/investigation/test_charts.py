import json

import numpy as np
import pyarrow as pa

from apps.investigation import charts
from rankscope.metrics import MetricsTable


def _job(world: int = 1024, per_node: int = 8) -> dict:
    hosts = {
        f"node-{n:03d}": list(range(n * per_node, (n + 1) * per_node))
        for n in range(world // per_node)
    }
    return {
        "job": {"world_size": world, "hosts": hosts, "ranks_missing": [1023], "ranks_seen": []},
        "triage": {"shape": "hang"},
        "localization": {
            "initiator_ranks": [0, 1],
            "notified_ranks": [5],
            "straggler_ranks": [77],
            "culprit_ranks": [77],
            "nccl": [{"rank": 9, "role": "notified"}],
        },
        "findings": [{"kind": "cuda_oom", "ranks": [300]}],
        "timeline": [
            {"time": "2026-01-01T00:00:05Z", "rank": 77, "event": "<script>alert(1)</script>"},
            {"time": "2026-01-01T00:00:09Z", "rank": 0, "event": "watchdog fired"},
            {"time": "2026-01-01T00:00:01Z", "rank": 77, "event": "loader stalled"},
        ],
    }


def test_rank_map_places_1024_ranks_on_nodes_and_colours_each_role():
    fig = charts.rank_map_figure(_job())
    trace = fig["data"][0]
    assert len(trace["y"]) == 128 and len(trace["x"]) == 8
    role = {charts.ROLES[z]: None for row in trace["z"] for z in row}
    assert set(role) == set(charts.ROLES)
    # rank 77 sits on node-009, local rank 5, as a straggler
    assert trace["text"][9][5] == "rank 77 · node-009 · local 5 · straggler"
    assert trace["z"][127][7] == charts.ROLES.index("missing")
    assert trace["z"][37][4] == charts.ROLES.index("crashed")
    assert "crashed 1" in fig["note"] and "missing 1" in fig["note"]


def test_rank_map_shows_each_ranks_straggler_score_when_metrics_gave_it():
    doc = _job(world=16)
    doc["localization"]["straggler_scores"] = {"5": 0.614, "6": 1.002}
    trace = charts.rank_map_figure(doc)["data"][0]
    assert trace["text"][0][5].endswith("straggler score 0.61")
    assert trace["text"][0][6].endswith("straggler score 1.00")
    assert "score" not in trace["text"][0][4]


def test_rank_map_is_absent_without_ranks():
    assert charts.rank_map_figure(None) is None
    assert charts.rank_map_figure({"job": {}}) is None


def _table(ranks: int, steps: int, **extra) -> MetricsTable:
    rank = np.repeat(np.arange(ranks), steps)
    step = np.tile(np.arange(steps), ranks)
    cols = {"rank": rank, "step": step, "step_time": 1.0 + (rank == 77) * 0.5 + step * 0.0}
    for name, fn in extra.items():
        cols[name] = fn(rank, step)
    return MetricsTable(pa.table(cols))


def test_step_time_heatmap_is_downsampled_to_screen_resolution():
    fig = charts.step_time_heatmap(_table(1024, 2000))
    trace = fig["data"][0]
    assert len(trace["z"]) == 1024
    assert len(trace["z"][0]) <= charts.MAX_STEP_BINS
    assert trace["z"][77][0] == 1.5 and trace["z"][76][0] == 1.0
    assert "shown as 1024 x 600 bins" in fig["note"]
    json.dumps(fig)  # JSON-clean: no NaN


def test_more_ranks_than_rows_are_binned():
    r, _c, m = charts.binned_matrix(
        np.arange(4096, dtype=float), np.zeros(4096), np.ones(4096), max_rows=1024
    )
    assert len(r) == 1024 and r[1] == 4.0 and m.shape == (1024, 1)


def test_compute_vs_comm_per_rank_and_host():
    t = _table(
        16,
        10,
        compute_time=lambda r, s: np.full(len(r), 4.1),
        comm_time=lambda r, s: np.where(r >= 8, 7.1, 2.9),
    )
    hosts = pa.array([f"node-{x // 8}" for x in t.column("rank")])
    t = MetricsTable(t.table.append_column("host", hosts))
    fig = charts.compute_comm_figure(t)
    assert fig["data"][1]["y"][9] == 7.1
    # the caption says how far the busiest host is from the others, not just its name
    assert fig["note"].startswith("node-1 spends 7.10 s per step communicating, 1.4 times")


def test_loss_figure_marks_the_first_nan_step():
    t = _table(
        4,
        50,
        loss=lambda r, s: np.where(s >= 30, np.nan, 5.0 - s * 0.01),
        grad_norm=lambda r, s: np.ones(len(r)),
    )
    fig = charts.loss_figure(t)
    assert fig["note"] == "First non-finite loss at step 30"
    markers = next(d for d in fig["data"] if d["name"] == "loss NaN/inf")
    assert markers["x"][0] == 30
    json.dumps(fig)


def _memory_doc(shapes: dict[str, int]) -> dict:
    return {"isolation": {"memory": {"shapes": shapes, "ranks": []}}}


def test_memory_figure_names_the_shape_the_memory_analyzer_found():
    t = _table(2, 200, mem_allocated=lambda r, s: 60 + s * 0.05)
    fig = charts.memory_figure(_memory_doc({"slope": 2}), t)
    assert fig["shape"] == "slope"
    assert fig["layout"]["title"]["text"] == "Memory: Steady slope"


def test_memory_figure_never_recomputes_the_shape():
    # the curves look like a slope, but the analysis said staircase on one rank: the chart
    # says what the analysis said, and names the most telling shape when ranks differ
    t = _table(2, 200, mem_allocated=lambda r, s: 60 + s * 0.05)
    fig = charts.memory_figure(_memory_doc({"flat": 1, "staircase": 1}), t)
    assert fig["shape"] == "staircase"
    assert "flat: 1 rank(s)" in fig["note"] and "staircase: 1 rank(s)" in fig["note"]
    unnamed = charts.memory_figure(None, t)
    assert unnamed["shape"] is None and unnamed["layout"]["title"]["text"] == "Memory"


def test_memory_chart_and_memory_finding_agree_on_the_engine_output():
    from rankscope import analyze
    from rankscope.model import ParseResult

    t = _table(4, 200, mem_allocated=lambda r, s: 60 + (s // 50) * 3.0)
    doc = analyze([ParseResult(name="m.csv", kind="metrics", metrics=t)])
    finding = next(f for f in doc["findings"] if f["kind"].startswith("memory_"))
    fig = charts.memory_figure(doc, t)
    assert finding["kind"] == f"memory_{fig['shape']}"


def test_first_errors_keeps_each_ranks_earliest_event_and_escapes_text():
    fig = charts.first_errors_figure(_job())
    trace = fig["data"][0]
    assert trace["y"] == [77, 0]
    assert trace["text"][0] == "rank 77: loader stalled"
    doc = _job()
    doc["timeline"] = doc["timeline"][:1]
    text = charts.first_errors_figure(doc)["data"][0]["text"][0]
    assert "<script>" not in text and "&lt;script&gt;" in text


def test_incident_figures_skips_figures_without_data():
    assert charts.incident_figures(None, None) == []
    ids = [f["id"] for f in charts.incident_figures(_job(64), _table(64, 20))]
    assert ids == ["rank-map", "step-time", "first-errors"]


def test_the_slowest_cells_of_the_step_time_heatmap_are_drawn_darkest():
    from plotly.colors import unlabel_rgb

    trace = charts.step_time_heatmap(_table(16, 20))["data"][0]
    # plotly.js reads a *named* scale its own way; an explicit list means what it says.
    assert not isinstance(trace["colorscale"], str), "name scales plotly.js may reverse"
    scale = [list(pair) for pair in trace["colorscale"]]
    if trace.get("reversescale"):
        scale = [[1 - pos, colour] for pos, colour in reversed(scale)]

    def brightness(colour: str) -> float:
        rgb = unlabel_rgb(colour) if colour.startswith("rgb") else None
        if rgb is None:  # '#rrggbb'
            rgb = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
        return sum(rgb)

    slowest, fastest = scale[-1][1], scale[0][1]
    assert brightness(slowest) < brightness(fastest)
