"""The verdicts an on-call engineer reads first, on generated multi-rank jobs."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import Jobs


def test_it_names_the_stalled_rank_as_straggler(jobs: Jobs) -> None:
    _, m, doc = jobs.get("data_stall", 128)
    exp = m["expected"]
    assert doc["triage"]["shape"] == "hang"
    assert doc["triage"]["category"] == "DATA"
    assert doc["localization"]["straggler_ranks"] == exp["straggler_ranks"]
    assert doc["localization"]["culprit_ranks"] == exp["culprit_ranks"]
    assert doc["localization"]["culprit_hosts"] == exp["culprit_hosts"]
    assert doc["triage"]["scope"] == "one_rank"


def test_it_lists_the_initiators_and_the_notified_rank(jobs: Jobs) -> None:
    _, m, doc = jobs.get("data_stall", 128)
    loc = doc["localization"]
    assert loc["initiator_ranks"] == m["expected"]["initiator_ranks"]
    assert loc["notified_ranks"] == m["expected"]["notified_ranks"]
    assert loc["dump_signal_from"][0]["rank"] in loc["initiator_ranks"]


def test_it_keeps_nccl_state_for_every_rank_and_sees_the_broadcast_root_ahead(jobs: Jobs) -> None:
    _, m, doc = jobs.get("data_stall", 128)
    rows = doc["localization"]["nccl"]
    assert {r["rank"] for r in rows} == set(range(128))
    roles = {r["rank"]: r["role"] for r in rows}
    culprit = m["expected"]["culprit_ranks"][0]
    assert roles[culprit] == "straggler"
    assert roles[0] == "ahead"
    straggler = next(r for r in rows if r["rank"] == culprit)
    assert straggler["last_enqueued"] == straggler["last_completed"]


def test_a_stall_without_a_data_symptom_is_not_blamed_on_data(jobs: Jobs) -> None:
    _, m, doc = jobs.get("data_stall", 128, symptom=False)
    assert doc["triage"]["shape"] == "hang"
    assert doc["triage"]["category"] != "DATA"
    assert doc["triage"]["confidence"] < 0.6
    assert doc["localization"]["culprit_ranks"] == m["expected"]["culprit_ranks"]


def test_a_fabric_failure_blames_the_network_and_no_rank(jobs: Jobs) -> None:
    _, _, doc = jobs.get("fabric", 128)
    assert doc["triage"]["category"] == "NETWORK"
    assert doc["localization"]["culprit_ranks"] == []
    assert doc["localization"]["straggler_ranks"] == []
    assert doc["triage"]["scope"] == "all_ranks"
    assert any(f["kind"] == "all_ranks_in_collective" for f in doc["findings"])


def test_one_ranks_oom_is_the_root_cause_not_the_timeouts_it_caused(jobs: Jobs) -> None:
    _, m, doc = jobs.get("oom", 128)
    assert doc["triage"]["category"] == "OOM"
    assert doc["triage"]["shape"] == "crash"
    assert doc["localization"]["culprit_ranks"] == m["expected"]["culprit_ranks"]
    assert doc["root_cause"]["chain"][0]["rank"] == m["expected"]["culprit_ranks"][0]
    assert (
        "watchdog" in doc["root_cause"]["chain"][-1]["event"] or len(doc["root_cause"]["chain"]) > 1
    )
    assert doc["triage"]["when"] == "after_hours"


def test_xid_79_on_one_node_blames_that_node(jobs: Jobs) -> None:
    _, m, doc = jobs.get("xid", 128)
    assert doc["triage"]["category"] == "HARDWARE"
    assert doc["localization"]["culprit_hosts"] == m["expected"]["culprit_hosts"]
    assert "Xid 79" in doc["triage"]["summary"]


def test_nan_loss_is_numerical_divergence(jobs: Jobs) -> None:
    _, m, doc = jobs.get("nan", 128)
    assert doc["triage"]["shape"] == "diverge"
    assert doc["triage"]["category"] == "NUMERICAL"
    assert f"step {m['expected']['nan_from_step']}" in doc["triage"]["summary"]


def test_a_slurm_time_limit_is_infrastructure(jobs: Jobs) -> None:
    _, _, doc = jobs.get("time_limit", 128)
    assert doc["triage"]["category"] == "INFRA"
    assert "time limit" in doc["triage"]["summary"]


def test_mismatched_collectives_are_a_software_bug(jobs: Jobs) -> None:
    _, _, doc = jobs.get("mismatch", 128)
    assert doc["triage"]["category"] == "SOFTWARE"
    assert any(f["kind"] == "collective_mismatch" for f in doc["findings"])


def test_a_metrics_only_slowdown_names_the_slow_hosts(jobs: Jobs) -> None:
    _, m, doc = jobs.get("slow_network", 128)
    assert doc["triage"]["shape"] == "slow"
    assert doc["triage"]["category"] == "NETWORK"
    assert doc["localization"]["culprit_hosts"] == m["expected"]["culprit_hosts"]
    assert doc["triage"]["severity"] == "WARNING"


def test_retry_noise_in_a_finished_run_claims_no_failure(jobs: Jobs) -> None:
    _, _, doc = jobs.get("retry_noise", 128)
    assert doc["triage"]["shape"] == "none"
    assert doc["triage"]["severity"] == "OK"
    assert doc["localization"]["culprit_ranks"] == []
    noise = [f for f in doc["findings"] if f["kind"] == "retry_noise"]
    assert noise and "noise" in noise[0]["title"]


@pytest.mark.parametrize(
    "scenario",
    [
        "data_stall",
        "fabric",
        "oom",
        "xid",
        "nan",
        "time_limit",
        "mismatch",
        "slow_network",
        "retry_noise",
    ],
)
def test_every_finding_quotes_an_exact_line_of_its_file(jobs: Jobs, scenario: str) -> None:
    out, _, doc = jobs.get(scenario, 128)
    assert doc["findings"]
    cache: dict[str, list[str]] = {}
    ours = {"job", "nccl", "failures", "torchrun", "retry_noise", "metrics", "verdict"}
    assert ours <= {a["name"] for a in doc["analysis"]["analyzers"]}
    for f in doc["findings"]:
        assert f["evidence"], f
        for ev in f["evidence"]:
            rel = Path(ev["file"]).relative_to(out.name)
            lines = cache.setdefault(
                ev["file"], (out / rel).read_text(encoding="utf-8").split("\n")
            )
            if ev["text"].startswith("pg_status["):
                continue  # flight-recorder pickles have no lines
            assert lines[ev["line"] - 1] == ev["text"], (ev["file"], ev["line"])


def test_the_document_has_the_contract_fields(jobs: Jobs) -> None:
    _, _, doc = jobs.get("oom", 128)
    assert doc["schema"] == "rankscope.triage/v1"
    for key in (
        "job",
        "triage",
        "localization",
        "root_cause",
        "findings",
        "timeline",
        "recommendations",
    ):
        assert key in doc
    assert doc["job"]["world_size"] == 128
    assert doc["job"]["hosts"]["node-00"] == list(range(8))
    assert doc["job"]["ranks_missing"] == []
    assert doc["recommendations"]
