"""``manage.py create_team`` and ``create_user``: an operator sets up people and teams
without the admin or a shell; both are safe to run again."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import CommandError, call_command

from apps.accounts.models import Membership, Team


def _run(name: str, *args: str, stdin: str = "") -> str:
    out = io.StringIO()
    import sys

    saved = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        call_command(name, *args, stdout=out, stderr=io.StringIO())
    finally:
        sys.stdin = saved
    return out.getvalue().strip()


def test_create_team_prints_its_code_and_leaves_an_existing_team_alone(db):
    code = _run("create_team", "Pretraining", "--gpu-hour-usd", "2.50")
    team = Team.objects.get(code=code)
    assert team.name == "Pretraining" and str(team.default_gpu_hour_usd) == "2.50"
    assert _run("create_team", "Pretraining", "--gpu-hour-usd", "9") == code
    assert Team.objects.count() == 1 and str(Team.objects.get().default_gpu_hour_usd) == "2.50"
    with pytest.raises(CommandError, match="not a number"):
        _run("create_team", "Inference", "--gpu-hour-usd", "cheap")


def test_create_user_reads_the_password_from_stdin_and_joins_the_team(db):
    code = _run("create_team", "Pretraining")
    _run(
        "create_user",
        "alice",
        "--team",
        code,
        "--role",
        "lead",
        "--email",
        "alice@example.com",
        "--password-stdin",
        stdin="correct horse battery staple\n",
    )
    alice = authenticate(username="alice", password="correct horse battery staple")
    assert alice is not None and alice.email == "alice@example.com"
    assert Membership.objects.get(user=alice).role == Membership.Role.LEAD

    # Again, by team name, as a plain member: the password stays, the role changes.
    _run("create_user", "alice", "--team", "Pretraining", "--role", "member")
    assert authenticate(username="alice", password="correct horse battery staple") is not None
    assert Membership.objects.get(user=alice).role == Membership.Role.MEMBER


def test_create_user_refuses_weak_passwords_unknown_teams_and_passwordless_input(db):
    _run("create_team", "Pretraining")
    with pytest.raises(CommandError, match=r"too short|too common"):
        _run("create_user", "bob", "--team", "Pretraining", "--password-stdin", stdin="abc\n")
    with pytest.raises(CommandError, match="No team"):
        _run("create_user", "bob", "--team", "Nope", "--no-password")
    with pytest.raises(CommandError, match="--password-stdin"):
        _run("create_user", "bob", "--team", "Pretraining")  # stdin is not a terminal
    assert not get_user_model().objects.filter(username="bob").exists()
    _run("create_user", "bob", "--team", "Pretraining", "--no-password")
    assert not get_user_model().objects.get(username="bob").has_usable_password()
