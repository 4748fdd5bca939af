import pytest
from django.urls import reverse

from apps.postmortems import services
from apps.postmortems.models import IncidentSignature
from apps.postmortems.selectors import similar_incidents

from .conftest import add_analysis, make_incident, triage_doc

pytestmark = pytest.mark.django_db


def test_similar_incidents_are_ranked_with_reasons_and_a_recurring_host_is_called_out(
    team, owner, owner_client
):
    same_host = make_incident(
        team, owner, title="Slow AllReduce in March", job_id="1", doc=triage_doc()
    )
    same_class = make_incident(
        team,
        owner,
        title="Other network slowdown",
        job_id="2",
        doc=triage_doc(hosts=("node-77",), kinds=("allreduce_slow",)),
    )
    unrelated = make_incident(
        team,
        owner,
        title="NaN loss",
        job_id="3",
        doc=triage_doc(
            category="NUMERICAL", shape="diverge", hosts=(), kinds=("nan_loss",), op="BROADCAST"
        ),
    )
    for incident in [same_host, same_class, unrelated]:
        services.incident_signature_refresh(incident=incident)
    today = make_incident(team, owner, title="Slow AllReduce today", job_id="4", doc=triage_doc())
    services.incident_signature_refresh(incident=today)

    report = similar_incidents(incident=today)
    assert [m.code for m in report.matches] == [same_host.code, same_class.code]
    assert report.matches[0].score == 1.0
    assert "same host: node-09" in report.matches[0].reasons
    assert "same errors: allreduce_slow" in report.matches[1].reasons
    assert "Host node-09 also appears in 1 other incident" in report.recurring

    panel = owner_client.get(
        reverse("incident_postmortem:panel", args=[today.code])
    ).content.decode()
    assert "Slow AllReduce in March" in panel and "NaN loss" not in panel
    assert "Recurring:" in panel and "node-09" in panel


def test_similar_incidents_stay_within_the_team(team, other_team, owner, outsider):
    theirs = make_incident(
        other_team, outsider, title="Their twin incident", job_id="9", doc=triage_doc()
    )
    services.incident_signature_refresh(incident=theirs)
    mine = make_incident(team, owner, title="Mine", job_id="8", doc=triage_doc())
    services.incident_signature_refresh(incident=mine)
    assert similar_incidents(incident=mine).matches == []
    assert similar_incidents(incident=mine).recurring == []


def test_the_signature_is_stored_once_per_analysis_and_refreshed_by_a_newer_one(team, owner):
    incident = make_incident(
        team, owner, title="Evolving", job_id="7", doc=triage_doc(category="OOM")
    )
    first = services.incident_signature_refresh(incident=incident)
    assert first.category == "OOM"
    assert services.incident_signature_refresh(incident=incident).updated_at == first.updated_at
    add_analysis(incident, triage_doc(category="HARDWARE", hosts=("node-12",)))
    refreshed = services.incident_signature_refresh(incident=incident)
    assert refreshed.category == "HARDWARE" and refreshed.hosts == ["node-12"]
    assert IncidentSignature.objects.filter(incident=incident).count() == 1


def test_an_incident_without_analysis_has_no_signature(team, owner):
    incident = make_incident(team, owner, title="No logs yet", job_id="6")
    assert services.incident_signature_refresh(incident=incident) is None
    assert similar_incidents(incident=incident).signature is None
