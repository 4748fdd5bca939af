"""The analysis panel, the re-run button and triage.json, as a user sees them."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.urls import reverse

from apps.analysis import services
from apps.analysis.models import AnalysisRun, RunStatus
from apps.ingest.models import Artifact
from tests.analysis.conftest import SCRIPT

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(autouse=True)
def _clear_cache():
    cache.clear()


def _urls(incident) -> dict[str, str]:
    return {
        "panel": reverse("analysis:panel", args=[incident.code]),
        "rerun": reverse("analysis:rerun", args=[incident.code]),
        "json": reverse("analysis:triage_json", args=[incident.code]),
    }


def _analysed(incident) -> AnalysisRun:
    run = services.analysis_request(incident=incident, trigger="ingest")
    return services.analysis_execute(run_id=run.pk, task_id=run.task_id)


def test_outsiders_get_404_on_every_url(incident, job, outsider_client, client):
    _analysed(incident)
    urls = _urls(incident)
    assert outsider_client.get(urls["panel"]).status_code == 404
    assert outsider_client.get(urls["panel"] + "?poll=1", **HTMX).status_code == 404
    assert outsider_client.get(urls["json"]).status_code == 404
    assert outsider_client.post(urls["rerun"]).status_code == 404
    assert AnalysisRun.objects.count() == 1
    # anonymous visitors are sent to sign in, never shown the analysis
    assert client.get(urls["json"]).status_code == 302


def test_an_incident_without_files_shows_the_empty_state(incident, teammate_client):
    response = teammate_client.get(_urls(incident)["panel"], **HTMX)
    assert response.status_code == 200
    assert "No logs yet — upload them under “Logs and metrics”" in response.content.decode()


def test_the_incident_page_loads_the_panel_itself_with_a_link_fallback(incident, owner_client):
    body = owner_client.get(reverse("incidents:detail", args=[incident.code])).content.decode()
    panel_url = _urls(incident)["panel"]
    assert f'hx-get="{panel_url}?poll=1&amp;since=' in body
    assert 'hx-trigger="load"' in body
    assert f'href="{panel_url}"' in body


def test_progress_polls_while_running_then_the_page_is_told_the_verdict_landed(
    incident, job, teammate_client
):
    run = services.analysis_request(incident=incident, trigger="ingest")
    url = _urls(incident)["panel"] + "?poll=1"
    response = teammate_client.get(url, **HTMX)
    body = response.content.decode()
    assert response.status_code == 200
    assert "every 2s" in body
    assert "All 4 files parsed · analysing" in body
    seen = response.content.decode().split("seen=", 1)[1].split('"', 1)[0]

    # Nothing moved: 204, htmx keeps what it shows.
    response = teammate_client.get(f"{url}&seen={seen}", **HTMX)
    assert response.status_code == 204

    services.analysis_execute(run_id=run.pk, task_id=run.task_id)
    response = teammate_client.get(f"{url}&seen={seen}", **HTMX)
    assert response.status_code == 200
    body = response.content.decode()
    assert "every 2s" not in body and "every 15s" in body  # idle: slow poll (API, CLI)
    # the rest of the page swaps in the verdict, the phases and the charts
    assert "rankscope:analysed" in response["HX-Trigger-After-Swap"]
    # on the incident page the findings are not repeated in the panel
    assert 'class="finding"' not in body


def test_files_posted_elsewhere_wake_the_idle_page(incident, job, teammate_client):
    run = _analysed(incident)
    url = _urls(incident)["panel"] + "?poll=1"
    body = teammate_client.get(url, **HTMX).content.decode()
    seen = body.split("seen=", 1)[1].split('"', 1)[0]
    # a new file arrives by the API: the next slow poll sees it and refreshes the file table
    Artifact.objects.create(
        incident=incident,
        original_name="rank9.log",
        display_name="rank9.log",
        size=1,
        parse_status="queued",
    )
    response = teammate_client.get(f"{url}&seen={seen}", **HTMX)
    assert response.status_code == 200
    assert "artifacts-changed" in response["HX-Trigger-After-Swap"]
    assert "Parsing files: 4/5" in response.content.decode()
    assert run.pk


def test_parsed_files_without_a_run_yet_keep_the_panel_polling(incident, job, teammate_client):
    # every file parsed, the debounce window still open: the run is coming
    response = teammate_client.get(_urls(incident)["panel"] + "?poll=1", **HTMX)
    body = response.content.decode()
    assert "every 2s" in body
    assert "the analysis starts in a moment" in body


def test_the_panel_keeps_polling_while_files_are_still_parsed(incident, job, teammate_client):
    Artifact.objects.filter(pk=job[0].pk).update(parse_status="parsing")
    response = teammate_client.get(_urls(incident)["panel"] + "?poll=1", **HTMX)
    assert response.status_code == 200
    assert "Parsing files: 3/4" in response.content.decode()


def test_the_summary_ranks_recommendations_and_findings_are_shown(incident, job, owner_client):
    run = _analysed(incident)
    body = owner_client.get(_urls(incident)["panel"]).content.decode()
    tri = run.document["triage"]
    assert tri["summary"] and tri["summary"].split(" (")[0][:40] in body
    assert "crash" in body and "CRITICAL" in body and "one_rank" in body
    assert "Culprit" in body and "Initiators" in body
    assert "0-2" in body  # the initiator ranks as a range
    assert "What to do" in body
    assert 'id="findings-triage"' in body and 'id="findings-root_cause"' in body
    # every evidence line links to the evidence viewer at its line
    rank3 = Artifact.objects.get(incident=incident, display_name="rank3.log")
    assert (
        f"/artifacts/{rank3.code}/?line=6" in body  # the viewer resolved the file
        or f"/incidents/{incident.code}/artifacts/?file=rank3.log&amp;line=6" in body
    )


def test_evidence_text_with_a_script_tag_is_shown_as_text(incident, job, owner_client):
    _analysed(incident)
    body = owner_client.get(_urls(incident)["panel"], **HTMX).content.decode()
    assert SCRIPT not in body
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in body


def test_a_failed_run_shows_its_reason(incident, job, owner_client, monkeypatch):
    import rankscope as engine

    def boom(results, **kwargs):
        raise RuntimeError("digest of rank 7 is <b>corrupt</b>")

    monkeypatch.setattr(engine, "analyze", boom)
    _analysed(incident)
    response = owner_client.get(_urls(incident)["panel"] + "?poll=1", **HTMX)
    body = response.content.decode()
    assert response.status_code == 200
    assert "The analysis failed." in body
    assert "digest of rank 7 is &lt;b&gt;corrupt&lt;/b&gt;" in body
    assert "Re-run analysis" in body


def test_files_that_failed_to_parse_are_listed_with_the_reason(incident, job, owner_client):
    from tests.analysis.conftest import add_artifact

    add_artifact(incident, "rank9.log.gz", b"\x1f\x8b", status="failed", parse_error="bad gzip")
    _analysed(incident)
    body = owner_client.get(_urls(incident)["panel"], **HTMX).content.decode()
    assert "Files not analysed" in body
    assert "rank9.log.gz</code>: bad gzip" in body


def test_rerun_button_queues_a_new_run(incident, job, teammate_client):
    first = _analysed(incident)
    response = teammate_client.post(_urls(incident)["rerun"], **HTMX)
    assert response.status_code == 200
    assert 'hx-trigger="every 2s,' in response.content.decode()
    latest = AnalysisRun.objects.exclude(pk=first.pk).get()
    assert latest.trigger == "manual" and latest.status == RunStatus.QUEUED

    # without htmx, the form posts and lands on the analysis page
    response = teammate_client.post(_urls(incident)["rerun"])
    assert response.status_code == 302
    assert AnalysisRun.objects.count() == 2  # one is already queued: no pile-up


def test_triage_json_serves_the_latest_document(incident, job, teammate_client):
    url = _urls(incident)["json"]
    assert teammate_client.get(url).status_code == 404
    run = _analysed(incident)
    response = teammate_client.get(url)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    data = response.json()
    assert data["schema"] == "rankscope.triage/v1"
    assert data["triage"] == run.document["triage"]
