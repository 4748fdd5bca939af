"""Reads for the API. Whoever asks — a person or a team's token — sees only their teams.

Anything of another team is 404, never 403: a token must not learn what exists elsewhere.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import Http404

from apps.accounts.models import Team
from apps.accounts.selectors import team_list_for_user
from apps.api.authentication import TokenUser
from apps.incidents.models import Incident
from apps.incidents.selectors import incident_get_in_teams, incident_list_for_teams


def team_list_for_principal(*, user: Any) -> QuerySet[Team]:
    """A token sees its own team; a person, the teams they belong to."""
    if isinstance(user, TokenUser):
        return Team.objects.filter(pk=user.team.pk)
    if user is None:
        return Team.objects.none()
    return team_list_for_user(user=user)


def team_get_for_principal(*, user: Any, code: str | None) -> Team:
    """The team named by `code`; without a code, the only team the principal has."""
    if isinstance(user, TokenUser):
        # A token has exactly one team, loaded with the token: no query (every epilog
        # post asks for it).
        if code and code != user.team.code:
            raise Http404("No such team")
        return user.team
    teams = team_list_for_principal(user=user)
    if code:
        team = teams.filter(code=code).first()
        if team is None:
            raise Http404("No such team")
        return team
    only = list(teams[:2])
    if len(only) != 1:
        raise Http404("Name the team: you belong to more than one" if only else "No team")
    return only[0]


def incident_list_for_principal(*, user: Any, **filters: str) -> QuerySet[Incident]:
    """Filters as in ``incidents.selectors.incident_list_for_teams``."""
    return incident_list_for_teams(teams=team_list_for_principal(user=user), **filters)


def incident_get_for_principal(*, user: Any, code: str) -> Incident:
    return incident_get_in_teams(teams=team_list_for_principal(user=user), code=code)
