"""Typed request and response bodies of the REST API. Only opaque codes, never primary keys."""

from __future__ import annotations

import json
from typing import Any

from rest_framework import serializers

from apps.api.fields import JsonObjectText, Money, Text, Upload
from apps.incidents.models import Framework, Incident, Phase, Severity, Source, Status


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()


class IncidentSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="code", read_only=True)
    team_name = serializers.CharField(source="team.name", read_only=True)

    class Meta:
        model = Incident
        fields = [
            "code",
            "team",
            "team_name",
            "title",
            "cluster",
            "job_id",
            "run_key",
            "framework",
            "gpu_count",
            "gpu_type",
            "gpu_hour_usd",
            "remaining_run_hours",
            "problem_started_at",
            "detected_at",
            "severity",
            "status",
            "phase",
            "phase_entered_at",
            "mitigated_at",
            "resolved_at",
            "closed_at",
            "source",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class IncidentFilterSerializer(serializers.Serializer):
    """Query filters; an empty one (``?team=``) is the same as leaving it out."""

    status = serializers.ChoiceField(choices=Status.choices, required=False, allow_blank=True)
    severity = serializers.ChoiceField(choices=Severity.choices, required=False, allow_blank=True)
    phase = serializers.ChoiceField(choices=Phase.choices, required=False, allow_blank=True)
    cluster = Text(required=False, allow_blank=True, max_length=120)
    job_id = Text(required=False, allow_blank=True, max_length=120)
    team = Text(required=False, allow_blank=True, max_length=24, help_text="Team code")
    q = Text(required=False, allow_blank=True, max_length=200, help_text="Free-text search")


class _IncidentFieldsMixin(serializers.Serializer):
    cluster = Text(required=False, allow_blank=True, max_length=120)
    job_id = Text(required=False, allow_blank=True, max_length=120)
    framework = serializers.ChoiceField(choices=Framework.choices, required=False)
    gpu_count = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, max_value=10_000_000
    )
    gpu_type = Text(required=False, allow_blank=True, max_length=60)
    gpu_hour_usd = Money(required=False)
    remaining_run_hours = serializers.FloatField(
        required=False, allow_null=True, min_value=0, max_value=1e7
    )
    problem_started_at = serializers.DateTimeField(required=False, allow_null=True)
    detected_at = serializers.DateTimeField(required=False, allow_null=True)


class IncidentCreateSerializer(_IncidentFieldsMixin):
    team = Text(required=False, max_length=24, help_text="Team code; optional if you have one team")
    title = Text(max_length=200)
    run_key = Text(required=False, allow_blank=True, max_length=120)


class IncidentUpdateSerializer(_IncidentFieldsMixin):
    title = Text(required=False, max_length=200)
    severity = serializers.ChoiceField(choices=Severity.choices, required=False)
    status = serializers.ChoiceField(choices=Status.choices, required=False)
    phase = serializers.ChoiceField(choices=Phase.choices, required=False)
    phase_note = Text(required=False, allow_blank=True, max_length=2000)


class ArtifactSerializer(serializers.Serializer):
    code = serializers.CharField()
    original_name = serializers.CharField()
    display_name = serializers.CharField()
    size = serializers.IntegerField()
    sha256 = serializers.CharField()
    kind = serializers.CharField()
    ranks = serializers.ListField(child=serializers.IntegerField())
    hosts = serializers.ListField(child=serializers.CharField())
    parse_status = serializers.CharField()
    parse_error = serializers.CharField(allow_blank=True)
    line_count = serializers.IntegerField(allow_null=True)
    source = serializers.ChoiceField(choices=Source.choices)
    created_at = serializers.DateTimeField()
    parsed_at = serializers.DateTimeField(allow_null=True)


class UploadOutcomeSerializer(serializers.Serializer):
    name = serializers.CharField()
    status = serializers.ChoiceField(choices=["stored", "duplicate", "rejected"])
    message = serializers.CharField(allow_blank=True)
    artifact = ArtifactSerializer(allow_null=True)


class UploadResultSerializer(serializers.Serializer):
    incident = serializers.CharField(help_text="Incident code")
    files = UploadOutcomeSerializer(many=True)
    note = serializers.CharField(
        required=False,
        help_text="Present when the task queue was unavailable: the files are stored and "
        "are parsed automatically once it is back",
    )


class ArtifactUploadSerializer(serializers.Serializer):
    file = serializers.ListField(
        child=Upload(allow_empty_file=True), min_length=1, help_text="One or more files"
    )


class SlurmIngestSerializer(serializers.Serializer):
    team = Text(
        required=False,
        allow_blank=True,
        max_length=24,
        help_text="Team code (signed-in users with several teams); empty is the same as absent",
    )
    cluster = serializers.RegexField(r"^[A-Za-z0-9._-]{1,120}$", help_text="SLURM_CLUSTER_NAME")
    job_id = serializers.RegexField(r"^[0-9A-Za-z._+-]{1,120}$", help_text="SLURM_JOB_ID")
    run_key = serializers.RegexField(
        r"^[0-9A-Za-z._:+-]{0,120}$",
        required=False,
        allow_blank=True,
        help_text="SLURM_JOB_SLUID when set, else SLURM_JOB_RESTART_COUNT (default 0)",
    )
    node = serializers.RegexField(
        r"^[A-Za-z0-9._-]{0,120}$", required=False, allow_blank=True, help_text="SLURMD_NODENAME"
    )
    stage = serializers.ChoiceField(
        choices=[("node", "node Epilog"), ("controller", "EpilogSlurmctld: the job is over")],
        default="node",
    )
    exit_code = serializers.IntegerField(required=False, min_value=-(2**31), max_value=2**31 - 1)
    signal = serializers.IntegerField(required=False, min_value=0, max_value=255)
    job = JsonObjectText(
        required=False,
        allow_blank=True,
        max_length=1_000_000,
        help_text="The job record as a JSON object (EpilogSlurmctld)",
    )
    file = serializers.ListField(
        child=Upload(allow_empty_file=True),
        required=False,
        help_text="Node-local evidence: rank logs, dmesg excerpt, nvidia-smi output",
    )

    def validate_job(self, value: str) -> dict[str, Any] | None:
        if not value:
            return None
        try:
            record = json.loads(value)
        except ValueError:
            raise serializers.ValidationError("Not valid JSON.") from None
        if not isinstance(record, dict):
            raise serializers.ValidationError("Expected a JSON object.")
        return record


class SlurmIngestResultSerializer(serializers.Serializer):
    incident = serializers.CharField(help_text="Incident code")
    created = serializers.BooleanField(help_text="This request opened the incident")
    analysis = serializers.ChoiceField(
        choices=["settling", "requested", "unchanged"],
        help_text="settling: analysis starts once uploads go quiet; requested: it starts now",
    )
    files = UploadOutcomeSerializer(many=True)
    note = serializers.CharField(
        required=False,
        help_text="Present when the task queue was unavailable: the files are stored and "
        "are parsed automatically once it is back",
    )


class AnalysisStatusSerializer(serializers.Serializer):
    code = serializers.CharField(allow_null=True)
    status = serializers.CharField(allow_null=True, help_text="queued|running|succeeded|failed")
    trigger = serializers.CharField(allow_blank=True, allow_null=True)
    progress_current = serializers.IntegerField(allow_null=True)
    progress_total = serializers.IntegerField(allow_null=True)
    progress_message = serializers.CharField(allow_blank=True, allow_null=True)
    engine_version = serializers.CharField(allow_blank=True, allow_null=True)
    error = serializers.CharField(allow_blank=True, allow_null=True)
    created_at = serializers.DateTimeField(allow_null=True)
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    artifacts = serializers.DictField(
        child=serializers.IntegerField(), help_text="Artifact count per parse status"
    )


class EvidenceRefSerializer(serializers.Serializer):
    file = serializers.CharField(allow_blank=True)
    line = serializers.IntegerField(allow_null=True)
    text = serializers.CharField(allow_blank=True)


class FindingSerializer(serializers.Serializer):
    phase = serializers.CharField()
    kind = serializers.CharField()
    title = serializers.CharField()
    detail = serializers.CharField(allow_blank=True)
    confidence = serializers.FloatField(allow_null=True)
    ranks = serializers.ListField(child=serializers.IntegerField())
    hosts = serializers.ListField(child=serializers.CharField())
    evidence = EvidenceRefSerializer(many=True)
    order = serializers.IntegerField()


def _paginated(name: str, item: type[serializers.Serializer]) -> type[serializers.Serializer]:
    """The envelope LimitOffsetPagination puts around a list (``?limit=&offset=``)."""
    return type(
        name,
        (serializers.Serializer,),
        {
            "count": serializers.IntegerField(),
            "next": serializers.URLField(allow_null=True),
            "previous": serializers.URLField(allow_null=True),
            "results": item(many=True),
        },
    )


PaginatedIncidentListSerializer = _paginated("PaginatedIncidentList", IncidentSerializer)
PaginatedArtifactListSerializer = _paginated("PaginatedArtifactList", ArtifactSerializer)
