"""Requesting and executing analysis runs, in process, against PostgreSQL."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.core.cache import cache
from django.db import connection
from django.utils import timezone

import rankscope as engine
from apps.analysis import services
from apps.analysis.models import AnalysisRun, Finding, RunStatus
from apps.analysis.services import execute as execute_step
from apps.analysis.services import request as request_step
from apps.incidents.models import IncidentEvent
from apps.ingest.models import Artifact
from rankscope import analyzers as engine_analyzers
from tests.analysis.conftest import SCRIPT, add_artifact, rank_log


@pytest.fixture(autouse=True)
def _no_settle_window():
    cache.clear()
    yield
    cache.clear()


def _run(incident, trigger="ingest") -> AnalysisRun:
    run = services.analysis_request(incident=incident, trigger=trigger)
    assert run is not None
    return services.analysis_execute(run_id=run.pk, task_id=run.task_id)


def test_it_returns_none_when_there_is_nothing_to_analyse(incident):
    assert services.analysis_request(incident=incident, trigger="ingest") is None
    assert not AnalysisRun.objects.exists()


def test_it_waits_while_a_file_is_still_being_parsed(incident, job):
    Artifact.objects.filter(pk=job[0].pk).update(parse_status="parsing")
    assert services.analysis_request(incident=incident, trigger="ingest") is None
    assert not AnalysisRun.objects.exists()


def test_it_makes_one_run_per_input_set(incident, job):
    first = services.analysis_request(incident=incident, trigger="ingest")
    again = services.analysis_request(incident=incident, trigger="ingest")
    assert first is not None and again.pk == first.pk
    assert sorted(first.inputs) == sorted(a.pk for a in job)
    assert IncidentEvent.objects.filter(incident=incident, kind="analysis.requested").count() == 1

    add_artifact(incident, "rank4.log", rank_log(4))
    newer = services.analysis_request(incident=incident, trigger="ingest")
    assert newer.pk != first.pk
    assert AnalysisRun.objects.filter(incident=incident).count() == 2


def test_a_manual_rerun_makes_a_new_run_unless_one_is_active(incident, owner, job):
    first = services.analysis_request(incident=incident, trigger="ingest")
    assert services.analysis_request(incident=incident, trigger="manual", actor=owner) == first
    services.analysis_execute(run_id=first.pk, task_id=first.task_id)
    rerun = services.analysis_request(incident=incident, trigger="manual", actor=owner)
    assert rerun.pk != first.pk
    assert rerun.status == RunStatus.QUEUED
    assert rerun.requested_by == owner


@pytest.mark.django_db(transaction=True)
def test_many_simultaneous_requests_make_exactly_one_run(incident, job, monkeypatch):
    sent: list[str] = []
    monkeypatch.setattr(
        request_step, "_enqueue_on_commit", lambda run: sent.append(run.task_id)
    )  # count enqueues without a broker; the commit path itself is covered by worker tests
    callers = 16
    barrier = threading.Barrier(callers)
    results: list[int | None] = []
    errors: list[BaseException] = []

    def call() -> None:
        try:
            barrier.wait()
            run = services.analysis_request(incident=incident, trigger="ingest")
            results.append(run.pk if run else None)
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=call) for _ in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    assert len(results) == callers
    assert len(set(results)) == 1 and results[0] is not None
    assert AnalysisRun.objects.filter(incident=incident).count() == 1
    assert len(sent) == 1
    assert IncidentEvent.objects.filter(incident=incident, kind="analysis.requested").count() == 1


def test_a_settle_window_defers_requests_until_uploads_are_quiet(incident, job, monkeypatch):
    scheduled: list[tuple] = []
    from apps.analysis import tasks

    monkeypatch.setattr(
        tasks.analysis_settle, "apply_async", lambda args, countdown: scheduled.append(countdown)
    )
    assert services.analysis_request(incident=incident, trigger="slurm", settle_seconds=30) is None
    # the parse fan-in asks too, but the window is open: no run yet
    assert services.analysis_request(incident=incident, trigger="ingest") is None
    assert not AnalysisRun.objects.exists()

    # the check fires while a file arrived 5 s ago: it looks again later
    services.analysis_settle_check(incident_id=incident.pk, trigger="slurm", settle_seconds=30)
    assert not AnalysisRun.objects.exists()
    assert scheduled and 20 <= scheduled[-1] <= 30

    Artifact.objects.filter(incident=incident).update(
        created_at=timezone.now() - timedelta(seconds=31)
    )
    services.analysis_settle_check(incident_id=incident.pk, trigger="slurm", settle_seconds=30)
    run = AnalysisRun.objects.get(incident=incident)
    assert run.trigger == "slurm"


def test_the_controllers_job_end_lets_the_last_parse_start_the_analysis_at_once(
    incident, job, monkeypatch, django_capture_on_commit_callbacks
):
    from apps.analysis import tasks
    from apps.api.services import analysis_after_ingest

    monkeypatch.setattr(tasks.analysis_settle, "apply_async", lambda args, countdown: None)
    Artifact.objects.filter(pk=job[0].pk).update(parse_status="parsing")
    # the nodes' posts opened a debounce window; the controller says the job is over
    # while a file is still being parsed
    assert services.analysis_request(incident=incident, trigger="slurm", settle_seconds=30) is None
    with django_capture_on_commit_callbacks(execute=True):
        analysis_after_ingest(incident=incident, job_complete=True)
    assert not AnalysisRun.objects.exists()
    # the last parse's fan-in no longer waits out the window
    Artifact.objects.filter(pk=job[0].pk).update(parse_status="parsed")
    assert services.analysis_request(incident=incident, trigger="ingest") is not None


def test_after_the_job_end_the_pending_settle_check_does_not_reopen_the_window(
    incident, job, monkeypatch, django_capture_on_commit_callbacks
):
    from apps.analysis import tasks
    from apps.api.services import analysis_after_ingest

    scheduled: list[float] = []
    monkeypatch.setattr(
        tasks.analysis_settle, "apply_async", lambda args, countdown: scheduled.append(countdown)
    )
    Artifact.objects.filter(pk=job[0].pk).update(parse_status="parsing")
    # the first node's post opened the window and scheduled its check
    with django_capture_on_commit_callbacks(execute=True):
        assert (
            services.analysis_request(incident=incident, trigger="slurm", settle_seconds=30) is None
        )
    assert len(scheduled) == 1
    with django_capture_on_commit_callbacks(execute=True):
        analysis_after_ingest(incident=incident, job_complete=True)
    # the check fires while the last upload is recent (the burst just ended): it must not
    # open the window again, or the last parse would wait it out
    services.analysis_settle_check(incident_id=incident.pk, trigger="slurm", settle_seconds=30)
    assert len(scheduled) == 1
    assert cache.get(request_step.settle_key(incident.pk)) is None
    Artifact.objects.filter(pk=job[0].pk).update(parse_status="parsed")
    assert services.analysis_request(incident=incident, trigger="ingest") is not None

    # a node posting after the job's end opens a new window, which waits as before
    with django_capture_on_commit_callbacks(execute=True):
        assert (
            services.analysis_request(incident=incident, trigger="slurm", settle_seconds=30) is None
        )
    services.analysis_settle_check(incident_id=incident.pk, trigger="slurm", settle_seconds=30)
    assert len(scheduled) == 3 and 20 <= scheduled[-1] <= 30


def test_a_run_stores_findings_the_document_severity_and_a_conclusion(incident, job):
    run = _run(incident)
    assert run.status == RunStatus.SUCCEEDED, run.error
    doc = run.document
    assert doc["triage"]["category"] == "OOM"
    assert run.findings.count() == len(doc["findings"]) > 0
    first = run.findings.first()
    assert first.evidence and first.evidence[0]["line"] >= 1
    assert run.engine_version == engine.ENGINE_VERSION
    assert (
        run.progress_current == run.progress_total == len(job) + len(engine.registered_analyzers())
    )
    assert {"load_seconds", "analyze_seconds", "total_seconds", "analyzers"} <= set(run.timings)
    incident.refresh_from_db()
    assert incident.severity == "critical"
    event = IncidentEvent.objects.get(incident=incident, kind="analysis.succeeded")
    assert event.message.startswith("Analysis: crash · OOM · rank 3 (confidence 0.95)")


def test_a_second_delivery_of_a_finished_run_changes_nothing(incident, job):
    run = _run(incident)
    finding_ids = list(run.findings.values_list("pk", flat=True))
    again = services.analysis_execute(run_id=run.pk, task_id=run.task_id)
    assert again.status == RunStatus.SUCCEEDED
    assert list(again.findings.values_list("pk", flat=True)) == finding_ids
    assert IncidentEvent.objects.filter(incident=incident, kind="analysis.succeeded").count() == 1


def test_a_delivery_with_a_stale_fence_writes_nothing(incident, job):
    run = services.analysis_request(incident=incident, trigger="ingest")
    result = services.analysis_execute(run_id=run.pk, task_id="not-the-fence")
    assert result.status == RunStatus.QUEUED
    assert not Finding.objects.exists()


def test_a_redelivered_run_restarts_and_leaves_the_rows_of_one_run(incident, job):
    clean = _run(incident)
    expected = list(clean.findings.values_list("phase", "kind", "title", "evidence"))

    # A second input set whose worker died mid-way: running, our fence, half done.
    add_artifact(incident, "notes.txt", b"nothing to see\n")
    run = services.analysis_request(incident=incident, trigger="ingest")
    AnalysisRun.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING, attempts=1, progress_current=2, started_at=timezone.now()
    )
    done = services.analysis_execute(run_id=run.pk, task_id=run.task_id)
    assert done.status == RunStatus.SUCCEEDED
    assert done.attempts == 2
    got = list(done.findings.values_list("phase", "kind", "title", "evidence"))
    assert got == expected
    assert Finding.objects.filter(run=done).count() == len(done.document["findings"])


def test_a_crashing_analyzer_fails_the_run_with_its_reason(incident, job):
    class Exploding:
        name = "exploding"
        phase = "isolation"
        order = 60

        def run(self, ctx):
            raise RuntimeError("bad day on rank 9")

    engine.register_analyzer(Exploding())
    try:
        run = _run(incident)
    finally:
        engine_analyzers._REGISTRY.pop("exploding", None)
    assert run.status == RunStatus.FAILED
    assert "exploding" in run.error and "bad day on rank 9" in run.error
    # the other analyzers' findings are kept and shown as partial
    assert run.findings.exists()
    event = IncidentEvent.objects.get(incident=incident, kind="analysis.failed")
    assert "bad day on rank 9" in event.message
    incident.refresh_from_db()
    assert incident.severity == "untriaged"


def test_an_engine_crash_fails_the_run(incident, job, monkeypatch):
    def boom(results, **kwargs):
        raise ValueError("corrupt digest")

    monkeypatch.setattr(engine, "analyze", boom)
    run = _run(incident)
    assert run.status == RunStatus.FAILED
    assert run.error == "The analysis engine crashed: ValueError: corrupt digest"
    assert run.finished_at is not None


def test_the_soft_time_limit_fails_the_run_with_the_time_it_took(incident, job, monkeypatch):
    def slow(results, **kwargs):
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(engine, "analyze", slow)
    run = _run(incident)
    assert run.status == RunStatus.FAILED
    assert run.error.startswith("The analysis hit the time limit after ")
    assert run.error.endswith(" s.")


def test_files_that_failed_to_parse_are_named_and_the_others_analysed(incident, job):
    add_artifact(
        incident,
        "rank9.log.gz",
        b"\x1f\x8b truncated",
        status="failed",
        parse_error="truncated gzip stream",
    )
    run = _run(incident)
    assert run.status == RunStatus.SUCCEEDED
    failed = [a for a in run.document["artifacts"] if a.get("error")]
    assert failed == [
        {
            "name": "rank9.log.gz",
            "kind": "rank_log",
            "parser": "",
            "lines": 0,
            "bytes": 12,
            "ranks": 0,
            "error": "truncated gzip stream",
            "warnings": [],
            "parse_status": "failed",
        }
    ]
    assert run.document["triage"]["category"] == "OOM"
    event = IncidentEvent.objects.get(incident=incident, kind="analysis.succeeded")
    assert "1 file(s) could not be read" in event.message


def test_a_parse_result_missing_from_storage_is_reported_not_fatal(incident, job):
    from django.core.files.storage import default_storage

    default_storage.delete(job[0].parsed_key)
    run = _run(incident)
    assert run.status == RunStatus.SUCCEEDED
    names = {a["name"]: a["error"] for a in run.document["artifacts"] if a.get("error")}
    assert "rank0.log" in names


def test_progress_writes_are_throttled(incident, job, django_assert_max_num_queries):
    run = services.analysis_request(incident=incident, trigger="ingest")
    AnalysisRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    progress = execute_step._Progress(run.pk, run.task_id, total=1000)
    with django_assert_max_num_queries(3):
        for i in range(1000):
            progress(i, f"step {i}")
    run.refresh_from_db()
    assert run.progress_message.startswith("step")


def test_evidence_text_is_stored_exactly(incident, job):
    run = _run(incident)
    texts = [ref["text"] for f in run.findings.all() for ref in f.evidence]
    assert any(SCRIPT in t for t in texts)


def test_a_host_blamed_in_past_incidents_is_called_a_repeat_offender(incident, team, owner):
    from apps.incidents.services import incident_create
    from apps.postmortems.models import IncidentSignature

    earlier = incident_create(team=team, title="earlier crash on node-07", actor=owner)
    IncidentSignature.objects.create(incident=earlier, team=team, hosts=["node-07"])
    add_artifact(incident, "error-42-node-06.out", rank_log(0))
    add_artifact(incident, "error-42-node-07.out", rank_log(3, oom=True))

    run = _run(incident)

    assert run.status == RunStatus.SUCCEEDED, run.error
    offenders = [f for f in run.document["findings"] if f["kind"] == "repeat_offender"]
    assert [f["hosts"] for f in offenders] == [["node-07"]]
    # The analysis also leaves this incident's signature for the next one to match against.
    assert "node-07" in IncidentSignature.objects.get(incident=incident).hosts
