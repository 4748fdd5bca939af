"""Reads for incidents. They own the access check: outsiders get 404, never 403."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q, QuerySet
from django.http import Http404
from django.utils import timezone

from apps.accounts.models import Team
from apps.accounts.selectors import team_list_for_user
from apps.incidents.models import PHASE_ORDER, Incident, Phase
from apps.lib.filtering import filter_given


def incident_list_for_teams(
    *,
    teams: QuerySet[Team],
    status: str = "",
    severity: str = "",
    phase: str = "",
    cluster: str = "",
    job_id: str = "",
    team: str = "",
    q: str = "",
) -> QuerySet[Incident]:
    """Incidents of `teams` (already narrowed to what the caller may see), filtered,
    newest first with a stable order for paging. `team` is a team code."""
    qs = Incident.objects.filter(team__in=teams).select_related("team")
    qs = filter_given(
        qs,
        status=status,
        severity=severity,
        phase=phase,
        cluster=cluster,
        job_id=job_id,
        team__code=team,
    )
    if q:
        qs = qs.filter(
            Q(title__icontains=q)
            | Q(job_id__icontains=q)
            | Q(cluster__icontains=q)
            | Q(code__iexact=q)
        )
    return qs.order_by("-created_at", "-pk")


def incident_list_for_user(
    *, user: AbstractBaseUser | AnonymousUser, **filters: str
) -> QuerySet[Incident]:
    """The user's teams' incidents; `filters` as in `incident_list_for_teams`."""
    return incident_list_for_teams(teams=team_list_for_user(user=user), **filters)


def incident_get_in_teams(
    *, teams: QuerySet[Team], code: str, related: tuple[str, ...] = ("team",)
) -> Incident:
    """The incident if it belongs to one of `teams`, else 404 (never 403)."""
    incident = Incident.objects.filter(code=code, team__in=teams).select_related(*related).first()
    if incident is None:
        raise Http404("No such incident")
    return incident


def incident_get_for_user(*, user: AbstractBaseUser | AnonymousUser, code: str) -> Incident:
    """The incident, or 404 for anyone outside its team."""
    return incident_get_in_teams(
        teams=team_list_for_user(user=user), code=code, related=("team", "created_by")
    )


def incident_for_job(
    *, team: Team, cluster: str, job_id: str, run_key: str = ""
) -> Incident | None:
    """The team's incident for this job run, if one is open already (the unique key)."""
    if not job_id:
        return None
    return Incident.objects.filter(
        team=team, cluster=cluster, job_id=job_id, run_key=run_key
    ).first()


def cluster_names_for_user(*, user: AbstractBaseUser | AnonymousUser) -> list[str]:
    return sorted(
        set(incident_list_for_user(user=user).exclude(cluster="").values_list("cluster", flat=True))
    )


@dataclass(frozen=True)
class PhaseSpan:
    phase: str
    label: str
    seconds: float
    entered_at: dt.datetime | None
    current: bool


def incident_phase_durations(
    *, incident: Incident, now: dt.datetime | None = None
) -> list[PhaseSpan]:
    """Time spent in each phase, summed over every visit, from the recorded transitions."""
    now = now or timezone.now()
    totals = {phase: 0.0 for phase in PHASE_ORDER}
    first_entered: dict[str, dt.datetime] = {}
    transitions = list(incident.transitions.order_by("at", "pk"))
    for current, following in zip(transitions, [*transitions[1:], None], strict=True):
        end = following.at if following is not None else now
        totals[current.to_phase] += max(0.0, (end - current.at).total_seconds())
        first_entered.setdefault(current.to_phase, current.at)
    return [
        PhaseSpan(
            phase=phase,
            label=Phase(phase).label,
            seconds=totals[phase],
            entered_at=first_entered.get(phase),
            current=incident.phase == phase,
        )
        for phase in PHASE_ORDER
    ]
