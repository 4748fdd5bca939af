"""Writes for teams and memberships."""

from __future__ import annotations

from decimal import Decimal

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from apps.accounts.models import Membership, Team


@transaction.atomic
def team_create(
    *, name: str, lead: AbstractBaseUser | None = None, default_gpu_hour_usd: Decimal | None = None
) -> Team:
    team = Team(name=name)
    if default_gpu_hour_usd is not None:
        team.default_gpu_hour_usd = default_gpu_hour_usd
    team.full_clean()
    team.save()
    if lead is not None:
        Membership.objects.create(team=team, user=lead, role=Membership.Role.LEAD)
    return team


def membership_set(*, team: Team, user: AbstractBaseUser, role: str) -> Membership:
    membership, _ = Membership.objects.update_or_create(
        team=team, user=user, defaults={"role": role}
    )
    return membership
