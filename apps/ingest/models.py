"""Uploaded artifacts (one row per stored file) and their per-rank digests."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.incidents.models import Incident, Source
from apps.lib.codes import new_code


def _artifact_code() -> str:
    return new_code("a")


class ParseStatus(models.TextChoices):
    """Where an artifact is in its life. Allowed transitions (all compare-and-set):

    pending → queued (the parse task was handed to the broker; stays pending when the
    broker was down, for the auditor to re-enqueue) → parsing → parsed | failed.
    pending/queued → parsing is also allowed (a fast worker), and parsing → parsing
    (a redelivered task after a worker died takes over with a new fence token).
    rejected is terminal: the file was refused at upload and no bytes are stored.
    """

    PENDING = "pending", "Waiting to be queued"
    QUEUED = "queued", "Queued"
    PARSING = "parsing", "Parsing"
    PARSED = "parsed", "Parsed"
    FAILED = "failed", "Could not be parsed"
    REJECTED = "rejected", "Rejected"


# The one definition of "still on its way" and "done" for a file's parse: the upload
# list, the parse fan-in, the analysis request and the analysis panel all read these.
ACTIVE_STATUSES = (ParseStatus.PENDING, ParseStatus.QUEUED, ParseStatus.PARSING)
DONE_STATUSES = (ParseStatus.PARSED, ParseStatus.FAILED, ParseStatus.REJECTED)


class Artifact(models.Model):
    """One stored file of an incident: a log, a metrics table, a dump…

    The bytes live in Django storage under ``storage_key`` (generated; the original
    name is metadata only). ``display_name`` is the path inside the upload/archive
    (``logs.tar.gz/node-03/rank_24.log``): what the engine is told, and what
    evidence references call ``file``.
    """

    code = models.CharField(max_length=24, unique=True, default=_artifact_code, editable=False)
    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="artifacts")
    original_name = models.CharField(max_length=500)
    display_name = models.CharField(max_length=1000)
    storage_key = models.CharField(max_length=300, blank=True)
    size = models.BigIntegerField(default=0)
    sha256 = models.CharField(max_length=64, blank=True)
    kind = models.CharField(max_length=24, default="other")
    ranks = models.JSONField(default=list, blank=True)
    hosts = models.JSONField(default=list, blank=True)
    rank_hosts = models.JSONField(default=dict, blank=True)
    parse_status = models.CharField(
        max_length=12, choices=ParseStatus.choices, default=ParseStatus.PENDING
    )
    parse_error = models.TextField(blank=True)
    # Things worth knowing that are not failures (non-UTF-8 bytes, parser warnings).
    notes = models.JSONField(default=list, blank=True)
    parsed_key = models.CharField(max_length=300, blank=True)
    metrics_key = models.CharField(max_length=300, blank=True)
    line_count = models.BigIntegerField(null=True, blank=True)
    event_count = models.IntegerField(default=0)
    source = models.CharField(max_length=8, choices=Source.choices, default=Source.WEB)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # Null while the parse task has not reached the broker (broker down): the auditor
    # re-enqueues such rows (``artifact_enqueue_pending``).
    enqueued_at = models.DateTimeField(null=True, blank=True)
    parse_started_at = models.DateTimeField(null=True, blank=True)
    # Touched every few seconds by the running parse (fenced by ``parse_token``): a row
    # ``parsing`` whose heartbeat went quiet lost its worker, and the auditor re-sends it.
    parse_heartbeat_at = models.DateTimeField(null=True, blank=True)
    parsed_at = models.DateTimeField(null=True, blank=True)
    # Fence token of the parse run that owns the row; a stale run cannot overwrite it.
    parse_token = models.CharField(max_length=32, blank=True)
    parse_attempts = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["display_name", "pk"]
        indexes = [
            models.Index(fields=["incident", "parse_status"]),
            models.Index(fields=["incident", "display_name"]),
        ]
        constraints = [
            # The same content is stored once per incident, however many uploads race.
            models.UniqueConstraint(
                fields=["incident", "sha256"],
                condition=~models.Q(sha256=""),
                name="artifact_unique_content_per_incident",
            )
        ]

    def __str__(self) -> str:
        return f"{self.display_name} ({self.code})"

    @property
    def is_active(self) -> bool:
        return self.parse_status in ACTIVE_STATUSES

    @property
    def rank_label(self) -> str:
        """``0-7``, ``3``, ``0,2,5`` or ``""``: compact for the list."""
        ranks = sorted(self.ranks or [])
        if not ranks:
            return ""
        if len(ranks) > 2 and ranks[-1] - ranks[0] == len(ranks) - 1:
            return f"{ranks[0]}-{ranks[-1]}"
        if len(ranks) > 6:
            return f"{', '.join(map(str, ranks[:5]))}, … ({len(ranks)} ranks)"
        return ", ".join(map(str, ranks))


class RankDigest(models.Model):
    """What one artifact says about one global rank (one row per artifact and rank).

    First/last timestamp, last step, the last NCCL state seen and how many notable
    events: enough to answer "which rank stopped first" without reading the files.
    """

    artifact = models.ForeignKey(Artifact, on_delete=models.CASCADE, related_name="rank_digests")
    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="rank_digests")
    rank = models.IntegerField()
    host = models.CharField(max_length=200, blank=True)
    first_time = models.CharField(max_length=40, blank=True)
    last_time = models.CharField(max_length=40, blank=True)
    last_step = models.BigIntegerField(null=True, blank=True)
    last_nccl_state = models.CharField(max_length=300, blank=True)
    last_nccl_line = models.IntegerField(null=True, blank=True)
    event_count = models.IntegerField(default=0)

    class Meta:
        ordering = ["rank", "artifact_id"]
        constraints = [
            models.UniqueConstraint(fields=["artifact", "rank"], name="rank_digest_unique")
        ]
        indexes = [models.Index(fields=["incident", "rank"])]

    def __str__(self) -> str:
        return f"rank {self.rank} in {self.artifact_id}"
