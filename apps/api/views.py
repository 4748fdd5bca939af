"""REST API views. Thin: validate, call a selector or service, serialize.

Every incident lookup goes through ``apps.api.selectors`` so a token or person outside
the incident's team gets 404.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.analysis.selectors import analysis_document_for_incident, analysis_latest_for_incident
from apps.api import selectors, serializers
from apps.api.authentication import TokenUser
from apps.api.idempotency import idempotent
from apps.api.pagination import PAGINATION_PARAMETERS
from apps.api.pagination import StrictLimitOffsetPagination as LimitOffsetPagination
from apps.api.parsers import GzipMultiPartParser, RawBodyParser
from apps.api.permissions import INGEST
from apps.api.services import upload_files
from apps.incidents import services as incident_services
from apps.incidents.models import Incident, Source
from apps.ingest.selectors import artifact_list_for_incident, incident_parse_counts
from apps.ingest.services import QUEUE_DOWN_NOTE, artifact_delete
from apps.postmortems.selectors import postmortem_latest_for_incident
from apps.postmortems.services import postmortem_render_markdown

ERROR = serializers.ErrorSerializer
IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key",
    {"type": "string", "maxLength": 255, "pattern": "^[ -~]*$"},
    OpenApiParameter.HEADER,
    required=False,
    description="Retrying with the same key returns the first answer instead of acting twice.",
)

PAGINATION = PAGINATION_PARAMETERS


def errors(*codes: int) -> dict[int, Any]:
    """Error responses every authenticated endpoint may give, plus `codes`.

    400 is always possible: a query parameter (``?limit=``, ``?offset=``) or the request
    itself (too many fields, a body cut short) can be refused on any endpoint.
    """
    described = {
        400: OpenApiResponse(OpenApiTypes.OBJECT, description="Invalid input, per field"),
        401: OpenApiResponse(ERROR, description="Missing or invalid credentials"),
        403: OpenApiResponse(ERROR, description="The token's scope does not allow this"),
        404: OpenApiResponse(ERROR, description="No such object in your teams"),
        409: OpenApiResponse(ERROR, description="Conflicts with the current state"),
        413: OpenApiResponse(ERROR, description="Upload too large"),
        415: OpenApiResponse(ERROR, description="Unsupported media type or encoding"),
        429: OpenApiResponse(ERROR, description="Rate limited; see Retry-After"),
    }
    return {code: described[code] for code in sorted({400, 401, 403, 404, 429, *codes})}


def actor_of(request: Request) -> Any:
    """The person behind a request, or None for a token (it has no user row)."""
    return None if isinstance(request.user, TokenUser) else request.user


def _by(request: Request) -> str:
    return str(request.user) if isinstance(request.user, TokenUser) else request.user.get_username()


# One instance for every answer: a serializer copies its declared fields when it is
# made (most of the cost of serialising one artifact); ``to_representation`` only reads
# them, so threads may share it.
_ARTIFACT = serializers.ArtifactSerializer()
_ARTIFACT_FIELDS = _ARTIFACT.fields  # bound now, before threads share the instance


def serialize_outcomes(outcomes: list[Any]) -> list[dict[str, Any]]:
    return [
        {
            "name": o.name,
            "status": o.status,
            "message": o.message or "",
            "artifact": _ARTIFACT.to_representation(o.artifact) if o.artifact else None,
        }
        for o in outcomes
    ]


def queue_note(body: dict[str, Any], outcomes: list[Any]) -> dict[str, Any]:
    """Add a ``note`` when some stored file could not be handed to the task queue."""
    if any(o.status == "stored" and QUEUE_DOWN_NOTE in (o.message or "") for o in outcomes):
        body["note"] = QUEUE_DOWN_NOTE
    return body


def upload_status(outcomes: list[Any], *, created: bool = False) -> int:
    """202 while something new was accepted (work continues in workers); 200 for repeats."""
    if created or any(o.status == "stored" for o in outcomes):
        return status.HTTP_202_ACCEPTED
    if outcomes and all(o.status == "rejected" for o in outcomes):
        return status.HTTP_400_BAD_REQUEST
    return status.HTTP_200_OK


class IncidentListView(APIView):
    parser_classes = [JSONParser]

    @extend_schema(
        operation_id="incidents_list",
        parameters=[serializers.IncidentFilterSerializer, *PAGINATION],
        responses={200: serializers.PaginatedIncidentListSerializer, **errors(400)},
    )
    def get(self, request: Request) -> Response:
        filters = serializers.IncidentFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        given = {k: v for k, v in filters.validated_data.items() if v != ""}
        qs = selectors.incident_list_for_principal(user=request.user, **given)
        paginator = LimitOffsetPagination()
        page = paginator.paginate_queryset(qs, request, view=self)
        return paginator.get_paginated_response(
            serializers.IncidentSerializer(page, many=True).data
        )

    @extend_schema(
        operation_id="incidents_create",
        request=serializers.IncidentCreateSerializer,
        parameters=[IDEMPOTENCY_KEY],
        responses={201: serializers.IncidentSerializer, **errors(400, 409)},
    )
    def post(self, request: Request) -> Response:
        return idempotent(self._create, request)

    def _create(self, request: Request) -> Response:
        form = serializers.IncidentCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = dict(form.validated_data)
        team = selectors.team_get_for_principal(user=request.user, code=data.pop("team", None))
        fields = {k: v for k, v in data.items() if v is not None and v != ""}
        try:
            incident = incident_services.incident_create(
                team=team, actor=actor_of(request), source=Source.API, **fields
            )
        except DjangoValidationError as exc:
            return _conflict_or_invalid(exc)
        return Response(serializers.IncidentSerializer(incident).data, status=201)


def _conflict_or_invalid(exc: DjangoValidationError) -> Response:
    messages = exc.message_dict if hasattr(exc, "error_dict") else {"detail": exc.messages}
    text = str(messages)
    if "incident_unique_job_run" in text or "already exists" in text:
        return Response(
            {"detail": "An incident for this cluster, job id and run already exists."},
            status=status.HTTP_409_CONFLICT,
        )
    return Response(messages, status=status.HTTP_400_BAD_REQUEST)


class IncidentDetailView(APIView):
    parser_classes = [JSONParser]

    @extend_schema(
        operation_id="incidents_retrieve",
        responses={200: serializers.IncidentSerializer, **errors()},
    )
    def get(self, request: Request, code: str) -> Response:
        incident = selectors.incident_get_for_principal(user=request.user, code=code)
        return Response(serializers.IncidentSerializer(incident).data)

    @extend_schema(
        operation_id="incidents_update",
        request=serializers.IncidentUpdateSerializer,
        responses={200: serializers.IncidentSerializer, **errors(400, 409)},
        description=(
            "Change descriptive fields, the status (open → mitigated → resolved → closed, "
            "reopen) and/or the phase (with an optional note). Transitions are "
            "compare-and-set: a conflicting change answers 409."
        ),
    )
    def patch(self, request: Request, code: str) -> Response:
        incident = selectors.incident_get_for_principal(user=request.user, code=code)
        form = serializers.IncidentUpdateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = dict(form.validated_data)
        to_status = data.pop("status", None)
        to_phase = data.pop("phase", None)
        note = data.pop("phase_note", "")
        actor = actor_of(request)
        try:
            if data:
                incident = incident_services.incident_update(incident=incident, actor=actor, **data)
            if to_status and to_status != incident.status:
                incident = incident_services.incident_change_status(
                    incident=incident, to_status=to_status, actor=actor
                )
            if to_phase and to_phase != incident.phase:
                incident = incident_services.incident_change_phase(
                    incident=incident,
                    to_phase=to_phase,
                    actor=actor,
                    note=note or ("" if actor else f"by {_by(request)}"),
                )
        except incident_services.TransitionError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        except DjangoValidationError as exc:
            return _conflict_or_invalid(exc)
        incident.refresh_from_db()
        return Response(serializers.IncidentSerializer(incident).data)


UPLOAD_REQUEST = {
    "multipart/form-data": serializers.ArtifactUploadSerializer,
    "application/octet-stream": OpenApiTypes.BINARY,
}
RAW_NAME = OpenApiParameter(
    "name",
    str,
    OpenApiParameter.QUERY,
    required=False,
    description="File name of a raw-body upload (or send an X-Filename header)",
)


class ArtifactListView(APIView):
    parser_classes = [GzipMultiPartParser, RawBodyParser]
    access_by_method = {"POST": INGEST}

    @extend_schema(
        operation_id="artifacts_list",
        parameters=PAGINATION,
        responses={200: serializers.PaginatedArtifactListSerializer, **errors()},
    )
    def get(self, request: Request, code: str) -> Response:
        incident = selectors.incident_get_for_principal(user=request.user, code=code)

        paginator = LimitOffsetPagination()
        page = paginator.paginate_queryset(
            artifact_list_for_incident(incident=incident), request, view=self
        )
        return paginator.get_paginated_response(
            serializers.ArtifactSerializer(page, many=True).data
        )

    @extend_schema(
        operation_id="artifacts_upload",
        request=UPLOAD_REQUEST,
        parameters=[RAW_NAME, IDEMPOTENCY_KEY],
        responses={
            200: OpenApiResponse(
                serializers.UploadResultSerializer, description="Every file was already stored"
            ),
            202: OpenApiResponse(
                serializers.UploadResultSerializer, description="Stored; parsing is queued"
            ),
            **errors(400, 409, 413, 415),
        },
        description=(
            "Upload files as multipart (field `file`, repeatable) or as a raw body "
            "(`?name=` or `X-Filename`). `Content-Encoding: gzip` is decompressed while "
            "streaming. Archives expand. A file already stored for the incident "
            "(same sha256) is answered with the existing record."
        ),
    )
    def post(self, request: Request, code: str) -> Response:
        incident = selectors.incident_get_for_principal(user=request.user, code=code)
        return idempotent(lambda r: self._upload(r, incident), request)

    def _upload(self, request: Request, incident: Incident) -> Response:
        files = request.FILES.getlist("file")
        if not files:
            return Response(
                {"detail": "No file: send multipart field 'file' or a raw body with ?name=."},
                status=status.HTTP_400_BAD_REQUEST,
            )
        outcomes = upload_files(
            incident=incident,
            files=files,
            actor=actor_of(request),
            source=Source.API,
        )
        body = {"incident": incident.code, "files": serialize_outcomes(outcomes)}
        return Response(queue_note(body, outcomes), status=upload_status(outcomes))


class ArtifactDetailView(APIView):
    @extend_schema(
        operation_id="artifacts_retrieve",
        responses={200: serializers.ArtifactSerializer, **errors()},
    )
    def get(self, request: Request, code: str, artifact_code: str) -> Response:
        incident = selectors.incident_get_for_principal(user=request.user, code=code)
        artifact = incident.artifacts.filter(code=artifact_code).first()
        if artifact is None:
            raise Http404("No such artifact")
        return Response(serializers.ArtifactSerializer(artifact).data)

    @extend_schema(
        operation_id="artifacts_destroy",
        responses={204: None, **errors()},
        description=(
            "Delete an artifact: its record, its parse results and its bytes in storage "
            "(write scope)."
        ),
    )
    def delete(self, request: Request, code: str, artifact_code: str) -> Response:
        incident = selectors.incident_get_for_principal(user=request.user, code=code)
        artifact = incident.artifacts.filter(code=artifact_code).first()
        if artifact is None:
            raise Http404("No such artifact")

        actor = None if isinstance(request.user, TokenUser) else request.user
        artifact_delete(artifact=artifact, actor=actor)
        return Response(status=204)


class AnalysisStatusView(APIView):
    @extend_schema(
        operation_id="analysis_status",
        responses={200: serializers.AnalysisStatusSerializer, **errors()},
        description="The latest analysis run (nulls before the first) and parse progress.",
    )
    def get(self, request: Request, code: str) -> Response:
        incident = selectors.incident_get_for_principal(user=request.user, code=code)

        run = analysis_latest_for_incident(incident=incident)
        names = [
            "code",
            "status",
            "trigger",
            "progress_current",
            "progress_total",
            "progress_message",
            "engine_version",
            "error",
            "created_at",
            "started_at",
            "finished_at",
        ]
        body = {name: getattr(run, name, None) for name in names}
        body["artifacts"] = dict(incident_parse_counts(incident=incident))
        return Response(serializers.AnalysisStatusSerializer(body).data)


class TriageView(APIView):
    @extend_schema(
        operation_id="triage_document",
        responses={200: OpenApiTypes.OBJECT, **errors()},
        description="The triage document of the latest successful analysis (see TRIAGE-JSON).",
    )
    def get(self, request: Request, code: str) -> Response:
        incident = selectors.incident_get_for_principal(user=request.user, code=code)

        document = analysis_document_for_incident(incident=incident)
        if document is None:
            raise Http404("No analysis yet")
        return Response(document)


class FindingListView(APIView):
    @extend_schema(
        operation_id="findings_list",
        responses={200: serializers.FindingSerializer(many=True), **errors()},
        description="Findings of the latest analysis run, in order (empty before the first).",
    )
    def get(self, request: Request, code: str) -> Response:
        incident = selectors.incident_get_for_principal(user=request.user, code=code)

        run = analysis_latest_for_incident(incident=incident)
        findings = run.findings.order_by("order", "pk") if run is not None else []
        return Response(serializers.FindingSerializer(findings, many=True).data)


class PostmortemMarkdownView(APIView):
    @extend_schema(
        operation_id="postmortem_markdown",
        responses={
            (200, "text/markdown"): OpenApiResponse(
                OpenApiTypes.STR, description="The latest post-mortem as markdown"
            ),
            **errors(),
        },
    )
    def get(self, request: Request, code: str) -> HttpResponse | Response:
        incident = selectors.incident_get_for_principal(user=request.user, code=code)
        postmortem = postmortem_latest_for_incident(incident=incident)
        if postmortem is None:
            raise Http404("No post-mortem yet")
        text = postmortem_render_markdown(
            postmortem=postmortem, base_url=request.build_absolute_uri("/")
        )
        response = HttpResponse(text, content_type="text/markdown; charset=utf-8")
        response["Content-Disposition"] = f'inline; filename="{incident.code}-postmortem.md"'
        return response
