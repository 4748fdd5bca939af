"""Reads about teams and who may do what in them."""

from __future__ import annotations

import hashlib
import hmac

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet
from django.http import Http404

from apps.accounts.models import ApiToken, Membership, Team


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


def api_token_list_for_team(*, team: Team) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(team=team).select_related("created_by", "revoked_by")


def api_token_get_for_lead(
    *, user: AbstractBaseUser | AnonymousUser, team: Team, code: str
) -> ApiToken:
    """A token of `team`, for one of its leads; 404 for everyone else."""
    if not user_is_team_lead(user=user, team=team):
        raise Http404("No such token")
    token = ApiToken.objects.filter(team=team, code=code).first()
    if token is None:
        raise Http404("No such token")
    return token


def api_token_authenticate(*, raw: str) -> ApiToken | None:
    """The active token this text stands for, or None.

    Looks the row up by its public prefix, then compares the secret's hash in constant
    time, so response timing says nothing about how much of a guess was right.
    """
    parts = raw.strip().split("_", 2)
    if len(parts) != 3 or parts[0] != "rs" or not parts[1] or not parts[2]:
        return None
    prefix, secret = parts[1], parts[2]
    if len(prefix) > 16 or len(secret) > 200:
        return None
    token = (
        ApiToken.objects.filter(prefix=prefix, revoked_at__isnull=True)
        .select_related("team")
        .first()
    )
    candidate = hashlib.sha256(secret.encode()).hexdigest()
    if token is None:
        # Same work as a hit, so a missing prefix is not faster than a wrong secret.
        hmac.compare_digest(candidate, "0" * 64)
        return None
    if not hmac.compare_digest(candidate, token.secret_sha256):
        return None
    return token
