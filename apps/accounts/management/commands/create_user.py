"""``manage.py create_user USERNAME --team TEAM``: a person who can sign in, in a team.

The password is read from stdin (``--password-stdin``) or asked for on a terminal, never
taken from the command line (it would show in the process list and shell history).
Safe to run again: an existing user keeps their password (unless a new one is given)
and gets the membership asked for.
"""

from __future__ import annotations

import getpass
import sys
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.db.models import Q

from apps.accounts.models import Membership, Team
from apps.accounts.services import membership_set


class Command(BaseCommand):
    help = "Create a user (or update an existing one) and make them a member or lead of a team."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("username")
        parser.add_argument("--team", required=True, help="Team code or exact name")
        parser.add_argument(
            "--role", choices=Membership.Role.values, default=Membership.Role.MEMBER
        )
        parser.add_argument("--email", default="")
        parser.add_argument(
            "--password-stdin",
            action="store_true",
            help="Read the password from the first line of stdin",
        )
        parser.add_argument(
            "--no-password",
            action="store_true",
            help="No password (the user cannot sign in until an administrator sets one)",
        )

    def _password(self, *, from_stdin: bool) -> str:
        if from_stdin:
            password = sys.stdin.readline().rstrip("\r\n")
        elif sys.stdin.isatty():
            password = getpass.getpass("Password: ")
            if getpass.getpass("Password (again): ") != password:
                raise CommandError("The passwords do not match.")
        else:
            raise CommandError("Give the password with --password-stdin, or --no-password.")
        if not password:
            raise CommandError("The password is empty.")
        return password

    def handle(self, *args: Any, **opts: Any) -> None:
        team = Team.objects.filter(Q(code=opts["team"]) | Q(name=opts["team"])).first()
        if team is None:
            raise CommandError(
                f"No team with code or name {opts['team']!r} (manage.py create_team makes one)."
            )
        User = get_user_model()
        user = User.objects.filter(username=opts["username"]).first()
        if opts["no_password"]:
            password = None
        elif opts["password_stdin"] or user is None:
            password = self._password(from_stdin=opts["password_stdin"])
        else:
            password = None  # an existing user keeps their password
        if password is not None:
            try:
                validate_password(password, user=user)
            except ValidationError as exc:
                raise CommandError(" ".join(exc.messages)) from None
        with transaction.atomic():
            created = user is None
            if created:
                user = User(username=opts["username"], email=opts["email"])
                try:
                    user.full_clean(exclude=["password"])
                except ValidationError as exc:
                    raise CommandError("; ".join(exc.messages)) from None
            elif opts["email"]:
                user.email = opts["email"]
            if password is not None:
                user.set_password(password)
            elif created:
                user.set_unusable_password()
            user.save()
            membership_set(team=team, user=user, role=opts["role"])
        verb = "Created" if created else "Updated"
        self.stderr.write(f"{verb} {user.get_username()}, {opts['role']} of {team.name}.")
