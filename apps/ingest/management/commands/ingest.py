"""``manage.py ingest INCIDENT PATH…``: upload from a login node, no browser needed.

Goes through the same service as the web upload (``artifact_upload``): same limits,
same archive rules, same deduplication; parse tasks are enqueued for the workers.
"""

from __future__ import annotations

import os
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.incidents.models import Incident
from apps.ingest.services import artifact_upload


def _walk(path: Path) -> list[tuple[str, Path]]:
    """(display name, path) of each regular file; symlinks inside directories are skipped."""
    if path.is_dir():
        found = []
        for root, dirs, files in os.walk(path, followlinks=False):
            dirs.sort()
            for fn in sorted(files):
                fp = Path(root) / fn
                if fp.is_file() and not fp.is_symlink():
                    found.append((str(Path(path.name) / fp.relative_to(path)), fp))
        return found
    return [(path.name, path)]


class Command(BaseCommand):
    help = "Upload log files, directories or archives to an incident (by its code)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("incident", help="incident code (as in its URL)")
        parser.add_argument("paths", nargs="+", help="files, directories or archives")
        parser.add_argument("--user", default="", help="username recorded as the uploader")

    def handle(self, *args, **options) -> None:
        incident = Incident.objects.filter(code=options["incident"]).first()
        if incident is None:
            raise CommandError(f"no incident with code {options['incident']!r}")
        actor = None
        if options["user"]:
            actor = get_user_model().objects.filter(username=options["user"]).first()
            if actor is None:
                raise CommandError(f"no user {options['user']!r}")
        totals = {"stored": 0, "duplicate": 0, "rejected": 0}
        for raw in options["paths"]:
            path = Path(raw)
            if not path.exists():
                self.stderr.write(f"rejected  {raw} — no such file or directory")
                totals["rejected"] += 1
                continue
            for name, fp in _walk(path):
                with fp.open("rb") as f:
                    outcomes = artifact_upload(
                        incident=incident, fileobj=f, name=name, actor=actor, source="cli"
                    )
                for o in outcomes:
                    totals[o.status] += 1
                    line = f"{o.status:<9} {o.name} — {o.message}"
                    (self.stderr if o.status == "rejected" else self.stdout).write(line)
        summary = ", ".join(f"{n} {s}" for s, n in totals.items())
        self.stdout.write(f"{incident.code}: {summary}")
        if totals["rejected"] and not (totals["stored"] or totals["duplicate"]):
            raise CommandError("nothing was accepted", returncode=2)
