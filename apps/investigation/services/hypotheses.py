"""Hypotheses: proposed, edited, tested (supported / refuted) with evidence."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from apps.incidents.models import Incident
from apps.incidents.services import incident_event_add
from apps.investigation.models import (
    Hypothesis,
    HypothesisStatus,
    Origin,
)
from apps.investigation.services.common import (
    ConflictError,
    InvestigationError,
    _actor,
    _clean_refs,
)


@transaction.atomic
def hypothesis_create(
    *,
    incident: Incident,
    actor: AbstractBaseUser | None,
    title: str,
    description: str = "",
    expected_if_true: str = "",
    test_plan: str = "",
    evidence: Sequence[Mapping[str, Any]] | None = None,
    source: str = Origin.MANUAL,
    proposal_id: str = "",
) -> Hypothesis:
    title = (title or "").strip()
    if not title:
        raise InvestigationError("A hypothesis needs a title.")
    h = Hypothesis.objects.create(
        incident=incident,
        title=title[:300],
        description=description,
        expected_if_true=expected_if_true,
        test_plan=test_plan,
        evidence=_clean_refs(evidence),
        source=source,
        proposal_id=proposal_id,
        created_by=_actor(actor),
    )
    incident_event_add(
        incident=incident,
        kind="investigation.hypothesis_added",
        message=f"Hypothesis added: {h.title}",
        actor=actor,
        data={"hypothesis": h.code, "source": source},
    )
    return h


@transaction.atomic
def hypothesis_update(
    *, hypothesis: Hypothesis, actor: AbstractBaseUser | None, **fields: Any
) -> Hypothesis:
    allowed = {"title", "description", "expected_if_true", "test_plan"}
    changed = []
    for name, value in fields.items():
        if name not in allowed:
            raise InvestigationError(f"{name} cannot be edited here.")
        if name == "title" and not (value or "").strip():
            raise InvestigationError("A hypothesis needs a title.")
        if getattr(hypothesis, name) != value:
            setattr(hypothesis, name, value)
            changed.append(name)
    if changed:
        hypothesis.save(update_fields=[*changed, "updated_at"])
        incident_event_add(
            incident=hypothesis.incident,
            kind="investigation.hypothesis_edited",
            message=f"Hypothesis edited: {hypothesis.title}",
            actor=actor,
            data={"hypothesis": hypothesis.code, "fields": changed},
        )
    return hypothesis


@transaction.atomic
def hypothesis_record_test(
    *,
    hypothesis: Hypothesis,
    actor: AbstractBaseUser | None,
    status: str,
    test_plan: str,
    test_result: str,
    evidence: Sequence[Mapping[str, Any]] | None = None,
) -> Hypothesis:
    """Mark a hypothesis supported/refuted/inconclusive with the test run and its result."""
    if status not in HypothesisStatus.values or status == HypothesisStatus.PENDING:
        raise InvestigationError("Choose supported, refuted or inconclusive.")
    if not (test_plan or hypothesis.test_plan).strip() or not (test_result or "").strip():
        raise InvestigationError("Say which test was run and what it showed.")
    old = hypothesis.status
    # Lock the row so evidence added by someone else meanwhile is kept, not replaced by
    # this (possibly stale) copy's list; then compare-and-set on the status this copy saw.
    current = Hypothesis.objects.select_for_update().filter(pk=hypothesis.pk).first()
    if current is None:
        raise ConflictError("That hypothesis no longer exists; reload the page.")
    changes: dict[str, Any] = {"status": status, "test_result": test_result}
    if test_plan.strip():
        changes["test_plan"] = test_plan
    if evidence:
        changes["evidence"] = _clean_refs([*current.evidence, *evidence])
    changes["updated_at"] = timezone.now()
    if Hypothesis.objects.filter(pk=hypothesis.pk, status=old).update(**changes) != 1:
        raise ConflictError(
            f"Someone else marked this hypothesis {current.get_status_display().lower()} "
            "first; reload and try again."
        )
    for name, value in changes.items():
        setattr(hypothesis, name, value)
    hypothesis.evidence = changes.get("evidence", current.evidence)
    incident_event_add(
        incident=hypothesis.incident,
        kind="investigation.hypothesis_tested",
        message=f"Hypothesis {HypothesisStatus(status).label.lower()}: {hypothesis.title}",
        actor=actor,
        data={"hypothesis": hypothesis.code, "from": old, "to": status},
    )
    return hypothesis
