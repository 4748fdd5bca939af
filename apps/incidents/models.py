"""Incidents, their phase transitions, and the append-only timeline every app writes to."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.db import models

from apps.accounts.models import Team
from apps.lib.codes import new_code


def _incident_code() -> str:
    return new_code("i")


class Phase(models.TextChoices):
    """The five phases of the investigation protocol, in order.

    Any phase may be entered from any other (people go back to localization when a
    hypothesis is refuted); every change is a PhaseTransition row, so the time spent
    in each phase can be computed later.
    """

    TRIAGE = "triage", "Triage"
    LOCALIZATION = "localization", "Localization"
    ISOLATION = "isolation", "Isolation"
    ROOT_CAUSE = "root_cause", "Root cause"
    RESOLUTION = "resolution", "Resolution"


PHASE_ORDER: list[str] = [p.value for p in Phase]


class Status(models.TextChoices):
    """Incident status. Allowed transitions (see ``STATUS_TRANSITIONS``):

    open → mitigated → resolved → closed; open → resolved; any of open/mitigated/
    resolved → closed; closed → open (reopen) and resolved → open (regression).
    """

    OPEN = "open", "Open"
    MITIGATED = "mitigated", "Mitigated"
    RESOLVED = "resolved", "Resolved"
    CLOSED = "closed", "Closed"


STATUS_TRANSITIONS: dict[str, set[str]] = {
    Status.OPEN: {Status.MITIGATED, Status.RESOLVED, Status.CLOSED},
    Status.MITIGATED: {Status.RESOLVED, Status.CLOSED, Status.OPEN},
    Status.RESOLVED: {Status.CLOSED, Status.OPEN},
    Status.CLOSED: {Status.OPEN},
}


class Severity(models.TextChoices):
    UNTRIAGED = "untriaged", "Untriaged"
    CRITICAL = "critical", "Critical"
    WARNING = "warning", "Warning"
    OK = "ok", "OK"


class Framework(models.TextChoices):
    PYTORCH = "pytorch", "PyTorch"
    NEMO = "nemo", "NeMo"
    MEGATRON = "megatron", "Megatron-LM"
    DEEPSPEED = "deepspeed", "DeepSpeed"
    LIGHTNING = "lightning", "Lightning"
    UNKNOWN = "unknown", "Unknown"


class Source(models.TextChoices):
    WEB = "web", "Web"
    API = "api", "API"
    SLURM = "slurm", "SLURM epilog"
    CLI = "cli", "Command line"


# The fields that describe an incident and that its owner may edit after creation
# (the form and the update service both take them from here).
DESCRIPTIVE_FIELDS: tuple[str, ...] = (
    "title",
    "cluster",
    "job_id",
    "framework",
    "gpu_count",
    "gpu_type",
    "gpu_hour_usd",
    "remaining_run_hours",
    "problem_started_at",
    "detected_at",
)


class Incident(models.Model):
    code = models.CharField(max_length=24, unique=True, default=_incident_code, editable=False)
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="incidents")
    title = models.CharField(max_length=200)
    cluster = models.CharField(max_length=120, blank=True)
    job_id = models.CharField(max_length=120, blank=True, help_text="Scheduler job id")
    # Distinguishes runs of the same job id (SLURM SLUID or restart count).
    run_key = models.CharField(max_length=120, blank=True)
    framework = models.CharField(
        max_length=16, choices=Framework.choices, default=Framework.UNKNOWN
    )
    gpu_count = models.PositiveIntegerField(null=True, blank=True)
    gpu_type = models.CharField(max_length=60, blank=True)
    gpu_hour_usd = models.DecimalField(
        max_digits=10, decimal_places=2, default=Decimal("4.00"), help_text="$ per GPU-hour"
    )
    remaining_run_hours = models.FloatField(
        null=True, blank=True, help_text="Hours the run still had to go when it failed"
    )
    problem_started_at = models.DateTimeField(null=True, blank=True)
    detected_at = models.DateTimeField(null=True, blank=True)

    severity = models.CharField(max_length=12, choices=Severity.choices, default=Severity.UNTRIAGED)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.OPEN)
    phase = models.CharField(max_length=16, choices=Phase.choices, default=Phase.TRIAGE)
    phase_entered_at = models.DateTimeField(auto_now_add=True)
    mitigated_at = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    source = models.CharField(max_length=8, choices=Source.choices, default=Source.WEB)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["team", "status"]),
            models.Index(fields=["team", "cluster", "job_id"]),
        ]
        constraints = [
            # One incident per job run, however many nodes post at the same instant.
            models.UniqueConstraint(
                fields=["team", "cluster", "job_id", "run_key"],
                condition=~models.Q(job_id=""),
                name="incident_unique_job_run",
            )
        ]

    def __str__(self) -> str:
        return f"{self.title} ({self.code})"


class PhaseTransition(models.Model):
    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="transitions")
    from_phase = models.CharField(max_length=16, choices=Phase.choices, blank=True)
    to_phase = models.CharField(max_length=16, choices=Phase.choices)
    at = models.DateTimeField()
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["at", "pk"]

    def __str__(self) -> str:
        return f"{self.from_phase or '∅'} → {self.to_phase}"


class IncidentEvent(models.Model):
    """One line of the incident's timeline. Append-only: rows are never updated."""

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    kind = models.CharField(max_length=48)
    message = models.TextField()
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["at", "pk"]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.kind}: {self.message[:60]}"

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None:
            raise ValueError("IncidentEvent rows are append-only")
        super().save(*args, **kwargs)
