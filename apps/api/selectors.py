"""Reads for the API. Whoever asks — a person or a team's token — sees only their teams.

Anything of another team is 404, never 403: a token must not learn what exists elsewhere.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet
from django.http import Http404

from apps.accounts.models import Team
from apps.api.authentication import TokenUser
from apps.incidents.models import Incident


def team_list_for_principal(*, user: Any) -> QuerySet[Team]:
    if isinstance(user, TokenUser):
        return Team.objects.filter(pk=user.team.pk)
    if user is None or not user.is_authenticated:
        return Team.objects.none()
    return Team.objects.filter(memberships__user=user).distinct()


def team_get_for_principal(*, user: Any, code: str | None) -> Team:
    """The team named by `code`; without a code, the only team the principal has."""
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


def incident_list_for_principal(
    *,
    user: Any,
    status: str = "",
    severity: str = "",
    phase: str = "",
    cluster: str = "",
    job_id: str = "",
    team: str = "",
    q: str = "",
) -> QuerySet[Incident]:
    qs = Incident.objects.filter(team__in=team_list_for_principal(user=user)).select_related("team")
    if status:
        qs = qs.filter(status=status)
    if severity:
        qs = qs.filter(severity=severity)
    if phase:
        qs = qs.filter(phase=phase)
    if cluster:
        qs = qs.filter(cluster=cluster)
    if job_id:
        qs = qs.filter(job_id=job_id)
    if team:
        qs = qs.filter(team__code=team)
    if q:
        qs = qs.filter(
            Q(title__icontains=q)
            | Q(job_id__icontains=q)
            | Q(cluster__icontains=q)
            | Q(code__iexact=q)
        )
    return qs.order_by("-created_at", "-pk")


def incident_get_for_principal(*, user: Any, code: str) -> Incident:
    incident = (
        Incident.objects.filter(code=code, team__in=team_list_for_principal(user=user))
        .select_related("team")
        .first()
    )
    if incident is None:
        raise Http404("No such incident")
    return incident
