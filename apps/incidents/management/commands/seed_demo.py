"""Creates the demo user, team and incident the README's `make run` signs in with."""

from __future__ import annotations

import datetime as dt

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from apps.accounts.models import Membership, Team
from apps.incidents.models import Incident
from apps.incidents.services import incident_create

DEMO_USER = "demo"
DEMO_PASSWORD = "rankscope-demo"  # noqa: S105 -- the demo account is public by design
DEMO_TEAM = "Demo training team"
DEMO_TITLE = "Demo: 128-GPU pretraining run hung at step 4,200"


class Command(BaseCommand):
    help = "Create (once) the demo user, team and incident, and say how to sign in."

    @transaction.atomic
    def handle(self, *args, **options) -> None:
        User = get_user_model()
        user, created = User.objects.get_or_create(username=DEMO_USER)
        if created or not user.has_usable_password():
            user.set_password(DEMO_PASSWORD)
            user.save()
        team, _ = Team.objects.get_or_create(name=DEMO_TEAM)
        Membership.objects.get_or_create(team=team, user=user, defaults={"role": "lead"})
        incident = Incident.objects.filter(team=team, title=DEMO_TITLE).first()
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
        self.stdout.write(
            self.style.SUCCESS(
                f"Demo ready: sign in as '{DEMO_USER}' with password '{DEMO_PASSWORD}'"
                f" and open incident {incident.code}."
            )
        )
