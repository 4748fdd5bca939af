"""Creates the demo user, team and incident the README's `make run` signs in with."""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from apps.accounts.models import Membership, Team
from apps.incidents.models import Incident
from apps.incidents.services import incident_create
from apps.ingest.services import artifact_upload
from rankscope.testing.generate import generate
from rankscope.testing.step_metrics import FILE_NAME, write_step_metrics

DEMO_USER = "demo"
DEMO_PASSWORD = "rankscope-demo"  # noqa: S105 -- the demo account is public by design
DEMO_TEAM = "Demo training team"
# The generated job stops near step 60: the title must not promise another step.
DEMO_TITLE = "Demo: 128-GPU pretraining run hung in data loading"
# Demo incidents seeded under earlier titles are found, not seeded twice.
EARLIER_TITLES = ("Demo: 128-GPU pretraining run hung at step 4,200",)


class Command(BaseCommand):
    help = "Create (once) the demo user, team and incident, and say how to sign in."

    def handle(self, *args, **options) -> None:
        user, incident = self._seed()
        # Outside the transaction: uploading moves bytes into storage.
        self._demo_logs(incident, user)
        self.stdout.write(
            self.style.SUCCESS(
                f"Demo ready: sign in as '{DEMO_USER}' with password '{DEMO_PASSWORD}'"
                f" and open incident {incident.code}."
            )
        )

    @transaction.atomic
    def _seed(self):
        User = get_user_model()
        user, created = User.objects.get_or_create(username=DEMO_USER)
        if created or not user.has_usable_password():
            user.set_password(DEMO_PASSWORD)
            user.save()
        team, _ = Team.objects.get_or_create(name=DEMO_TEAM)
        Membership.objects.get_or_create(team=team, user=user, defaults={"role": "lead"})
        incident = Incident.objects.filter(
            team=team, title__in=(DEMO_TITLE, *EARLIER_TITLES)
        ).first()
        if incident is not None and incident.title != DEMO_TITLE:
            Incident.objects.filter(pk=incident.pk).update(title=DEMO_TITLE)
        if incident is None:
            now = timezone.now()
            incident = incident_create(
                team=team,
                title=DEMO_TITLE,
                actor=user,
                cluster="demo-cluster",
                job_id="424242",
                framework="megatron",
                gpu_count=128,
                gpu_type="H100",
                remaining_run_hours=72.0,
                problem_started_at=now - dt.timedelta(hours=1),
                detected_at=now - dt.timedelta(minutes=20),
            )
        return user, incident

    def _demo_logs(self, incident: Incident, user) -> None:
        """Once: a generated 128-rank data-loader stall (every rank's log and the job's
        per-rank step metrics), ingested through the upload service. A file of that name
        already in the incident is not uploaded again, so re-running adds nothing, and a
        demo seeded before the metrics file existed gets just that file."""
        existing = set(incident.artifacts.values_list("original_name", flat=True))
        if FILE_NAME in existing:
            return
        uploaded = 0
        with tempfile.TemporaryDirectory() as tmp:
            manifest = generate("data_stall", tmp, ranks=128)
            write_step_metrics(manifest, Path(tmp) / FILE_NAME)
            for path in sorted(Path(tmp).iterdir()):
                if path.name == "manifest.json" or not path.is_file() or path.name in existing:
                    continue
                with path.open("rb") as f:
                    artifact_upload(
                        incident=incident, fileobj=f, name=path.name, actor=user, source="cli"
                    )
                uploaded += 1
        self.stdout.write(f"Demo files of a 128-rank job uploaded to {incident.code}: {uploaded}.")
