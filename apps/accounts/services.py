"""Writes for teams and memberships."""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from decimal import Decimal

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from apps.accounts.models import ApiToken, Membership, Team

PREFIX_ALPHABET = "23456789abcdefghjkmnpqrstuvwxyz"


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


def api_token_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def api_token_create(
    *, team: Team, name: str, scope: str, actor: AbstractBaseUser | None
) -> tuple[ApiToken, str]:
    """Create a token; return the row and the full token text, which is never stored.

    The caller shows the text once. A prefix collision (1 in 31^10 per pair) is retried.
    """
    if scope not in ApiToken.Scope.values:
        raise ValueError(f"Unknown scope {scope!r}; expected one of {', '.join(ApiToken.Scope)}")
    name = name.strip()[:120] or f"{scope} token"
    for _attempt in range(5):
        prefix = "".join(secrets.choice(PREFIX_ALPHABET) for _ in range(10))
        secret = secrets.token_urlsafe(32)
        try:
            with transaction.atomic():
                token = ApiToken.objects.create(
                    team=team,
                    name=name,
                    scope=scope,
                    prefix=prefix,
                    secret_sha256=api_token_hash(secret),
                    created_by=actor if actor is not None and actor.is_authenticated else None,
                )
        except IntegrityError:
            continue
        return token, f"rs_{prefix}_{secret}"
    raise RuntimeError("Could not allocate a unique token prefix")


def api_token_revoke(*, token: ApiToken, actor: AbstractBaseUser | None) -> ApiToken:
    """Revoke the token for good (compare-and-set: revoking twice changes nothing)."""
    now = timezone.now()
    ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
        revoked_at=now,
        revoked_by=actor if actor is not None and actor.is_authenticated else None,
    )
    token.refresh_from_db()
    return token


def api_token_touch(*, token: ApiToken, every_seconds: float = 60.0) -> None:
    """Record that the token was used, at most one write per token per `every_seconds`.

    A thousand nodes posting at once must not turn into a thousand updates of one row.
    """
    now = timezone.now()
    if (
        token.last_used_at is not None
        and (now - token.last_used_at).total_seconds() < every_seconds
    ):
        return
    cutoff = now - dt.timedelta(seconds=every_seconds)
    ApiToken.objects.filter(pk=token.pk).filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lt=cutoff)
    ).update(last_used_at=now)
    token.last_used_at = now
