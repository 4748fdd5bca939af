"""Writes for incidents. Each is one transaction that also appends to the timeline."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from apps.accounts.models import Team
from apps.incidents.models import (
    DESCRIPTIVE_FIELDS,
    STATUS_TRANSITIONS,
    Incident,
    IncidentEvent,
    Phase,
    PhaseTransition,
    Status,
)


class TransitionError(Exception):
    """The requested change is not allowed from the incident's current state."""


def incident_event_add(
    *,
    incident: Incident,
    kind: str,
    message: str,
    actor: AbstractBaseUser | None = None,
    data: dict[str, Any] | None = None,
    at: dt.datetime | None = None,
) -> IncidentEvent:
    """Append one row to the incident's timeline."""
    return IncidentEvent.objects.create(
        incident=incident,
        kind=kind,
        message=message,
        actor=actor if actor is not None and actor.is_authenticated else None,
        data=data or {},
        at=at or timezone.now(),
    )


@transaction.atomic
def incident_create(
    *,
    team: Team,
    title: str,
    actor: AbstractBaseUser | None,
    cluster: str = "",
    job_id: str = "",
    run_key: str = "",
    framework: str = "unknown",
    gpu_count: int | None = None,
    gpu_type: str = "",
    gpu_hour_usd: Decimal | None = None,
    remaining_run_hours: float | None = None,
    problem_started_at: dt.datetime | None = None,
    detected_at: dt.datetime | None = None,
    source: str = "web",
) -> Incident:
    now = timezone.now()
    incident = Incident(
        team=team,
        title=title,
        cluster=cluster,
        job_id=job_id,
        run_key=run_key,
        framework=framework,
        gpu_count=gpu_count,
        gpu_type=gpu_type,
        gpu_hour_usd=gpu_hour_usd if gpu_hour_usd is not None else team.default_gpu_hour_usd,
        remaining_run_hours=remaining_run_hours,
        problem_started_at=problem_started_at,
        detected_at=detected_at or now,
        source=source,
        created_by=actor if actor is not None and actor.is_authenticated else None,
    )
    incident.full_clean(exclude=["created_by"])
    incident.save()
    PhaseTransition.objects.create(
        incident=incident,
        from_phase="",
        to_phase=Phase.TRIAGE,
        at=incident.phase_entered_at,
        actor=incident.created_by,
    )
    incident_event_add(
        incident=incident,
        kind="incident.created",
        message=f"Incident opened: {title}",
        actor=actor,
        data={"source": source},
    )
    return incident


@transaction.atomic
def incident_change_phase(
    *, incident: Incident, to_phase: str, actor: AbstractBaseUser | None, note: str = ""
) -> Incident:
    """Move the incident to another phase (compare-and-set on the current phase)."""
    if to_phase not in Phase.values:
        raise TransitionError(f"Unknown phase {to_phase!r}")
    current = incident.phase
    if to_phase == current:
        raise TransitionError(f"The incident is already in {Phase(current).label}.")
    now = timezone.now()
    updated = Incident.objects.filter(pk=incident.pk, phase=current).update(
        phase=to_phase, phase_entered_at=now, updated_at=now
    )
    if updated != 1:
        raise TransitionError("Someone else changed the phase first; reload and try again.")
    PhaseTransition.objects.create(
        incident=incident,
        from_phase=current,
        to_phase=to_phase,
        at=now,
        actor=actor if actor is not None and actor.is_authenticated else None,
        note=note,
    )
    incident_event_add(
        incident=incident,
        kind="incident.phase",
        message=f"Phase: {Phase(current).label} → {Phase(to_phase).label}",
        actor=actor,
        data={"from": current, "to": to_phase, "note": note},
        at=now,
    )
    incident.refresh_from_db()
    return incident


_STATUS_STAMP = {
    Status.MITIGATED: "mitigated_at",
    Status.RESOLVED: "resolved_at",
    Status.CLOSED: "closed_at",
}


@transaction.atomic
def incident_change_status(
    *, incident: Incident, to_status: str, actor: AbstractBaseUser | None
) -> Incident:
    current = incident.status
    if to_status not in STATUS_TRANSITIONS.get(current, set()):
        raise TransitionError(
            f"An incident cannot go from {Status(current).label} to "
            f"{Status(to_status).label if to_status in Status.values else to_status!r}."
        )
    now = timezone.now()
    fields: dict[str, Any] = {"status": to_status, "updated_at": now}
    stamp = _STATUS_STAMP.get(Status(to_status))
    if stamp:
        fields[stamp] = now
    updated = Incident.objects.filter(pk=incident.pk, status=current).update(**fields)
    if updated != 1:
        raise TransitionError("Someone else changed the status first; reload and try again.")
    incident_event_add(
        incident=incident,
        kind="incident.status",
        message=f"Status: {Status(current).label} → {Status(to_status).label}",
        actor=actor,
        data={"from": current, "to": to_status},
        at=now,
    )
    incident.refresh_from_db()
    return incident


@transaction.atomic
def incident_update(
    *, incident: Incident, actor: AbstractBaseUser | None, **fields: Any
) -> Incident:
    """Edit descriptive fields; the changed field names go to the timeline."""
    editable = {*DESCRIPTIVE_FIELDS, "severity"}
    unknown = set(fields) - editable
    if unknown:
        raise ValueError(f"Not editable: {', '.join(sorted(unknown))}")
    changed = [name for name, value in fields.items() if getattr(incident, name) != value]
    for name in changed:
        setattr(incident, name, fields[name])
    if changed:
        incident.full_clean(exclude=["created_by"])
        # Only the edited columns: a full save from this (possibly stale) copy would
        # undo a status or phase change another request made meanwhile.
        incident.save(update_fields=[*changed, "updated_at"])
        incident_event_add(
            incident=incident,
            kind="incident.updated",
            message="Edited " + ", ".join(changed),
            actor=actor,
            data={"fields": changed},
        )
    return incident
