"""API tokens: created and revoked by team leads, shown once, stored hashed, from the CLI too."""

from __future__ import annotations

import hashlib
import io

from django.core.management import call_command
from django.test import Client

from apps.accounts.models import ApiToken


def _tokens_url(team) -> str:
    return f"/teams/{team.code}/tokens/"


def test_a_lead_creates_a_token_that_is_shown_once_and_stored_hashed(owner_client, team):
    response = owner_client.post(_tokens_url(team), {"name": "eos epilog", "scope": "ingest"})
    assert response.status_code == 200
    token = ApiToken.objects.get(team=team)
    text = response.context["new_token"]
    assert text.startswith(f"rs_{token.prefix}_")
    assert text.encode() in response.content
    secret = text.split("_", 2)[2]
    assert token.secret_sha256 == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in str(ApiToken.objects.filter(pk=token.pk).values().get())
    assert "no-store" in response["Cache-Control"] or "max-age=0" in response["Cache-Control"]
    # ...with the epilog configuration ready to paste: this service's URL and this token.
    body = response.content.decode()
    setup = body.split('id="epilog-setup">', 1)[1].split("</pre>", 1)[0]
    assert "RANKSCOPE_URL=http://testserver\n" in setup
    assert f"'{text}' &gt; /etc/rankscope/token" in setup
    # Never again: the list page shows the prefix only.
    again = owner_client.get(_tokens_url(team))
    assert secret.encode() not in again.content
    assert f"rs_{token.prefix}_".encode() in again.content


def test_a_lead_revokes_a_token_and_it_stops_working(owner_client, team, incident):
    from apps.accounts.services import api_token_create

    token, text = api_token_create(team=team, name="dash", scope="read", actor=None)
    api = Client(HTTP_AUTHORIZATION=f"Bearer {text}")
    assert api.get("/api/v1/incidents/").status_code == 200
    response = owner_client.post(f"{_tokens_url(team)}{token.code}/revoke/")
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert api.get("/api/v1/incidents/").status_code == 401


def test_members_cannot_manage_tokens_and_outsiders_get_404(
    teammate_client, outsider_client, team, owner
):
    from apps.accounts.services import api_token_create

    token, _ = api_token_create(team=team, name="x", scope="read", actor=owner)
    assert teammate_client.get(_tokens_url(team)).status_code == 403
    assert teammate_client.post(f"{_tokens_url(team)}{token.code}/revoke/").status_code == 403
    assert outsider_client.get(_tokens_url(team)).status_code == 404
    assert outsider_client.post(f"{_tokens_url(team)}{token.code}/revoke/").status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None


def test_the_team_page_links_leads_to_their_tokens(owner_client, teammate_client, team):
    assert _tokens_url(team).encode() in owner_client.get("/teams/").content
    assert _tokens_url(team).encode() not in teammate_client.get("/teams/").content


def test_create_token_command_prints_a_working_token_for_configuration_management(team, incident):
    out, err = io.StringIO(), io.StringIO()
    call_command("create_token", "--team", team.code, "--scope", "ingest", stdout=out, stderr=err)
    text = out.getvalue().strip()
    assert text.startswith("rs_") and "\n" not in text
    token = ApiToken.objects.get(prefix=text.split("_")[1])
    assert token.scope == "ingest" and token.team == team
    api = Client(HTTP_AUTHORIZATION=f"Bearer {text}")
    assert api.get("/api/v1/incidents/").status_code == 403  # ingest only: no reading


def test_create_token_command_rejects_an_unknown_team(db):
    import pytest
    from django.core.management import CommandError

    with pytest.raises(CommandError, match="No team"):
        call_command("create_token", "--team", "nope", "--scope", "read")


def test_a_too_long_token_name_is_refused_at_its_field_and_no_token_is_made(owner_client, team):
    response = owner_client.post(_tokens_url(team), {"name": "n" * 121, "scope": "ingest"})
    assert response.status_code == 422
    html = response.content.decode()
    assert "at most 120 characters (it has 121)" in html and "n" * 121 in html
    assert not ApiToken.objects.filter(team=team).exists()
