"""Metrics in every shape people upload: CSV, JSON lines, Parquet (long and wide), memory
columns under their common names; metric findings quote the raw row of their file."""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

import rankscope as engine
from rankscope.testing import scenarios_isolation as S

from ._iso_helpers import analyze, assert_evidence_exact, kinds


def _parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=100)
    return buf.getvalue()


def test_parquet_long_metrics_give_the_same_table_as_csv() -> None:
    csv = S.metrics_csv(ranks=4, steps=160, mem_shape="staircase")
    pq_bytes = _parquet(pacsv.read_csv(io.BytesIO(csv)))
    assert engine.detect_kind("run/metrics.parquet", pq_bytes[:65536]) == "metrics"
    a = engine.parse_artifact(io.BytesIO(csv), name="metrics.csv")
    b = engine.parse_artifact(io.BytesIO(pq_bytes), name="metrics.parquet")
    assert b.error is None and b.kind == "metrics"
    for col in ("step", "rank", "host", "step_time", "mem_allocated"):
        assert a.metrics.column(col) == b.metrics.column(col)
    assert b.ranks == [0, 1, 2, 3]
    doc = engine.analyze([b])
    (f,) = kinds(doc)["memory_staircase"]
    assert f["ranks"] == [0, 1, 2, 3]
    assert f["evidence"][0]["file"] == "metrics.parquet"


def test_wide_metrics_become_one_row_per_rank_and_quote_the_wide_line() -> None:
    head = "iteration," + ",".join(f"step_time_rank{r},loss_rank{r}" for r in range(6))
    rows = [head]
    for s in range(1, 121):
        vals = []
        for r in range(6):
            st = 2.0 if r == 4 else 1.0  # rank 4 is twice as slow
            vals += [f"{st + 0.001 * (s % 3):.3f}", f"{3 - s / 100:.3f}"]
        rows.append(f"{s}," + ",".join(vals))
    data = ("\n".join(rows) + "\n").encode()
    files = {"metrics_wide.csv": data}
    r = engine.parse_artifact(io.BytesIO(data), name="metrics_wide.csv")
    assert r.error is None, r.error
    assert r.ranks == list(range(6)) and len(r.metrics) == 6 * 120
    doc = analyze(files)
    (f,) = kinds(doc)["straggler"]
    assert f["ranks"] == [4]
    assert_evidence_exact(doc, files)


def test_parquet_wide_metrics_are_melted_too() -> None:
    t = pa.table(
        {
            "step": list(range(1, 51)),
            "rank0/step_time": [1.0] * 50,
            "rank1/step_time": [1.1] * 50,
        }
    )
    r = engine.parse_artifact(io.BytesIO(_parquet(t)), name="perf.parquet")
    assert r.error is None and r.ranks == [0, 1]
    assert sorted(set(r.metrics.column("step_time"))) == [1.0, 1.1]


def test_memory_reserved_and_peak_columns_are_recognised_in_bytes_or_gib() -> None:
    gib = 2**30
    lines = ["step,rank,step_time,memory_allocated,memory_reserved,max_memory_allocated"]
    for s in range(1, 101):
        alloc = 20 * gib
        reserved = alloc + int(s * 0.1 * gib)  # the gap grows: fragmentation
        lines.append(f"{s},0,1.0,{alloc},{reserved},{alloc + gib}")
    data = ("\n".join(lines) + "\n").encode()
    r = engine.parse_artifact(io.BytesIO(data), name="metrics.csv")
    assert {"mem_allocated", "mem_reserved", "mem_peak"} <= set(r.metrics.columns)
    assert abs(r.metrics.column("mem_reserved")[0] - 20.1) < 1e-6
    assert abs(r.metrics.column("mem_peak")[0] - 21.0) < 1e-6
    doc = engine.analyze([r])
    assert "memory_fragmentation" in kinds(doc), [f["kind"] for f in doc["findings"]]
    assert_evidence_exact(doc, {"metrics.csv": data})


def test_jsonl_metric_findings_quote_the_raw_json_line() -> None:
    csv = S.metrics_csv(ranks=4, steps=160, mem_shape="slope").decode().strip().split("\n")
    head = csv[0].split(",")
    out = ['{"event": "start"}']
    for row in csv[1:]:
        obj = dict(zip(head, row.split(","), strict=True))
        out.append(json.dumps({k: (v if k == "host" else float(v)) for k, v in obj.items()}))
    data = ("\n".join(out) + "\n").encode()
    files = {"metrics.jsonl": data}
    doc = analyze(files)
    assert kinds(doc).get("memory_slope")
    assert_evidence_exact(doc, files)
