import pytest
from django.urls import reverse

from apps.incidents.models import Incident, IncidentEvent, Phase, Status

pytestmark = pytest.mark.django_db


def test_it_sends_anonymous_visitors_to_sign_in(client, incident):
    response = client.get(reverse("incidents:detail", args=[incident.code]))
    assert response.status_code == 302
    assert reverse("login") in response["Location"]


@pytest.mark.parametrize("who", ["owner_client", "teammate_client"])
def test_team_members_see_the_incident_and_its_phases(request, who, incident):
    client = request.getfixturevalue(who)
    response = client.get(reverse("incidents:detail", args=[incident.code]))
    assert response.status_code == 200
    body = response.content.decode()
    assert incident.title in body
    for label in ["Triage", "Localization", "Isolation", "Root cause", "Resolution"]:
        assert label in body
    assert 'aria-current="step"' in body


@pytest.mark.parametrize(
    ("name", "method"),
    [
        ("incidents:detail", "get"),
        ("incidents:phase", "post"),
        ("incidents:status", "post"),
    ],
)
def test_outsiders_get_404_on_every_incident_url(outsider_client, incident, name, method):
    url = reverse(name, args=[incident.code])
    response = getattr(outsider_client, method)(url, {"phase": "isolation", "status": "closed"})
    assert response.status_code == 404
    incident.refresh_from_db()
    assert incident.phase == Phase.TRIAGE
    assert incident.status == Status.OPEN


def test_the_list_shows_only_my_teams_incidents(owner_client, outsider_client, incident):
    assert incident.title in owner_client.get(reverse("incidents:list")).content.decode()
    assert incident.title not in outsider_client.get(reverse("incidents:list")).content.decode()


def test_the_list_filters_by_status_and_text(owner_client, incident, team, owner):
    from apps.incidents.services import incident_change_status, incident_create

    other = incident_create(team=team, title="Loss went NaN at step 90k", actor=owner)
    incident_change_status(incident=other, to_status="mitigated", actor=owner)
    url = reverse("incidents:list")
    body = owner_client.get(url, {"status": "mitigated"}).content.decode()
    assert other.title in body and incident.title not in body
    body = owner_client.get(url, {"q": "hung"}).content.decode()
    assert incident.title in body and other.title not in body


def test_the_list_answers_htmx_with_the_results_partial(owner_client, incident):
    response = owner_client.get(
        reverse("incidents:list"), HTTP_HX_REQUEST="true", HTTP_HX_TARGET="incident-results"
    )
    body = response.content.decode()
    assert incident.title in body
    assert "<html" not in body


def test_the_list_is_paginated(owner_client, team, owner):
    from apps.incidents.services import incident_create

    for i in range(30):
        incident_create(team=team, title=f"incident {i:02d}", actor=owner)
    first = owner_client.get(reverse("incidents:list")).content.decode()
    second = owner_client.get(reverse("incidents:list"), {"page": 2}).content.decode()
    assert "Page 1 of 2" in first and "incident 29" in first
    assert "Page 2 of 2" in second and "incident 00" in second


def test_a_member_opens_an_incident_with_the_team_price(teammate_client, team):
    response = teammate_client.post(
        reverse("incidents:create"),
        {
            "team": team.pk,
            "title": "NCCL timeout on 1024 GPUs",
            "cluster": "eos",
            "job_id": "99",
            "framework": "pytorch",
            "gpu_count": 1024,
        },
    )
    incident = Incident.objects.get(title="NCCL timeout on 1024 GPUs")
    assert response.status_code == 302
    assert response["Location"] == reverse("incidents:detail", args=[incident.code])
    assert str(incident.gpu_hour_usd) == "4.00"
    assert incident.phase == Phase.TRIAGE
    assert IncidentEvent.objects.filter(incident=incident, kind="incident.created").exists()


def test_an_outsider_cannot_open_an_incident_in_another_team(outsider_client, team):
    response = outsider_client.post(
        reverse("incidents:create"), {"team": team.pk, "title": "sneaky"}
    )
    assert response.status_code == 200  # the form comes back with an error
    assert not Incident.objects.filter(title="sneaky").exists()


def test_moving_phase_is_recorded_on_the_timeline(owner_client, incident):
    response = owner_client.post(
        reverse("incidents:phase", args=[incident.code]), {"phase": "localization"}
    )
    assert response.status_code == 302
    incident.refresh_from_db()
    assert incident.phase == Phase.LOCALIZATION
    event = incident.events.filter(kind="incident.phase").get()
    assert event.data == {"from": "triage", "to": "localization", "note": ""}


def test_an_illegal_status_change_says_why(owner_client, incident):
    response = owner_client.post(
        reverse("incidents:status", args=[incident.code]), {"status": "open"}, follow=True
    )
    assert "cannot go from Open" in response.content.decode()
    incident.refresh_from_db()
    assert incident.status == Status.OPEN


def test_an_unknown_status_is_answered_on_the_page_and_changes_nothing(owner_client, incident):
    response = owner_client.post(
        reverse("incidents:status", args=[incident.code]), {"status": "bogus"}
    )
    assert response.status_code == 422
    assert "Unknown status “bogus”" in response.content.decode()
    incident.refresh_from_db()
    assert incident.status == Status.OPEN


def test_a_too_long_phase_note_is_refused_at_its_field_with_the_text_kept(owner_client, incident):
    note = "n" * 2001
    response = owner_client.post(
        reverse("incidents:phase", args=[incident.code]), {"phase": "localization", "note": note}
    )
    assert response.status_code == 422
    html = response.content.decode()
    assert "at most 2000 characters (it has 2001)" in html
    assert note in html  # what was typed is still in the box
    incident.refresh_from_db()
    assert incident.phase == Phase.TRIAGE
    assert not incident.events.filter(kind="incident.phase").exists()


def test_healthz_reports_database_and_broker(client):
    response = client.get("/healthz")
    data = response.json()
    assert response.status_code == 200, data
    assert data["database"]["ok"] and data["database"]["vendor"] == "postgresql"
    assert data["broker"]["ok"] and data["broker"]["transport"] == "redis"


def test_opening_a_second_incident_for_the_same_job_says_it_exists(owner_client, team, incident):
    response = owner_client.post(
        reverse("incidents:create"),
        {
            "team": team.pk,
            "title": "same job again",
            "cluster": incident.cluster,
            "job_id": incident.job_id,
            "framework": "pytorch",
        },
    )
    assert response.status_code == 200  # the form comes back, not a server error
    body = response.content.decode()
    assert "already" in body
    assert reverse("incidents:detail", args=[incident.code]) in body
    assert not Incident.objects.filter(title="same job again").exists()


def test_the_list_costs_the_same_queries_for_many_incidents_as_for_few(owner_client, team, owner):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from apps.incidents.services import incident_create

    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert owner_client.get(reverse("incidents:list")).status_code == 200
        return len(ctx.captured_queries)

    for i in range(2):
        incident_create(team=team, title=f"few {i}", actor=owner, cluster=f"c{i}")
    few = queries()
    for i in range(23):
        incident_create(team=team, title=f"many {i}", actor=owner, cluster=f"m{i}")
    assert queries() == few
