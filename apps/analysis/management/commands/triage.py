"""``manage.py triage PATH… --format json|markdown|text``: offline triage, no server, no DB writes.

An alias of the ``rankscope triage`` command (``rankscope.cli``, which imports no Django),
with the same arguments and exit codes: 0 no failure found, 1 failure found, 2 bad usage.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from rankscope import cli


class Command(BaseCommand):
    help = (
        "Triage a distributed training job from its log files, directories or archives "
        "(offline; the same as `rankscope triage`)."
    )
    requires_system_checks: list[str] = []
    requires_migrations_checks = False

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        cli.build_parser(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        ns = argparse.Namespace(
            **{
                k: options[k]
                for k in ("paths", "format", "output", "jobs", "scanner", "straggler_score")
            }
        )
        code = cli.run(ns, self.stdout)
        if code == cli.EXIT_USAGE:
            raise CommandError("no readable input", returncode=code)
        if code:
            self.stdout.flush()
            sys.exit(code)
