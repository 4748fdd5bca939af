"""Reads about teams and who may do what in them."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet
from django.http import Http404

from apps.accounts.models import Membership, Team


def team_list_for_user(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[Team]:
    if not user.is_authenticated:
        return Team.objects.none()
    return Team.objects.filter(memberships__user=user).distinct()


def team_get_for_user(*, user: AbstractBaseUser | AnonymousUser, code: str) -> Team:
    """The team with this code, or 404 for anyone outside it (never 403: no existence leak)."""
    team = team_list_for_user(user=user).filter(code=code).first()
    if team is None:
        raise Http404("No such team")
    return team


def membership_role(*, user: AbstractBaseUser | AnonymousUser, team: Team) -> str | None:
    if not user.is_authenticated:
        return None
    return Membership.objects.filter(user=user, team=team).values_list("role", flat=True).first()


def user_is_team_lead(*, user: AbstractBaseUser | AnonymousUser, team: Team) -> bool:
    return membership_role(user=user, team=team) == Membership.Role.LEAD
