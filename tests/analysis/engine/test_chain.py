from datetime import timedelta

import pytest

from rankscope.testing import scenarios_isolation as S

from ._iso_helpers import analyze, assert_evidence_exact


@pytest.mark.parametrize("rank", [2, 6])
def test_timeout_after_an_oom_is_oom_and_the_chain_runs_trigger_to_teardown(rank):
    files = S.worker_cascade(rank=rank)
    doc = analyze(files)
    rc = doc["root_cause"]
    assert rc["category"] == "OOM"
    stages = [s["stage"] for s in rc["chain"]]
    assert stages[0] == "trigger" and stages[-1] == "taken_down"
    assert stages.index("collective_hangs") < stages.index("watchdogs_fire")
    assert rc["chain"][0]["rank"] == rank
    times = [s["time"] for s in rc["chain"] if s["time"]]
    assert times == sorted(times)
    for s in rc["chain"]:
        for ev in s["evidence"]:
            assert files[ev["file"]].decode().split("\n")[ev["line"] - 1] == ev["text"]


def test_data_loader_error_trigger_makes_the_category_data():
    files = S.worker_cascade(
        rank=3, trigger_line="ERROR AISBatchLoaderError: batch returned 7 of 8 objects"
    )
    doc = analyze(files)
    assert doc["root_cause"]["chain"][0]["stage"] == "trigger"
    assert doc["root_cause"]["category"] in ("DATA", "STORAGE_IO")


@pytest.mark.parametrize("hours", [-3, 2])
def test_storage_events_are_aligned_onto_the_worker_clock(hours):
    death = S.T0 + timedelta(seconds=600 + 5 + 1800 + 30)
    files = S.worker_cascade(
        rank=1,
        trigger_line=S.client_loader_error(1, S.T0 + timedelta(seconds=600)).split(" ", 2)[2],
    )
    files.update(S.aistore_target(offset_hours=hours, death=death))
    doc = analyze(files)
    assert doc["storage"]["offset_seconds"] == -hours * 3600
    ais_items = [t for t in doc["timeline"] if t["file"].startswith("aistarget")]
    assert ais_items and all(t["clock_offset_seconds"] == -hours * 3600 for t in ais_items)
    # aligned AIS errors fall inside the worker-side failure window, not hours away
    for t in ais_items:
        if t["event"] != "ais_restart":
            assert "2025-05-14T20" in t["time"]


def test_untimed_lines_keep_file_order():
    files = S.worker_cascade(rank=5)
    doc = analyze(files)
    chain = doc["root_cause"]["chain"]
    leave = next(s for s in chain if s["stage"] == "leaves_loop")
    assert leave["evidence"][0]["text"].endswith("Traceback (most recent call last):")
    assert_evidence_exact(doc, files, ("root_cause",))
