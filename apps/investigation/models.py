"""What people record while they investigate: hypotheses, Five Whys chains, fixes with
their verification, and action items (prevention, fix, process).

Analyzers propose (``doc["proposals"]`` in the triage document); people decide. A
proposal that is accepted becomes a row here with ``source="proposed"`` and the
proposal's id, so it is never proposed twice.

Evidence is a JSON list of refs ``{"file", "line", "text"}``; ``file`` is an artifact's
display name, resolved to the evidence viewer by the ``evidence_url`` template tag.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.incidents.models import Incident
from apps.lib.codes import new_code


def _hypothesis_code() -> str:
    return new_code("h")


def _chain_code() -> str:
    return new_code("w")


def _fix_code() -> str:
    return new_code("f")


def _verification_code() -> str:
    return new_code("v")


def _action_code() -> str:
    return new_code("t")


class HypothesisStatus(models.TextChoices):
    """pending → supported | refuted | inconclusive; a tested hypothesis may be re-tested
    (any status → any other), the test and result are kept with it."""

    PENDING = "pending", "Pending"
    SUPPORTED = "supported", "Supported"
    REFUTED = "refuted", "Refuted"
    INCONCLUSIVE = "inconclusive", "Inconclusive"


class Origin(models.TextChoices):
    MANUAL = "manual", "Manual"
    PROPOSED = "proposed", "Proposed by the analyzers"


class Hypothesis(models.Model):
    code = models.CharField(max_length=24, unique=True, default=_hypothesis_code, editable=False)
    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="hypotheses")
    title = models.CharField(max_length=300)
    description = models.TextField(blank=True)
    expected_if_true = models.TextField(blank=True)
    test_plan = models.TextField(blank=True)
    test_result = models.TextField(blank=True)
    status = models.CharField(
        max_length=16, choices=HypothesisStatus.choices, default=HypothesisStatus.PENDING
    )
    evidence = models.JSONField(default=list, blank=True)
    source = models.CharField(max_length=12, choices=Origin.choices, default=Origin.MANUAL)
    proposal_id = models.CharField(max_length=120, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["incident", "proposal_id"],
                condition=~models.Q(proposal_id=""),
                name="hypothesis_unique_proposal",
            )
        ]

    def __str__(self) -> str:
        return self.title


class WhyChain(models.Model):
    code = models.CharField(max_length=24, unique=True, default=_chain_code, editable=False)
    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="why_chains")
    title = models.CharField(max_length=300)
    is_chosen = models.BooleanField(default=False)
    source = models.CharField(max_length=12, choices=Origin.choices, default=Origin.MANUAL)
    proposal_id = models.CharField(max_length=120, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]
        constraints = [
            # At most one chosen chain: its last level is the incident's root cause.
            models.UniqueConstraint(
                fields=["incident"],
                condition=models.Q(is_chosen=True),
                name="whychain_one_chosen_per_incident",
            )
        ]

    def __str__(self) -> str:
        return self.title

    @property
    def root_cause(self) -> WhyStep | None:
        steps = list(self.steps.all())
        return steps[-1] if steps else None


class WhyStep(models.Model):
    chain = models.ForeignKey(WhyChain, on_delete=models.CASCADE, related_name="steps")
    order = models.PositiveIntegerField()
    why = models.TextField()
    answer = models.TextField()
    evidence = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["order", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["chain", "order"], name="whystep_unique_order")
        ]

    def __str__(self) -> str:
        return f"{self.order}. {self.why}"


class ContributingFactor(models.Model):
    incident = models.ForeignKey(
        Incident, on_delete=models.CASCADE, related_name="contributing_factors"
    )
    text = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return self.text


class FixKind(models.TextChoices):
    IMMEDIATE = "immediate", "Immediate"
    STRUCTURAL = "structural", "Structural"


class FixStatus(models.TextChoices):
    """proposed → applied → verified | rejected; a rejected or verified fix may be
    re-applied (→ applied) when a new attempt is made."""

    PROPOSED = "proposed", "Proposed"
    APPLIED = "applied", "Applied"
    VERIFIED = "verified", "Verified"
    REJECTED = "rejected", "Rejected"


class Fix(models.Model):
    code = models.CharField(max_length=24, unique=True, default=_fix_code, editable=False)
    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="fixes")
    kind = models.CharField(max_length=12, choices=FixKind.choices, default=FixKind.IMMEDIATE)
    title = models.CharField(max_length=300)
    detail = models.TextField(blank=True)
    status = models.CharField(max_length=12, choices=FixStatus.choices, default=FixStatus.PROPOSED)
    proposal_id = models.CharField(max_length=120, blank=True)
    applied_at = models.DateTimeField(null=True, blank=True)
    applied_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return self.title


class Verdict(models.TextChoices):
    FIXED = "FIXED", "Fixed"
    NOT_FIXED = "NOT_FIXED", "Not fixed"
    REGRESSION = "REGRESSION", "Regression"
    INCONCLUSIVE = "INCONCLUSIVE", "Inconclusive"


class FixVerification(models.Model):
    code = models.CharField(max_length=24, unique=True, default=_verification_code, editable=False)
    fix = models.ForeignKey(Fix, on_delete=models.CASCADE, related_name="verifications")
    # {metric: [value per trial]}
    baseline = models.JSONField(default=dict)
    post_fix = models.JSONField(default=dict)
    tolerance = models.FloatField(default=0.05)
    verdict = models.CharField(max_length=16, choices=Verdict.choices)
    # {"metrics": {...per-metric change...}, "regressions": [...], "side_effects": [...],
    #  "target": metric name, "rule": str}
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.fix} — {self.verdict}"


class ActionKind(models.TextChoices):
    PREVENTION = "prevention", "Prevention"
    FIX = "fix", "Fix"
    PROCESS = "process", "Process"


class Checklist(models.TextChoices):
    NONE = "", "—"
    PRE_TRAINING = "pre_training", "Pre-training"
    SCALING_UP = "scaling_up", "Scaling up"
    LONG_RUNS = "long_runs", "Long runs"


class Priority(models.TextChoices):
    P1 = "p1", "P1"
    P2 = "p2", "P2"
    P3 = "p3", "P3"


class ActionStatus(models.TextChoices):
    """open → in_progress → done; open/in_progress → dropped; done/dropped → open (reopen)."""

    OPEN = "open", "Open"
    IN_PROGRESS = "in_progress", "In progress"
    DONE = "done", "Done"
    DROPPED = "dropped", "Dropped"


class ActionItem(models.Model):
    code = models.CharField(max_length=24, unique=True, default=_action_code, editable=False)
    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="action_items")
    text = models.TextField()
    kind = models.CharField(
        max_length=12, choices=ActionKind.choices, default=ActionKind.PREVENTION
    )
    checklist = models.CharField(max_length=16, choices=Checklist.choices, blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    priority = models.CharField(max_length=4, choices=Priority.choices, default=Priority.P2)
    due_date = models.DateField(null=True, blank=True)
    status = models.CharField(
        max_length=12, choices=ActionStatus.choices, default=ActionStatus.OPEN
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return self.text[:80]
