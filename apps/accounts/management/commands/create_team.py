"""``manage.py create_team NAME``: make a team without the admin or a shell.

Safe to run again (configuration management): an existing team is left as it is.
Prints the team's code on stdout.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from apps.accounts.models import Team
from apps.accounts.services import team_create


class Command(BaseCommand):
    help = "Create a team (or leave an existing one as it is) and print its code."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("name", help="The team's name, e.g. Pretraining")
        parser.add_argument(
            "--gpu-hour-usd", default=None, help="Cost of one GPU-hour, for post-mortems"
        )

    def handle(self, *args: Any, name: str, gpu_hour_usd: str | None, **options: Any) -> None:
        name = name.strip()
        existing = Team.objects.filter(name=name).first()
        if existing is not None:
            self.stderr.write(f"Team {existing.name} already exists; left as it is.")
            self.stdout.write(existing.code)
            return
        cost = None
        if gpu_hour_usd is not None:
            try:
                cost = Decimal(gpu_hour_usd)
            except InvalidOperation:
                raise CommandError(f"--gpu-hour-usd: {gpu_hour_usd!r} is not a number") from None
        try:
            team = team_create(name=name, default_gpu_hour_usd=cost)
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        self.stderr.write(f"Created team {team.name}.")
        self.stdout.write(team.code)
