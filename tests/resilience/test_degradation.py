"""One file of an incident cannot be parsed: the analysis still shows what the others
found, and names the file that failed and why."""

from __future__ import annotations

import pickle

import pytest
from django.urls import reverse

from apps.analysis.models import FINISHED, AnalysisRun, RunStatus
from rankscope.archives import Limits
from tests.analysis.conftest import rank_log
from tests.conftest import wait_for
from tests.resilience.conftest import upload

pytestmark = pytest.mark.timeout(60)

BAD = "nccl_trace_rank_3"


def test_a_file_that_fails_to_parse_is_named_on_the_panel_beside_the_others_findings(
    celery_worker_process, incident, owner, owner_client, outsider_client
):
    for r in range(4):
        upload(incident, owner, rank_log(r, oom=r == 3), f"rank{r}.log")
    # a flight-recorder dump that would load a class when unpickled: refused by the parser
    upload(incident, owner, pickle.dumps({"entries": [], "owner": Limits()}), BAD)

    run = wait_for(
        lambda: AnalysisRun.objects.filter(incident=incident, status__in=FINISHED).first(),
        timeout=45,
        message=lambda: f"no finished analysis:\n{celery_worker_process.log()[-3000:]}",
    )
    assert run.status == RunStatus.SUCCEEDED, run.error  # the others were analysed
    assert AnalysisRun.objects.filter(incident=incident).count() == 1
    assert run.findings.filter(ranks__contains=[3]).exists()  # the OOM on rank 3
    bad = incident.artifacts.get(display_name=BAD)
    assert bad.parse_status == "failed" and "refused" in bad.parse_error

    url = reverse("analysis:panel", args=[incident.code])
    html = owner_client.get(url).content.decode()
    assert "Files not analysed" in html
    assert f"<code>{BAD}</code>" in html
    assert "refused" in html.split(f"<code>{BAD}</code>", 1)[1].split("</li>", 1)[0]
    assert "rank3.log" in html  # evidence from the files that did parse
    assert "could not be parsed" in incident.events.get(kind="ingest.parsed").message
    assert outsider_client.get(url).status_code == 404
