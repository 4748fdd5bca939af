from datetime import timedelta

from rankscope.testing import scenarios_isolation as S

from ._iso_helpers import analyze, assert_evidence_exact, kinds

DEATH = S.T0 + timedelta(seconds=600 + 5 + 1800 + 30)


def _job(**kw):
    files = S.worker_cascade(
        rank=1,
        trigger_line=S.client_loader_error(1, S.T0 + timedelta(seconds=600)).split(" ", 2)[2],
    )
    files.update(S.aistore_target(death=DEATH, **kw))
    return files


def test_failure_chain_counters_and_evidence():
    files = _job(offset_hours=0)
    doc = analyze(files)
    k = kinds(doc)
    assert len(k["storage_failure_chain"]) == 1
    steps = [s["step"] for s in doc["storage"]["chain"]]
    assert steps[0].startswith("storage target under resource pressure")
    assert any("out-of-bounds" in s for s in steps) and any("dropped" in s for s in steps)
    deltas = k["storage_counters"][0]["deltas"]
    assert deltas["err.get.n"] > 0 and deltas["err.getbatch.n"] > 0
    assert_evidence_exact(doc, files, ("storage_failure_chain", "storage_counters"))
    assert doc["storage"]["daemons"]["ais-target-1"]["files"][0]["covers_window"] is True


def test_healthy_storage_raises_no_chain():
    files = S.worker_cascade(rank=1)
    files.update(S.aistore_target(death=DEATH, chain=False))
    k = kinds(analyze(files))
    assert "storage_failure_chain" not in k and "storage_counters" not in k


def test_daemon_restart_inside_the_window_is_reported():
    files = _job(offset_hours=0, restart_at=DEATH - timedelta(minutes=10))
    k = kinds(analyze(files))
    assert k["storage_restart"][0]["hosts"] == ["ais-target-1"]


def test_timezone_offset_found_from_the_job_death():
    doc = analyze(_job(offset_hours=-5))
    assert doc["storage"]["offset_seconds"] == 5 * 3600
    assert "clock_offset" in kinds(doc)


def test_retry_escalation_is_a_cause_and_first_retry_is_not():
    files = S.worker_cascade(rank=2)
    name = sorted(files)[0]
    files[name] += (
        b"[rank0]:2025-05-14 20:05:00 WARNING Retrying 1/5 GET obj: Connection reset by peer\n"
    )
    doc = analyze(files)
    assert "storage_retry_escalation" not in kinds(doc)
    files[name] += (
        b"[rank0]:2025-05-14 20:06:00 WARNING Retrying 5/5 GET obj: Connection reset by peer\n"
    )
    (f,) = kinds(analyze(files))["storage_retry_escalation"]
    assert "attempt 5/5" in f["title"]
