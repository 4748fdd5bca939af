"""Writes for the investigation: each one transaction plus an IncidentEvent timeline row.

A package by entity; every public name is re-exported here, so callers keep writing
``from apps.investigation import services`` and ``services.hypothesis_create(...)``.
"""

from apps.investigation.services.action_items import (
    action_item_create,
    action_item_update,
    action_items_seed,
)
from apps.investigation.services.common import (
    CONFLICT_MESSAGE,
    ConflictError,
    InvestigationError,
    evidence_parse,
)
from apps.investigation.services.fixes import (
    fix_create,
    fix_mark_applied,
    fix_verify,
)
from apps.investigation.services.hypotheses import (
    hypothesis_create,
    hypothesis_record_test,
    hypothesis_update,
)
from apps.investigation.services.proposals import (
    PROPOSAL_KINDS,
    proposal_accept,
    proposal_dismiss,
)
from apps.investigation.services.whys import (
    DRAFT_MARK,
    contributing_factor_add,
    contributing_factor_delete,
    contributing_factor_edit,
    why_chain_choose,
    why_chain_create,
    why_step_add,
    why_step_delete,
    why_step_edit,
)

__all__ = [
    "CONFLICT_MESSAGE",
    "DRAFT_MARK",
    "PROPOSAL_KINDS",
    "ConflictError",
    "InvestigationError",
    "action_item_create",
    "action_item_update",
    "action_items_seed",
    "contributing_factor_add",
    "contributing_factor_delete",
    "contributing_factor_edit",
    "evidence_parse",
    "fix_create",
    "fix_mark_applied",
    "fix_verify",
    "hypothesis_create",
    "hypothesis_record_test",
    "hypothesis_update",
    "proposal_accept",
    "proposal_dismiss",
    "why_chain_choose",
    "why_chain_create",
    "why_step_add",
    "why_step_delete",
    "why_step_edit",
]
