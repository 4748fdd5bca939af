"""Writes the API adds on top of the apps' services: the one incident per SLURM job run."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from apps.accounts.models import Team
from apps.analysis.services import analysis_request, analysis_settle_cancel
from apps.incidents.models import Incident
from apps.incidents.services import incident_create
from apps.ingest.services import artifact_upload

log = logging.getLogger(__name__)


def job_run_incident_get_or_create(
    *, team: Team, cluster: str, job_id: str, run_key: str, title: str, source: str = "slurm"
) -> tuple[Incident, bool]:
    """The incident of this job run, created by whichever request comes first.

    Hundreds of nodes post at the same instant. The unique constraint on (team, cluster,
    job_id, run_key) decides the race: the losers' INSERT fails (or their validation sees
    the winner's row) and they read the winner's incident instead.
    """
    lookup = {"team": team, "cluster": cluster, "job_id": job_id, "run_key": run_key}
    for _attempt in range(3):
        incident = _job_run_incident(lookup)
        if incident is not None:
            return incident, False
        try:
            with transaction.atomic():
                incident = incident_create(
                    team=team,
                    title=title,
                    actor=None,
                    cluster=cluster,
                    job_id=job_id,
                    run_key=run_key,
                    source=source,
                )
            return incident, True
        except (IntegrityError, ValidationError):
            continue  # another request created it a moment ago: read theirs
    incident = _job_run_incident(lookup)
    if incident is None:
        raise RuntimeError(f"Could not find or create the incident for job {job_id}")
    return incident, False


def _job_run_incident(lookup: dict[str, Any]) -> Incident | None:
    """The incident of the job run, its team the caller's object (no join: it is known).

    At most one row matches (the unique constraint), so no ORDER BY either.
    """
    incident = Incident.objects.filter(**lookup).order_by()[:1]
    found = next(iter(incident), None)
    if found is not None:
        found.team = lookup["team"]
    return found


def analysis_after_ingest(*, incident: Incident, job_complete: bool) -> None:
    """Ask for an analysis once this request's uploads are committed.

    A node's post only arms the debounce (analysis waits until uploads go quiet); the
    controller epilog says the job is over, so analysis may start now.
    """
    settle = settings.RANKSCOPE_ANALYSIS_SETTLE_SECONDS

    def _request() -> None:
        if job_complete:
            # the job is over: the last parse (or this request) starts the analysis at once
            analysis_settle_cancel(incident=incident)
            analysis_request(incident=incident, trigger="slurm")
        else:
            analysis_request(incident=incident, trigger="slurm", settle_seconds=settle)

    transaction.on_commit(_request)


def upload_files(
    *, incident: Incident, files: list[Any], actor: Any, source: str, prefix: str = ""
) -> list[Any]:
    """Store each file through the ingest service; archives may expand into many outcomes.

    `prefix` (the node name for epilog posts) keeps same-named files of different nodes
    apart, e.g. ``node017/dmesg.txt``.
    """
    outcomes: list[Any] = []
    for upload in files:
        name = f"{prefix}/{upload.name}" if prefix else upload.name
        outcomes.extend(
            artifact_upload(
                incident=incident, fileobj=upload, name=name, actor=actor, source=source
            )
        )
    return outcomes
