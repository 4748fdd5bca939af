"""Incidents over the REST API: tokens, scopes, team isolation, transitions, rate limits."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

from apps.incidents.models import IncidentEvent
from apps.incidents.services import incident_create

URL = "/api/v1/incidents/"


def _detail(incident) -> str:
    return f"{URL}{incident.code}/"


def _walk(value):
    if isinstance(value, dict):
        for key, item in value.items():
            yield key, item
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


def test_it_answers_401_with_a_bearer_challenge_without_credentials(db, incident):
    response = Client().get(URL)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_it_refuses_a_wrong_secret_and_a_revoked_token(incident, read_token):
    prefix = read_token.rsplit("_", 1)[0]
    wrong = Client(HTTP_AUTHORIZATION=f"Bearer {prefix}_not-the-secret")
    assert wrong.get(URL).status_code == 401

    from apps.accounts.models import ApiToken
    from apps.accounts.services import api_token_revoke

    token = ApiToken.objects.get(prefix=read_token.split("_")[1])
    api_token_revoke(token=token, actor=None)
    revoked = Client(HTTP_AUTHORIZATION=f"Bearer {read_token}")
    assert revoked.get(URL).status_code == 401


def test_it_lists_only_the_tokens_team_and_filters(reader, incident, other_team, outsider):
    incident_create(team=other_team, title="not yours", actor=outsider, cluster="eos")
    incident_create(team=incident.team, title="second", actor=None, cluster="selene", job_id="9")
    body = reader.get(URL).json()
    assert body["count"] == 2
    assert {row["title"] for row in body["results"]} == {incident.title, "second"}

    filtered = reader.get(URL, {"cluster": "eos", "status": "open"}).json()
    assert [row["code"] for row in filtered["results"]] == [incident.code]
    assert reader.get(URL, {"status": "bogus"}).status_code == 400


def test_it_never_exposes_integer_primary_keys(reader, incident):
    body = reader.get(_detail(incident)).json()
    assert body["code"] == incident.code
    assert body["team"] == incident.team.code
    keys = {key for key, _ in _walk(body)}
    assert "id" not in keys and "pk" not in keys


def test_another_teams_token_and_user_get_404(intruder, outsider_client, incident):
    assert intruder.get(_detail(incident)).status_code == 404
    assert (
        intruder.patch(
            _detail(incident), {"status": "closed"}, content_type="application/json"
        ).status_code
        == 404
    )
    assert outsider_client.get(_detail(incident)).status_code == 404
    for suffix in ("artifacts/", "analysis/", "triage/", "findings/", "postmortem.md"):
        assert intruder.get(_detail(incident) + suffix).status_code == 404, suffix
    assert intruder.get(URL).json()["count"] == 0


def test_an_ingest_token_cannot_read_and_a_read_token_cannot_write(ingester, reader, incident):
    response = ingester.get(_detail(incident))
    assert response.status_code == 403
    assert "ingest" in response.json()["detail"]
    response = reader.patch(
        _detail(incident), {"status": "closed"}, content_type="application/json"
    )
    assert response.status_code == 403
    incident.refresh_from_db()
    assert incident.status == "open"


def test_a_write_token_creates_an_incident_in_its_team(api, team):
    response = api.post(
        URL,
        {"title": "loss spike at step 9000", "cluster": "eos", "job_id": "77", "gpu_count": 64},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["team"] == team.code and body["source"] == "api" and body["gpu_count"] == 64

    duplicate = api.post(
        URL, {"title": "again", "cluster": "eos", "job_id": "77"}, content_type="application/json"
    )
    assert duplicate.status_code == 409


def test_it_changes_status_and_phase_and_records_them_on_the_timeline(api, incident):
    response = api.patch(
        _detail(incident),
        {"status": "mitigated", "phase": "localization", "phase_note": "rank 77 first"},
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "mitigated" and body["phase"] == "localization"
    kinds = set(IncidentEvent.objects.filter(incident=incident).values_list("kind", flat=True))
    assert {"incident.status", "incident.phase"} <= kinds


def test_a_forbidden_status_change_is_a_409_and_changes_nothing(api, incident):
    api.patch(_detail(incident), {"status": "closed"}, content_type="application/json")
    response = api.patch(
        _detail(incident), {"status": "mitigated"}, content_type="application/json"
    )
    assert response.status_code == 409
    incident.refresh_from_db()
    assert incident.status == "closed"


def test_signed_in_members_use_the_api_with_their_session(teammate_client, incident):
    assert teammate_client.get(_detail(incident)).json()["code"] == incident.code


def test_idempotency_key_replays_the_first_answer(api, team):
    headers = {"HTTP_IDEMPOTENCY_KEY": "create-once-1"}
    first = api.post(URL, {"title": "once"}, content_type="application/json", **headers)
    second = api.post(URL, {"title": "once"}, content_type="application/json", **headers)
    assert first.status_code == second.status_code == 201
    assert first.json()["code"] == second.json()["code"]
    assert second["Idempotent-Replayed"] == "true"
    assert team.incidents.filter(title="once").count() == 1


def test_an_idempotency_key_reused_for_another_request_is_refused_not_replayed(api, team):
    headers = {"HTTP_IDEMPOTENCY_KEY": "create-once-2"}
    first = api.post(URL, {"title": "first"}, content_type="application/json", **headers)
    other = api.post(URL, {"title": "second"}, content_type="application/json", **headers)
    garbage = api.post(URL, b"\x00", content_type="application/json", **headers)
    assert first.status_code == 201
    assert other.status_code == garbage.status_code == 409
    assert "different request" in other.json()["detail"]
    assert "Idempotent-Replayed" not in other
    assert team.incidents.filter(title__in=["first", "second"]).count() == 1


@override_settings(RANKSCOPE_API_BURST=3, RANKSCOPE_API_RATE=0.01)
def test_it_rate_limits_each_token_after_its_burst_with_retry_after(
    reader, read_token, write_token, incident
):
    codes = [reader.get(URL).status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    limited = reader.get(URL)
    assert limited.status_code == 429
    assert int(limited["Retry-After"]) >= 1
    # Another token has its own bucket.
    assert Client(HTTP_AUTHORIZATION=f"Bearer {write_token}").get(URL).status_code == 200


def test_using_a_token_records_when_it_was_last_used(reader, read_token, incident):
    from apps.accounts.models import ApiToken

    token = ApiToken.objects.get(prefix=read_token.split("_")[1])
    assert token.last_used_at is None
    reader.get(URL)
    token.refresh_from_db()
    assert token.last_used_at is not None


def test_the_schema_and_the_docs_page_describe_every_endpoint(reader, owner_client):
    schema = reader.get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    for path in (
        "/api/v1/incidents/",
        "/api/v1/incidents/{code}/",
        "/api/v1/incidents/{code}/artifacts/",
        "/api/v1/incidents/{code}/analysis/",
        "/api/v1/incidents/{code}/triage/",
        "/api/v1/incidents/{code}/findings/",
        "/api/v1/incidents/{code}/postmortem.md",
        "/api/v1/ingest/slurm",
    ):
        assert path in paths
    page = owner_client.get("/api/v1/docs/")
    assert page.status_code == 200
    assert b"/api/v1/ingest/slurm" in page.content


@pytest.mark.parametrize("suffix", ["triage/", "postmortem.md"])
def test_it_answers_404_before_there_is_an_analysis_or_post_mortem(reader, incident, suffix):
    response = reader.get(_detail(incident) + suffix)
    assert response.status_code == 404


def test_the_post_mortem_is_served_as_markdown_once_drafted(reader, intruder, owner, incident):
    from apps.postmortems.services import postmortem_draft_create

    postmortem_draft_create(incident=incident, actor=owner)
    response = reader.get(_detail(incident) + "postmortem.md")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/markdown")
    assert incident.title in response.content.decode()
    assert intruder.get(_detail(incident) + "postmortem.md").status_code == 404
