"""Localization on jobs written by two generators that know nothing of the engine's parser.

``gen_cluster_exports``: per-node logs, per-rank W&B exports with Megatron timer names,
DCGM as a Prometheus long CSV, epoch times, missing ranks.
``gen_srun_jsonl``: one ``srun -l`` log, per-rank JSON lines or one wide Parquet,
nvidia-smi loops, a topology map, times with a UTC offset, missing ranks.
Each case asserts what the on-call engineer reads: shape, category, culprit hosts and
ranks, when it started, and that the cited rows are the files' own lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rankscope import analyze
from rankscope.cli import parse_paths
from rankscope.testing import gen_cluster_exports, gen_srun_jsonl


def _triage(path: Path) -> dict[str, Any]:
    return analyze(parse_paths([path], jobs=1))


def _quotes_are_exact(doc: dict[str, Any], root: Path, kind: str) -> None:
    f = next(f for f in doc["findings"] if f["kind"] == kind)
    for ev in f["evidence"]:
        if ev.get("described"):
            continue
        path = root.parent / ev["file"] if not Path(ev["file"]).is_absolute() else Path(ev["file"])
        if not path.exists():
            path = next(root.rglob(Path(ev["file"]).name))
        lines = path.read_text().split("\n")
        assert lines[ev["line"] - 1] == ev["text"] or ev["text"] in lines[ev["line"] - 1]


def _assert_truth(doc: dict[str, Any], truth: dict[str, Any], steps: int) -> None:
    tr, loc = doc["triage"], doc["localization"]
    assert tr["shape"] == truth["shape"], tr["summary"]
    assert tr["category"] == truth["category"], tr["summary"]
    assert loc["culprit_hosts"] == sorted(truth["hosts"]), tr["summary"]
    if truth.get("ranks") is not None:
        assert loc["culprit_ranks"] == truth["ranks"], tr["summary"]
    if tr["shape"] == "slow":
        sd = loc["slowdown"]
        assert abs(sd["onset_step"] - truth["onset_step"]) <= max(3, steps // 20), sd


CLUSTER = ["network", "thermal", "data"]


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("scenario", CLUSTER)
def test_cluster_exports_slowdowns_are_decomposed(tmp_path: Path, scenario: str, seed: int) -> None:
    missing = (5, 13) if seed == 1 else (0,)
    truth = gen_cluster_exports.write_job(tmp_path / "job", scenario, seed=seed, missing=missing)
    doc = _triage(tmp_path / "job")
    _assert_truth(doc, truth, 240)
    _quotes_are_exact(doc, tmp_path / "job", "slowdown_decomposed")
    title = next(f["title"] for f in doc["findings"] if f["kind"] == "slowdown_decomposed")
    if scenario == "network":
        assert "while compute stayed flat" in title and all(h in title for h in truth["hosts"])
    if scenario == "thermal":
        # the GPU, not only the host: DCGM's gpu label mapped to the rank on that host
        assert f"GPU {truth['gpu']} on {truth['hosts'][0]}" in title and "SM clock" in title
        assert doc["localization"]["slowdown"]["gpus"][0]["rank"] == truth["ranks"][0]
    # straggler scores for every rank that reported, and none for the missing ones
    scores = doc["localization"]["straggler_scores"]
    assert not set(scores) & {str(r) for r in missing}
    assert len(scores) == truth["world"] - len(missing)
    if scenario in ("thermal", "data"):
        worst = min(scores, key=lambda r: scores[r])
        assert int(worst) == truth["ranks"][0] and scores[worst] < 0.75


def test_cluster_exports_unplaced_columns_are_listed(tmp_path: Path) -> None:
    gen_cluster_exports.write_job(tmp_path / "job", "healthy", seed=3)
    doc = _triage(tmp_path / "job")
    assert doc["triage"]["shape"] == "none"
    files = {Path(f["file"]).name: f for f in doc["metrics"]["files"]}
    w = files["run-rank_000.csv"]
    assert w["placed"]["comm_time"] == "grads-all-reduce-time"
    assert w["placed"]["compute_time"] == "forward-backward-time"
    assert set(w["unplaced"]) == {"lr", "_runtime"}
    d = files["dcgm.csv"]
    assert {"gpu_temp", "sm_clock", "power", "host", "gpu"} <= set(d["placed"])
    assert "modelName" in d["unplaced"]


def test_cluster_exports_a_minority_collective_names_only_that_rank(tmp_path: Path) -> None:
    truth = gen_cluster_exports.write_job(tmp_path / "job", "mismatch", seed=4, missing=(2,))
    doc = _triage(tmp_path / "job")
    _assert_truth(doc, truth, 240)
    odd = doc["localization"]["odd_one_out"][0]
    assert odd["ranks"] == truth["ranks"] and odd["majority_count"] == truth["world"] - 2


def test_cluster_exports_a_node_with_another_nccl_build_is_named_not_blamed(tmp_path: Path) -> None:
    truth = gen_cluster_exports.write_job(tmp_path / "job", "version", seed=5, missing=(1,))
    doc = _triage(tmp_path / "job")
    assert doc["triage"]["shape"] == "none"  # a difference, not a failure
    odd = [o for o in doc["localization"]["odd_one_out"] if o["attribute"] == "nccl_version"]
    assert odd and odd[0]["ranks"] == [r for r in truth["odd_version_ranks"] if r != 1]
    assert odd[0]["hosts"] == [truth["odd_host"]]
    assert not [
        o for o in doc["localization"]["odd_one_out"] if o["attribute"] == "NCCL_IB_TIMEOUT"
    ]


SRUN = [
    ("network", "jsonl"),
    ("thermal", "jsonl"),
    ("data", "jsonl"),
    ("network", "parquet_wide"),
    ("thermal", "parquet_wide"),
    ("data", "parquet_wide"),
]


@pytest.mark.parametrize(("scenario", "layout"), SRUN)
def test_srun_jsonl_slowdowns_are_decomposed(tmp_path: Path, scenario: str, layout: str) -> None:
    truth = gen_srun_jsonl.write_job(
        tmp_path / "job", scenario, seed=len(scenario), layout=layout, missing=(6,)
    )
    doc = _triage(tmp_path / "job")
    _assert_truth(doc, truth, 300)
    sd = doc["localization"]["slowdown"]
    # the metrics' times carry +02:00: the onset is told in UTC
    assert sd["onset_time"].startswith(truth["onset_time_utc"][:13])
    if scenario == "network":
        assert sd["switches"] and sd["switches"][0].startswith("switch leaf-x")
    if scenario == "thermal":
        assert sd["gpus"] and sd["gpus"][0]["rank"] == truth["ranks"][0]


def test_srun_log_alone_a_sustained_drop_is_a_slowdown_with_its_start(tmp_path: Path) -> None:
    truth = gen_srun_jsonl.write_job(tmp_path / "job", "iterlog", seed=9)
    doc = _triage(tmp_path / "job")
    assert doc["triage"]["shape"] == "slow"
    sd = doc["localization"]["slowdown"]
    assert abs(sd["onset_step"] - truth["onset_step"]) <= 10  # the log prints every 10 steps
    assert 1.3 <= sd["factor"] <= 1.6
    _quotes_are_exact(doc, tmp_path / "job", "slowdown_decomposed")


def test_srun_healthy_run_is_not_slow(tmp_path: Path) -> None:
    gen_srun_jsonl.write_job(tmp_path / "job", "healthy", seed=2, missing=(3, 4))
    doc = _triage(tmp_path / "job")
    assert doc["triage"]["shape"] == "none"
    assert "slowdown" not in doc["localization"]


def test_the_rank_everyone_waited_for_is_named_without_its_own_timings(tmp_path: Path) -> None:
    """Only the collective time per rank: it rose on every rank but one."""
    import json

    truth = gen_srun_jsonl.write_job(tmp_path / "job", "data", seed=11)
    for f in (tmp_path / "job" / "metrics").iterdir():
        rows = [json.loads(x) for x in f.read_text().splitlines()]
        keep = ("iteration", "global_rank", "node", "ts", "allreduce_ms", "fwd_bwd_ms")
        f.write_text("\n".join(json.dumps({k: r[k] for k in keep if k in r}) for r in rows) + "\n")
    doc = _triage(tmp_path / "job")
    assert doc["localization"]["culprit_ranks"] == truth["ranks"]
    assert doc["triage"]["category"] == "UNKNOWN"  # its own wait is not in the metrics
    assert "waited for rank" in doc["triage"]["summary"]
