"""POST /api/v1/ingest/slurm — what the SLURM epilogs call (see docs/slurm/).

Every node of a job posts at once. The request finds or creates the job run's one
incident, stores the node's files (deduplicated by content), answers 202, and leaves
parsing and analysis to the workers.
"""

from __future__ import annotations

import io
import json
from typing import Any

from django.core.files.uploadedfile import UploadedFile
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.api import selectors, serializers
from apps.api.hostlist import HostlistError, expand_hostlist
from apps.api.idempotency import idempotent
from apps.api.parsers import GzipMultiPartParser
from apps.api.permissions import INGEST
from apps.api.services import (
    analysis_after_ingest,
    job_run_incident_get_or_create,
    upload_files,
)
from apps.api.views import IDEMPOTENCY_KEY, actor_of, errors, queue_note, serialize_outcomes
from apps.incidents.models import Source
from apps.incidents.services import incident_event_add


def _job_record_file(*, job_id: str, record: dict[str, Any]) -> UploadedFile:
    """The controller's job record as a file the engine reads (kind slurm_job).

    Serialised canonically, so the controller epilog running twice posts the same bytes
    and the second copy is a duplicate.
    """
    body = json.dumps(record, sort_keys=True, separators=(",", ":")).encode()
    return UploadedFile(
        file=io.BytesIO(body),
        name=f"slurm-job-{job_id}.json",
        content_type="application/json",
        size=len(body),
    )


def _title(*, cluster: str, job_id: str, record: dict[str, Any] | None) -> str:
    name = str((record or {}).get("job_name") or "").strip()
    title = f"SLURM job {job_id} on {cluster}"
    return f"{title}: {name}"[:200] if name else title


class SlurmIngestView(APIView):
    parser_classes = [GzipMultiPartParser]
    access_by_method = {"POST": INGEST}

    @extend_schema(
        operation_id="ingest_slurm",
        request={"multipart/form-data": serializers.SlurmIngestSerializer},
        parameters=[IDEMPOTENCY_KEY],
        responses={
            200: OpenApiResponse(
                serializers.SlurmIngestResultSerializer,
                description="Nothing new: every file was already stored",
            ),
            202: OpenApiResponse(
                serializers.SlurmIngestResultSerializer,
                description="Accepted; parsing and analysis continue in workers",
            ),
            **errors(400, 409, 413, 415),
        },
        description=(
            "Called by the node Epilog (stage=node, with the node's files) and by "
            "EpilogSlurmctld (stage=controller, with the job record). All posts for one "
            "(cluster, job id, run key) land in one incident. Analysis starts when uploads "
            "go quiet, or at once when the controller says the job is over."
        ),
    )
    def post(self, request: Request) -> Response:
        return idempotent(self._ingest, request)

    def _ingest(self, request: Request) -> Response:
        form = serializers.SlurmIngestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        team = selectors.team_get_for_principal(user=request.user, code=data.get("team") or None)
        record: dict[str, Any] | None = data.get("job")
        job_id = data["job_id"]
        cluster = data["cluster"]
        run_key = data.get("run_key") or "0"
        controller = data["stage"] == "controller"
        if record is not None and "job_nodelist" in record:
            try:
                record["job_nodes"] = expand_hostlist(str(record["job_nodelist"]))
            except HostlistError as exc:
                return Response(
                    {"job": [f"job_nodelist: {exc}"]}, status=status.HTTP_400_BAD_REQUEST
                )

        incident, created = job_run_incident_get_or_create(
            team=team,
            cluster=cluster,
            job_id=job_id,
            run_key=run_key,
            title=_title(cluster=cluster, job_id=job_id, record=record),
        )
        files = list(data.get("file") or [])
        if record is not None:
            record.setdefault("cluster", cluster)
            record.setdefault("job_id", job_id)
            record.setdefault("run_key", run_key)
            files.append(_job_record_file(job_id=job_id, record=record))
        outcomes = upload_files(
            incident=incident,
            files=files,
            actor=actor_of(request),
            source=Source.SLURM,
            prefix="" if controller else data.get("node", ""),
        )
        stored = any(o.status == "stored" for o in outcomes)
        if controller and stored:
            incident_event_add(
                incident=incident,
                kind="slurm.job_end",
                message=(
                    f"SLURM reports job {job_id} ended"
                    + (
                        f" with exit code {data['exit_code']}"
                        if data.get("exit_code") is not None
                        else ""
                    )
                    + (f", signal {data['signal']}" if data.get("signal") else "")
                ),
                data={"exit_code": data.get("exit_code"), "signal": data.get("signal")},
            )
        if controller and (stored or created):
            analysis_after_ingest(incident=incident, job_complete=True)
            analysis = "requested"
        elif stored:
            analysis_after_ingest(incident=incident, job_complete=False)
            analysis = "settling"
        else:
            analysis = "unchanged"
        body = {
            "incident": incident.code,
            "created": created,
            "analysis": analysis,
            "files": serialize_outcomes(outcomes),
        }
        accepted = created or stored
        queue_note(body, outcomes)
        return Response(body, status=status.HTTP_202_ACCEPTED if accepted else status.HTTP_200_OK)
