"""Prevention action items: created, seeded from the analysis, updated."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from apps.incidents.models import Incident
from apps.incidents.services import incident_event_add
from apps.investigation import protocol
from apps.investigation.models import (
    ActionItem,
    ActionKind,
    ActionStatus,
    Priority,
)
from apps.investigation.services.common import ConflictError, InvestigationError


def _check_priority(priority: str) -> None:
    # The column has choices but the database does not enforce them; a longer value
    # would even be a database error.
    if priority not in Priority.values:
        raise InvestigationError("Priority is P1, P2 or P3.")


@transaction.atomic
def action_item_create(
    *,
    incident: Incident,
    actor: AbstractBaseUser | None,
    text: str,
    kind: str = "prevention",
    checklist: str = "",
    owner: AbstractBaseUser | None = None,
    priority: str = "p2",
    due_date: dt.date | None = None,
) -> ActionItem:
    if not (text or "").strip():
        raise InvestigationError("Say what should be done.")
    if checklist and checklist not in protocol.CHECKLISTS:
        raise InvestigationError("Unknown checklist.")
    if kind not in ActionKind.values:
        raise InvestigationError("Unknown kind of action item.")
    _check_priority(priority)
    item = ActionItem.objects.create(
        incident=incident,
        text=text.strip()[:2000],
        kind=kind,
        checklist=checklist,
        owner=owner,
        priority=priority,
        due_date=due_date,
    )
    incident_event_add(
        incident=incident,
        kind="investigation.action_added",
        message=f"Action item: {item.text[:200]}",
        actor=actor,
        data={"action": item.code},
    )
    return item


@transaction.atomic
def action_items_seed(
    *, incident: Incident, actor: AbstractBaseUser | None, checklist: str
) -> list[ActionItem]:
    """Add a checklist's items as open prevention actions; items already there are skipped."""
    if checklist not in protocol.CHECKLISTS:
        raise InvestigationError("Unknown checklist.")
    existing = set(incident.action_items.values_list("text", flat=True))
    created = [
        ActionItem.objects.create(
            incident=incident, text=text, kind="prevention", checklist=checklist
        )
        for text in protocol.CHECKLISTS[checklist]
        if text not in existing
    ]
    if created:
        incident_event_add(
            incident=incident,
            kind="investigation.actions_seeded",
            message=f"{len(created)} prevention items added from the "
            f"{protocol.CHECKLIST_LABELS[checklist].lower()} checklist",
            actor=actor,
            data={"checklist": checklist, "count": len(created)},
        )
    return created


@transaction.atomic
def action_item_update(
    *,
    item: ActionItem,
    actor: AbstractBaseUser | None,
    status: str | None = None,
    owner: AbstractBaseUser | bool | None = False,
    due_date: dt.date | bool | None = False,
    priority: str | None = None,
) -> ActionItem:
    """Change status, owner, due date or priority (``False`` = leave as is).

    Only the changed columns are written, so a concurrent edit of another field is kept;
    a status change is compare-and-set on the status this copy holds (ConflictError if
    someone else changed the status first)."""
    changes = []
    fields: dict[str, Any] = {}
    old_status = item.status
    if status is not None and status != item.status:
        if status not in ActionStatus.values:
            raise InvestigationError("Unknown status.")
        fields["status"] = status
        changes.append(f"status {ActionStatus(status).label.lower()}")
    if owner is not False and owner != item.owner:
        fields["owner"] = owner
        changes.append(f"owner {owner.get_username() if owner else 'nobody'}")
    if due_date is not False and due_date != item.due_date:
        fields["due_date"] = due_date
        changes.append(f"due {due_date.isoformat() if due_date else 'unset'}")
    if priority is not None and priority != item.priority:
        _check_priority(priority)
        fields["priority"] = priority
        changes.append(f"priority {priority.upper()}")
    if changes:
        fields["updated_at"] = timezone.now()
        rows = ActionItem.objects.filter(pk=item.pk)
        if "status" in fields:
            rows = rows.filter(status=old_status)
        if rows.update(**fields) != 1:
            raise ConflictError(
                "Someone else changed this action item's status first; reload and try again."
            )
        for name, value in fields.items():
            setattr(item, name, value)
        incident_event_add(
            incident=item.incident,
            kind="investigation.action_updated",
            message=f"Action item ({', '.join(changes)}): {item.text[:160]}",
            actor=actor,
            data={"action": item.code},
        )
    return item
