"""Fixes: proposed, applied, verified against the baseline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from apps.incidents.models import Incident
from apps.incidents.services import incident_event_add
from apps.investigation.models import (
    Fix,
    FixStatus,
    FixVerification,
)
from apps.investigation.services.common import (
    CONFLICT_MESSAGE,
    ConflictError,
    InvestigationError,
    _actor,
)
from apps.investigation.verification import verify_fix


@transaction.atomic
def fix_create(
    *,
    incident: Incident,
    actor: AbstractBaseUser | None,
    kind: str,
    title: str,
    detail: str = "",
    proposal_id: str = "",
    applied: bool = False,
) -> Fix:
    if kind not in ("immediate", "structural"):
        raise InvestigationError("A fix is immediate or structural.")
    if not (title or "").strip():
        raise InvestigationError("Name the fix.")
    fix = Fix.objects.create(
        incident=incident,
        kind=kind,
        title=title.strip()[:300],
        detail=detail,
        proposal_id=proposal_id,
    )
    incident_event_add(
        incident=incident,
        kind="investigation.fix_added",
        message=f"Fix recorded ({kind}): {fix.title}",
        actor=actor,
        data={"fix": fix.code},
    )
    if applied:
        fix_mark_applied(fix=fix, actor=actor)
    return fix


@transaction.atomic
def fix_mark_applied(*, fix: Fix, actor: AbstractBaseUser | None) -> Fix:
    """proposed | verified | rejected → applied, compare-and-set on the status this copy
    holds: if someone else applied or verified it meanwhile, ConflictError."""
    old = fix.status
    if old == FixStatus.APPLIED:
        raise InvestigationError("That fix is already marked applied.")
    now = timezone.now()
    rows = Fix.objects.filter(pk=fix.pk, status=old).update(
        status=FixStatus.APPLIED, applied_at=now, applied_by=_actor(actor)
    )
    if rows != 1:
        raise ConflictError(CONFLICT_MESSAGE)
    fix.refresh_from_db()
    incident_event_add(
        incident=fix.incident,
        kind="investigation.fix_applied",
        message=f"Fix applied: {fix.title}",
        actor=actor,
        data={"fix": fix.code},
    )
    return fix


@transaction.atomic
def fix_verify(
    *,
    fix: Fix,
    actor: AbstractBaseUser | None,
    baseline: Mapping[str, Sequence[float]],
    post_fix: Mapping[str, Sequence[float]],
    tolerance: float = 0.05,
    target: str = "",
    problem_resolved: bool | None = None,
) -> FixVerification:
    """Compare baseline and post-fix trials; FIXED marks the fix verified, NOT_FIXED rejected."""
    if not baseline or not post_fix:
        raise InvestigationError("Enter baseline and post-fix values (or pick metrics files).")
    try:
        result = verify_fix(
            baseline,
            post_fix,
            tolerance=tolerance,
            target=target or None,
            problem_resolved=problem_resolved,
        )
    except ValueError as exc:
        raise InvestigationError(str(exc)) from None
    v = FixVerification.objects.create(
        fix=fix,
        baseline={k: list(map(float, vs)) for k, vs in baseline.items()},
        post_fix={k: list(map(float, vs)) for k, vs in post_fix.items()},
        tolerance=tolerance,
        verdict=result.verdict,
        details=result.to_json(),
        created_by=_actor(actor),
    )
    new_status = {"FIXED": FixStatus.VERIFIED, "NOT_FIXED": FixStatus.REJECTED}.get(result.verdict)
    if new_status and fix.status != new_status:
        # Compare-and-set: a fix re-applied or verified by someone else meanwhile keeps
        # their status, and this verification is rolled back with a clear message.
        if Fix.objects.filter(pk=fix.pk, status=fix.status).update(status=new_status) != 1:
            raise ConflictError(CONFLICT_MESSAGE)
        fix.status = new_status
    extra = f"; regressions: {', '.join(result.regressions)}" if result.regressions else ""
    incident_event_add(
        incident=fix.incident,
        kind="investigation.fix_verified",
        message=f"Fix verification {result.verdict}: {fix.title}{extra}"[:1000],
        actor=actor,
        data={"fix": fix.code, "verification": v.code, "verdict": result.verdict},
    )
    return v
