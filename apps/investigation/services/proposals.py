"""The analysis' proposals (hypotheses, Five Whys, fixes, prevention) accepted into
the investigation as drafts, or dismissed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import IntegrityError, transaction

from apps.incidents.models import Incident
from apps.incidents.services import incident_event_add
from apps.investigation.models import (
    ActionItem,
    Fix,
    Hypothesis,
    Origin,
    WhyChain,
)
from apps.investigation.services.action_items import action_item_create
from apps.investigation.services.common import InvestigationError
from apps.investigation.services.fixes import fix_create
from apps.investigation.services.hypotheses import hypothesis_create
from apps.investigation.services.whys import contributing_factor_add, why_chain_create
from rankscope.document import read_document

PROPOSAL_KINDS = ("hypotheses", "five_whys", "fixes", "prevention")


def _proposal(doc: Mapping[str, Any] | None, kind: str, proposal_id: str) -> dict[str, Any]:
    for p in read_document(doc).proposals.get(kind) or []:
        if str(p.get("id")) == proposal_id:
            return p
    raise InvestigationError("That proposal is no longer in the analysis; reload the page.")


def proposal_accept(
    *,
    incident: Incident,
    actor: AbstractBaseUser | None,
    kind: str,
    proposal_id: str,
    doc: Mapping[str, Any] | None,
) -> Hypothesis | WhyChain | Fix | ActionItem:
    """Turn an analyzer proposal into a record (source=proposed). Accepting twice is refused."""
    p = _proposal(doc, kind, proposal_id)
    try:
        with transaction.atomic():
            if kind == "hypotheses":
                refs = [*(p.get("supporting") or []), *(p.get("refuting") or [])]
                return hypothesis_create(
                    incident=incident,
                    actor=actor,
                    title=str(p.get("title") or "Proposed hypothesis"),
                    description=str(p.get("description") or ""),
                    expected_if_true=str(p.get("expected_if_true") or ""),
                    test_plan=str(p.get("test") or ""),
                    evidence=refs,
                    source=Origin.PROPOSED,
                    proposal_id=proposal_id,
                )
            if kind == "five_whys":
                if incident.why_chains.filter(proposal_id=proposal_id).exists():
                    raise InvestigationError("That chain was already accepted.")
                chain = why_chain_create(
                    incident=incident,
                    actor=actor,
                    title=str(p.get("title") or "Proposed chain"),
                    levels=p.get("levels") or [],
                    source=Origin.PROPOSED,
                    proposal_id=proposal_id,
                )
                for text in p.get("contributing_factors") or []:
                    contributing_factor_add(incident=incident, actor=actor, text=str(text))
                return chain
            if kind == "fixes":
                if incident.fixes.filter(proposal_id=proposal_id).exists():
                    raise InvestigationError("That fix was already accepted.")
                return fix_create(
                    incident=incident,
                    actor=actor,
                    kind=str(p.get("kind") or "immediate"),
                    title=str(p.get("title") or "Proposed fix"),
                    detail=str(p.get("detail") or ""),
                    proposal_id=proposal_id,
                )
            if kind == "prevention":
                return action_item_create(
                    incident=incident,
                    actor=actor,
                    text=str(p.get("text") or ""),
                    checklist=str(p.get("checklist") or ""),
                )
    except IntegrityError:
        raise InvestigationError("That proposal was already accepted.") from None
    raise InvestigationError("Unknown kind of proposal.")


def proposal_dismiss(
    *, incident: Incident, actor: AbstractBaseUser | None, kind: str, proposal_id: str
) -> None:
    """Dismissals are timeline rows; the page hides proposals dismissed there."""
    if kind not in PROPOSAL_KINDS:
        raise InvestigationError("Unknown kind of proposal.")
    incident_event_add(
        incident=incident,
        kind="investigation.proposal_dismissed",
        message=f"Proposal dismissed ({kind.replace('_', ' ')}): {proposal_id}",
        actor=actor,
        data={"kind": kind, "id": proposal_id},
    )
