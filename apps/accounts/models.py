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
