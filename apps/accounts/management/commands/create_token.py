"""Print a new API token, so configuration management can provision a cluster's epilog."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db.models import Q

from apps.accounts.models import ApiToken, Team
from apps.accounts.services import api_token_create


class Command(BaseCommand):
    help = (
        "Create an API token for a team and print it (only the token, on stdout). "
        "The token is stored hashed: keep the printed text, it cannot be shown again."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--team", required=True, help="Team code or exact name")
        parser.add_argument(
            "--scope", required=True, choices=ApiToken.Scope.values, help="ingest, read or write"
        )
        parser.add_argument("--name", default="", help="What uses the token (default: the scope)")

    def handle(self, *args: Any, team: str, scope: str, name: str, **options: Any) -> None:
        found = Team.objects.filter(Q(code=team) | Q(name=team)).first()
        if found is None:
            raise CommandError(f"No team with code or name {team!r}.")
        token, text = api_token_create(
            team=found, name=name or f"{scope} token (command line)", scope=scope, actor=None
        )
        self.stderr.write(f"Created {scope} token {token.code} for team {found.name}.")
        self.stdout.write(text)
