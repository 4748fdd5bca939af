"""Team pages: the teams you are in, and API token management for team leads."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.accounts import selectors, services
from apps.accounts.forms import ApiTokenForm
from apps.accounts.models import Team


@require_GET
@login_required
def team_list(request: HttpRequest) -> HttpResponse:
    teams = [
        {"team": team, "is_lead": selectors.user_is_team_lead(user=request.user, team=team)}
        for team in selectors.team_list_for_user(user=request.user)
    ]
    return render(request, "accounts/teams.html", {"teams": teams})


def _team_for_lead(request: HttpRequest, team_code: str) -> Team:
    team = selectors.team_get_for_user(user=request.user, code=team_code)  # 404 for outsiders
    if not selectors.user_is_team_lead(user=request.user, team=team):
        raise PermissionDenied("Only team leads manage API tokens.")
    return team


@never_cache
@require_http_methods(["GET", "POST"])
@login_required
def token_list(request: HttpRequest, team_code: str) -> HttpResponse:
    team = _team_for_lead(request, team_code)
    form = ApiTokenForm(request.POST or None)
    new_token = None
    if request.method == "POST" and form.is_valid():
        _token, new_token = services.api_token_create(
            team=team,
            name=form.cleaned_data["name"],
            scope=form.cleaned_data["scope"],
            actor=request.user,
        )
        form = ApiTokenForm()
    context = {
        "team": team,
        "form": form,
        "tokens": selectors.api_token_list_for_team(team=team),
        # Rendered in this response only: the text is never stored, so it cannot be shown again.
        "new_token": new_token,
        # What the SLURM epilog needs, ready to paste (docs/slurm/README.md).
        "service_url": request.build_absolute_uri("/").rstrip("/"),
    }
    template = "accounts/tokens.html"
    if request.htmx:
        template = "accounts/tokens.html#tokens"
    # A refused form (a name over 120 characters, an unknown scope) answers 422 with the
    # error at its field; htmx swaps 422 (templates/base.html).
    status = 422 if form.is_bound and form.errors else 200
    return render(request, template, context, status=status)


@require_POST
@login_required
def token_revoke(request: HttpRequest, team_code: str, code: str) -> HttpResponse:
    team = _team_for_lead(request, team_code)
    token = selectors.api_token_get_for_lead(user=request.user, team=team, code=code)
    services.api_token_revoke(token=token, actor=request.user)
    messages.success(request, f"Token “{token.name}” is revoked; requests with it now get 401.")
    return redirect("accounts:tokens", team_code=team.code)
