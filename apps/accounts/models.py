"""Teams and memberships. Every incident, and everything hanging off it, belongs to a team."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.db import models

from apps.lib.codes import new_code


def _team_code() -> str:
    return new_code("t")


class Team(models.Model):
    code = models.CharField(max_length=24, unique=True, default=_team_code, editable=False)
    name = models.CharField(max_length=120, unique=True)
    default_gpu_hour_usd = models.DecimalField(
        max_digits=10, decimal_places=2, default=Decimal("4.00"), help_text="$ per GPU-hour"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="teams"
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        MEMBER = "member", "Member"
        LEAD = "lead", "Lead"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=12, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "user"], name="membership_unique_team_user")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


def _token_code() -> str:
    return new_code("k")


class ApiToken(models.Model):
    """A team's credential for the REST API (scripts, SLURM epilogs, CI).

    The full token (``rs_<prefix>_<secret>``) is shown once, when it is created. Only
    the prefix (to find the row) and the sha256 of the secret are stored, so a leaked
    database does not leak working tokens.

    Scopes, from least to most: ``ingest`` may only send job evidence (the epilog
    endpoint and artifact uploads); ``read`` may read everything of its team;
    ``write`` may read, ingest and change incidents.
    """

    class Scope(models.TextChoices):
        INGEST = "ingest", "Ingest only"
        READ = "read", "Read"
        WRITE = "write", "Read and write"

    code = models.CharField(max_length=24, unique=True, default=_token_code, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=120, help_text="What uses this token, e.g. 'eos epilog'")
    scope = models.CharField(max_length=8, choices=Scope.choices)
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    secret_sha256 = models.CharField(max_length=64, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="api_tokens_created",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="api_tokens_revoked",
    )

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.scope}, rs_{self.prefix}_…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None
