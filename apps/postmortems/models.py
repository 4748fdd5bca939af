"""Post-mortems, their revisions, review comments and approvals, and incident signatures."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.urls import reverse

from apps.accounts.models import Team
from apps.incidents.models import Incident
from apps.lib.codes import new_code


def _postmortem_code() -> str:
    return new_code("p")


class Status(models.TextChoices):
    """Review workflow. Allowed transitions (``STATUS_TRANSITIONS``):

    draft → in_review (any team member submits);
    in_review → draft (any team member asks for changes);
    in_review → approved (a team lead approves);
    approved → published (a team lead publishes);
    approved → in_review (content edited after approval: the approval no longer applies).
    A published post-mortem stays published; later edits are kept as revisions.
    """

    DRAFT = "draft", "Draft"
    IN_REVIEW = "in_review", "In review"
    APPROVED = "approved", "Approved"
    PUBLISHED = "published", "Published"


STATUS_TRANSITIONS: dict[str, set[str]] = {
    Status.DRAFT: {Status.IN_REVIEW},
    Status.IN_REVIEW: {Status.DRAFT, Status.APPROVED},
    Status.APPROVED: {Status.PUBLISHED, Status.IN_REVIEW},
    Status.PUBLISHED: set(),
}
LEAD_ONLY_TARGETS: set[str] = {Status.APPROVED, Status.PUBLISHED}

# Narrative fields people edit; each edit stores a revision.
EDITABLE_FIELDS: list[tuple[str, str]] = [
    ("title", "Title"),
    ("summary", "Summary"),
    ("impact", "Impact"),
    ("root_cause", "Root cause"),
    ("trigger", "Trigger and leadup"),
    ("detection", "Detection"),
    ("response", "Response and recovery"),
    ("went_well", "What went well"),
    ("went_wrong", "What went wrong"),
    ("got_lucky", "Where we got lucky"),
    ("lessons", "Lessons learned"),
]

# Sections a review comment can be attached to (anchor slug, label), in page order.
SECTIONS: list[tuple[str, str]] = [
    ("summary", "Summary"),
    ("impact", "Impact"),
    ("cost", "Cost"),
    ("timeline", "Timeline"),
    ("analysis", "Technical analysis"),
    ("hypotheses", "Hypotheses and tests"),
    ("root_cause", "Root cause and Five Whys"),
    ("contributing", "Contributing factors"),
    ("fix", "Fix and verification"),
    ("action_items", "Action items"),
    ("retrospective", "What went well / wrong / lucky"),
    ("lessons", "Lessons learned"),
    ("similar", "Similar incidents"),
    ("general", "General"),
]


class PostMortem(models.Model):
    code = models.CharField(max_length=24, unique=True, default=_postmortem_code, editable=False)
    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="postmortems")
    # Denormalised from the incident for the team review page's filters.
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="postmortems")
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.DRAFT)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="owned_postmortems",
    )

    # The incident as it was when drafted: later edits of the incident do not rewrite it.
    snapshot = models.JSONField(default=dict)
    snapshot_taken_at = models.DateTimeField()

    title = models.CharField(max_length=200)
    summary = models.TextField(blank=True)
    impact = models.TextField(blank=True)
    root_cause = models.TextField(blank=True)
    trigger = models.TextField(blank=True)
    detection = models.TextField(blank=True)
    response = models.TextField(blank=True)
    went_well = models.TextField(blank=True)
    went_wrong = models.TextField(blank=True)
    got_lucky = models.TextField(blank=True)
    lessons = models.TextField(blank=True)
    # {phase: "key action"} for the lessons-learned table.
    phase_key_actions = models.JSONField(default=dict, blank=True)

    # Cost model inputs (apps.postmortems.cost.CostInputs.to_json) and cached results.
    cost_inputs = models.JSONField(default=dict, blank=True)
    gpu_hours_lost = models.FloatField(null=True, blank=True)
    cost_usd = models.DecimalField(max_digits=14, decimal_places=2, null=True, blank=True)
    undetected_cost_usd = models.DecimalField(
        max_digits=14, decimal_places=2, null=True, blank=True
    )

    # Filter columns copied from the snapshot.
    category = models.CharField(max_length=24, blank=True)
    severity = models.CharField(max_length=12, blank=True)
    cluster = models.CharField(max_length=120, blank=True)

    revision = models.PositiveIntegerField(default=1)
    search_text = models.TextField(blank=True, editable=False)
    # PostgreSQL only (GIN-indexed, written by postmortem_reindex); stays NULL on SQLite.
    search_vector = SearchVectorField(null=True, editable=False)

    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    published_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["team", "status"]),
            models.Index(fields=["team", "created_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.title} ({self.code})"

    def get_absolute_url(self) -> str:
        return reverse("postmortems:detail", args=[self.code])


class PostMortemRevision(models.Model):
    """The content of a post-mortem as it was before an edit (or at publication)."""

    postmortem = models.ForeignKey(PostMortem, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    status = models.CharField(max_length=12, choices=Status.choices)
    content = models.JSONField(default=dict)
    note = models.CharField(max_length=200, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-number"]
        constraints = [
            models.UniqueConstraint(
                fields=["postmortem", "number"], name="postmortem_revision_unique_number"
            )
        ]

    def __str__(self) -> str:
        return f"{self.postmortem.code} r{self.number}"


class ReviewComment(models.Model):
    postmortem = models.ForeignKey(PostMortem, on_delete=models.CASCADE, related_name="comments")
    section = models.CharField(max_length=24, default="general")
    body = models.TextField()
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    revision = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.section}: {self.body[:40]}"


class Approval(models.Model):
    postmortem = models.ForeignKey(PostMortem, on_delete=models.CASCADE, related_name="approvals")
    approver = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    revision = models.PositiveIntegerField()
    note = models.TextField(blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "pk"]

    def __str__(self) -> str:
        return f"{self.postmortem.code} approved r{self.revision}"


class IncidentSignature(models.Model):
    """What an incident's failure looked like, for finding similar incidents."""

    incident = models.OneToOneField(Incident, on_delete=models.CASCADE, related_name="signature")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    category = models.CharField(max_length=24, blank=True)
    shape = models.CharField(max_length=12, blank=True)
    error_kinds = models.JSONField(default=list, blank=True)
    collective_ops = models.JSONField(default=list, blank=True)
    xid_codes = models.JSONField(default=list, blank=True)
    hosts = models.JSONField(default=list, blank=True)
    # Which triage document this was computed from, so a newer analysis refreshes it.
    source_key = models.CharField(max_length=64, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["team", "category"])]

    def __str__(self) -> str:
        return f"{self.incident.code}: {self.category}/{self.shape}"
