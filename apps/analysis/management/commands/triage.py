"""``manage.py triage PATH… --format json|markdown|text``: offline triage, no server, no DB writes.

A thin wrapper: the work is ``apps.analysis.engine.cli`` (also runnable without Django).
"""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from apps.analysis.engine import cli


class Command(BaseCommand):
    help = (
        "Triage a distributed training job from its log files, directories or archives (offline)."
    )
    requires_system_checks: list[str] = []
    requires_migrations_checks = False

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        cli.build_parser(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        ns = argparse.Namespace(
            **{k: options[k] for k in ("paths", "format", "jobs", "scanner", "straggler_score")}
        )
        code = cli.run(ns, self.stdout)
        if code:
            raise CommandError("no readable path given", returncode=code)
