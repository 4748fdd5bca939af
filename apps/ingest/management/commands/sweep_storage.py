"""``manage.py sweep_storage``: delete stored objects that no artifact row points at.

Celery beat runs the same sweep every hour; this command is for an operator who wants to
see (``--dry-run``) or do it now.
"""

from __future__ import annotations

from datetime import timedelta

from django.core.management.base import BaseCommand, CommandParser

from apps.ingest.services import artifact_storage_sweep


class Command(BaseCommand):
    help = (
        "Delete stored objects under incidents/ that no artifact points at (after a grace period)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--grace",
            type=int,
            default=None,
            help="Only objects older than this many seconds "
            "(default RANKSCOPE_STORAGE_SWEEP_GRACE_SECONDS).",
        )
        parser.add_argument("--dry-run", action="store_true", help="List, delete nothing.")

    def handle(self, *args, grace: int | None, dry_run: bool, **options) -> None:
        removed = artifact_storage_sweep(
            grace=timedelta(seconds=grace) if grace is not None else None, dry_run=dry_run
        )
        for key in removed:
            self.stdout.write(key)
        verb = "would delete" if dry_run else "deleted"
        self.stdout.write(self.style.SUCCESS(f"{verb} {len(removed)} unreferenced object(s)"))
