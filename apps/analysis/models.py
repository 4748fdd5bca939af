"""Analysis runs of an incident and the findings each run produced.

A run is one execution of the analysis engine over one *input set*: the incident's
artifacts as they were when the run was requested. The input set is summarised by
``AnalysisRun.fingerprint``; (incident, fingerprint) is unique, which is what makes
"analysis exactly once per input set" hold when many workers ask at the same instant.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.incidents.models import Incident
from apps.lib.codes import new_code


def _run_code() -> str:
    return new_code("r")


class RunStatus(models.TextChoices):
    """Allowed transitions (each is compare-and-set on ``status``):

    queued → running (a worker claims it, recording its task id as the fence);
    running → succeeded | failed (only by the holder of the fence);
    running → queued (the auditor, when the worker holding it stopped beating);
    queued | running → failed (the auditor, past the time limits).
    """

    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"


FINISHED = (RunStatus.SUCCEEDED, RunStatus.FAILED)


class Trigger(models.TextChoices):
    INGEST = "ingest", "Uploads parsed"
    API = "api", "API upload"
    SLURM = "slurm", "SLURM epilog"
    MANUAL = "manual", "Re-run by a person"
    AUDITOR = "auditor", "Auditor"


class AnalysisRun(models.Model):
    code = models.CharField(max_length=24, unique=True, default=_run_code, editable=False)
    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="analysis_runs")
    status = models.CharField(max_length=12, choices=RunStatus.choices, default=RunStatus.QUEUED)
    # sha256 over the sorted (artifact sha256, parse status) pairs and the engine version.
    fingerprint = models.CharField(max_length=128)
    # Primary keys of the artifacts this run reads: exactly the input set it was asked for.
    inputs = models.JSONField(default=list, blank=True)
    trigger = models.CharField(max_length=16, choices=Trigger.choices, default=Trigger.INGEST)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The fence: the Celery task id allowed to run and finish this run.
    task_id = models.CharField(max_length=64, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    progress_current = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    progress_message = models.CharField(max_length=200, blank=True)
    engine_version = models.CharField(max_length=32, blank=True)
    document = models.JSONField(null=True, blank=True)
    timings = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    enqueued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["incident", "fingerprint"], name="analysisrun_unique_input_set"
            )
        ]
        indexes = [models.Index(fields=["status", "created_at"])]

    def __str__(self) -> str:
        return f"{self.code} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED

    @property
    def percent(self) -> int:
        if not self.progress_total:
            return 0
        return min(100, round(100 * self.progress_current / self.progress_total))

    @property
    def seconds(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None


class Finding(models.Model):
    """One conclusion of one run, with the log lines it rests on (quoted exactly)."""

    run = models.ForeignKey(AnalysisRun, on_delete=models.CASCADE, related_name="findings")
    phase = models.CharField(max_length=16)
    kind = models.CharField(max_length=64)
    title = models.CharField(max_length=500)
    detail = models.TextField(blank=True)
    confidence = models.FloatField(default=0.0)
    ranks = models.JSONField(default=list, blank=True)
    hosts = models.JSONField(default=list, blank=True)
    evidence = models.JSONField(default=list, blank=True)  # [{"file", "line", "text"}]
    order = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["run", "order"]
        constraints = [
            models.UniqueConstraint(fields=["run", "order"], name="finding_unique_order")
        ]

    def __str__(self) -> str:
        return f"[{self.phase}] {self.title[:60]}"
