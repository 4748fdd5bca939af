from datetime import timedelta

import rankscope as engine
from rankscope.testing import scenarios_isolation as S

from ._iso_helpers import analyze

REF = {"file", "line", "text"}


def _check_shape(p):
    for h in p["hypotheses"]:
        assert {
            "id",
            "title",
            "description",
            "expected_if_true",
            "test",
            "category",
            "confidence",
            "supporting",
            "refuting",
        } <= set(h)
        assert all(set(r) == REF for r in h["supporting"] + h["refuting"])
    for w in p["five_whys"]:
        assert w["levels"] and all({"why", "answer", "evidence"} <= set(lv) for lv in w["levels"])
        assert isinstance(w["contributing_factors"], list)
    assert {f["kind"] for f in p["fixes"]} <= {"immediate", "structural"}
    assert {x["checklist"] for x in p["prevention"]} == {"pre_training", "scaling_up", "long_runs"}


def test_oom_case_proposals_follow_the_contract_and_are_stable():
    files = S.worker_cascade(rank=5)
    doc = analyze(files)
    p = doc["proposals"]
    _check_shape(p)
    assert p["hypotheses"][0]["category"] == "OOM" and "micro_batch" in p["hypotheses"][0]["test"]
    assert p["hypotheses"][0]["supporting"]
    assert any(f["kind"] == "immediate" and "micro-batch" in f["title"] for f in p["fixes"])
    levels = p["five_whys"][0]["levels"]
    assert levels[0]["why"] == "Why did the job fail?" and len(levels) >= 4
    for lv in levels:
        for ev in lv["evidence"]:
            assert files[ev["file"]].decode().split("\n")[ev["line"] - 1] == ev["text"]
    assert [h["id"] for h in analyze(files)["proposals"]["hypotheses"]] == [
        h["id"] for h in p["hypotheses"]
    ]


def test_network_case_names_the_nodes_in_the_nccl_tests_command():
    files = {
        "good.txt": S.nccl_tests(hosts=["gpu-1", "gpu-2"], busbw=42.0),
        "bad.txt": S.nccl_tests(hosts=["gpu-7", "gpu-8"], busbw=17.0),
        "metrics.csv": S.metrics_csv(ranks=8, steps=40, slow_comm_hosts=(1,)),
    }
    p = analyze(files)["proposals"]
    h = next(h for h in p["hypotheses"] if h["category"] == "NETWORK")
    assert "all_reduce_perf" in h["test"] and "gpu-7" in h["test"]


def test_storage_case_proposes_storage_hypothesis_with_evidence():
    death = S.T0 + timedelta(seconds=600 + 5 + 1800 + 30)
    files = S.worker_cascade(
        rank=1,
        trigger_line=S.client_loader_error(1, S.T0 + timedelta(seconds=600)).split(" ", 2)[2],
    )
    files.update(S.aistore_target(death=death))
    p = analyze(files)["proposals"]
    _check_shape(p)
    h = next(h for h in p["hypotheses"] if h["category"] == "STORAGE_IO")
    assert h["supporting"]


def test_nothing_wrong_proposes_nothing():
    doc = engine.analyze([])
    assert not doc.get("proposals")


def test_healthy_run_with_retry_noise_proposes_nothing():
    files = S.worker_cascade(rank=1)
    healthy = {
        "train.log": b"[rank0]:2025-05-14 20:00:00 INFO step 1\n"
        b"[rank0]:2025-05-14 20:05:00 WARNING Retrying 1/5 GET obj: Connection reset by peer\n"
        b"[rank0]:2025-05-14 21:00:00 INFO Training completed\n"
    }
    assert files and not analyze(healthy).get("proposals")
