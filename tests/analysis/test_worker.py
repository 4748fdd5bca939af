"""With a real Celery worker: an analysis survives its worker being SIGKILLed mid-run."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.db import transaction

from apps.analysis import services
from apps.analysis.models import FINISHED, AnalysisRun, RunStatus
from tests import slowdown
from tests.analysis.conftest import add_job
from tests.conftest import WorkerProcess, process_tree, sigkill, wait_for, worker_env

pytestmark = pytest.mark.timeout(120)


def _findings(run: AnalysisRun) -> list[tuple]:
    return list(run.findings.values_list("order", "phase", "kind", "title", "ranks", "evidence"))


def _request(incident) -> AnalysisRun:
    with transaction.atomic():  # enqueued on commit, as in production
        run = services.analysis_request(incident=incident, trigger="ingest")
    assert run is not None
    return run


def test_a_run_whose_worker_was_killed_completes_on_a_new_worker_with_the_same_findings(
    transactional_db, team, owner, settings
):
    from apps.celery import app
    from apps.incidents.services import incident_create

    cache.clear()
    app.control.purge()
    settings.RANKSCOPE_ANALYSIS_STALE_SECONDS = 1
    killed = incident_create(team=team, title="killed mid-analysis", actor=owner)
    clean = incident_create(team=team, title="analysed in one go", actor=owner)
    add_job(killed, ranks=6, oom_rank=4)
    add_job(clean, ranks=6, oom_rank=4)

    slow = WorkerProcess(queues="analysis", concurrency=1).start(
        worker_env({slowdown.ANALYSIS_SLEEP_ENV: "2"})
    )
    try:
        run = _request(killed)
        wait_for(
            lambda: AnalysisRun.objects.filter(
                pk=run.pk, status=RunStatus.RUNNING, progress_current__gte=1
            ).exists(),
            timeout=40,
            message="the first worker never started the analysis",
        )
        sigkill(process_tree(slow.proc.pid))
        slow.proc.wait(timeout=10)
    finally:
        slow.stop()
    assert AnalysisRun.objects.get(pk=run.pk).status == RunStatus.RUNNING  # died mid-way

    fresh = WorkerProcess(queues="analysis", concurrency=1).start()
    try:
        # the auditor notices the silent run and hands it to the new worker
        wait_for(
            lambda: run.code in services.analysis_audit().requeued,
            timeout=20,
            interval=0.5,
            message="the auditor did not re-queue the orphaned run",
        )
        wait_for(
            lambda: AnalysisRun.objects.get(pk=run.pk).is_finished,
            timeout=40,
            message=f"the re-queued run did not finish:\n{fresh.log()[-3000:]}",
        )
        reference = _request(clean)
        wait_for(
            lambda: AnalysisRun.objects.get(pk=reference.pk).is_finished,
            timeout=40,
            message="the uninterrupted run did not finish",
        )
    finally:
        fresh.stop()

    done = AnalysisRun.objects.get(pk=run.pk)
    reference = AnalysisRun.objects.get(pk=reference.pk)
    assert done.status == reference.status == RunStatus.SUCCEEDED, done.error
    assert done.attempts == 2 and reference.attempts == 1
    assert _findings(done) == _findings(reference)
    assert done.findings.count() == len(done.document["findings"]) > 0
    assert done.document["triage"] == reference.document["triage"]
    assert killed.events.filter(kind="analysis.succeeded").count() == 1


def test_uploads_are_parsed_then_analysed_once_by_real_workers(
    celery_worker_process, team, owner, tmp_path
):
    """upload → parse tasks → fan-in → one analysis run, all on a real worker."""
    from apps.incidents.services import incident_create
    from apps.ingest.services import artifact_upload
    from rankscope.testing.generate import generate

    cache.clear()
    incident = incident_create(team=team, title="hung at step 4200", actor=owner)
    expected = generate("data_stall", tmp_path, ranks=32)["expected"]
    files = sorted(p for p in tmp_path.iterdir() if p.name != "manifest.json")
    for path in files:
        with path.open("rb") as fp:
            artifact_upload(incident=incident, fileobj=fp, name=path.name, actor=owner)

    run = wait_for(
        lambda: AnalysisRun.objects.filter(incident=incident, status__in=FINISHED).first(),
        timeout=60,
        message=f"no finished analysis:\n{celery_worker_process.log()[-3000:]}",
    )
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert AnalysisRun.objects.filter(incident=incident).count() == 1
    assert len(run.inputs) == len(files)
    triage = run.document["triage"]
    assert (triage["shape"], triage["category"]) == (expected["shape"], expected["category"])
    assert run.document["localization"]["culprit_ranks"] == expected["culprit_ranks"]
    assert run.findings.count() == len(run.document["findings"]) > 0
    incident.refresh_from_db()
    assert incident.severity == triage["severity"].lower()
    conclusion = incident.events.get(kind="analysis.succeeded").message
    assert conclusion.startswith(f"Analysis: hang · DATA · rank {expected['culprit_ranks'][0]} on")
