"""Writes for the investigation: each one transaction plus an IncidentEvent timeline row."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.incidents.models import Incident
from apps.incidents.services import incident_event_add
from apps.investigation import protocol
from apps.investigation.models import (
    ActionItem,
    ActionKind,
    ActionStatus,
    ContributingFactor,
    Fix,
    FixStatus,
    FixVerification,
    Hypothesis,
    HypothesisStatus,
    Origin,
    Priority,
    WhyChain,
    WhyStep,
)
from apps.investigation.verification import verify_fix
from rankscope.document import read_document

PROPOSAL_KINDS = ("hypotheses", "five_whys", "fixes", "prevention")


class InvestigationError(Exception):
    """A write that cannot be done; the message is shown to the person."""


class ConflictError(InvestigationError):
    """Someone else changed the record first (a compare-and-set lost); the view answers 409."""


CONFLICT_MESSAGE = "Someone else changed this first; reload and try again."


def _actor(actor: AbstractBaseUser | None) -> AbstractBaseUser | None:
    return actor if actor is not None and actor.is_authenticated else None


_REF = re.compile(r"^\s*(?P<file>[^\s:][^:]*?):(?P<line>\d+)\b\s*(?P<text>.*)$")


def evidence_parse(text: str) -> list[dict[str, Any]]:
    """``file:line [note]`` one a line → evidence refs. Lines without ``:line`` are notes."""
    refs = []
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        m = _REF.match(line)
        if m:
            refs.append(
                {"file": m["file"].strip()[:500], "line": int(m["line"]), "text": m["text"][:2000]}
            )
        else:
            refs.append({"file": "", "line": None, "text": line[:2000]})
    return refs[:50]


def _clean_refs(refs: Iterable[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    out = []
    for r in refs or []:
        if not isinstance(r, Mapping):
            continue
        line = r.get("line")
        out.append(
            {
                "file": str(r.get("file") or "")[:500],
                "line": int(line) if isinstance(line, int | float) else None,
                "text": str(r.get("text") or "")[:2000],
            }
        )
    return out[:50]


# ---------------------------------------------------------------- hypotheses


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


# ---------------------------------------------------------------- proposals


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


# ---------------------------------------------------------------- five whys


def _lock_chains(incident: Incident) -> None:
    # Two people choosing (or starting the first) chain at once would both see "no chosen
    # chain" and break the one-chosen-chain constraint; lock the incident's row so the
    # second waits and then reads the first one's choice.
    Incident.objects.select_for_update().filter(pk=incident.pk).first()


@transaction.atomic
def why_chain_create(
    *,
    incident: Incident,
    actor: AbstractBaseUser | None,
    title: str,
    levels: Sequence[Mapping[str, Any]] = (),
    source: str = Origin.MANUAL,
    proposal_id: str = "",
) -> WhyChain:
    title = (title or "").strip()
    if not title:
        raise InvestigationError("Name the symptom the chain starts from.")
    _lock_chains(incident)
    chain = WhyChain.objects.create(
        incident=incident,
        title=title[:300],
        source=source,
        proposal_id=proposal_id,
        created_by=_actor(actor),
        # The first chain is the chosen one until someone chooses another.
        is_chosen=not incident.why_chains.filter(is_chosen=True).exists(),
    )
    for i, level in enumerate(levels, start=1):
        WhyStep.objects.create(
            chain=chain,
            order=i,
            why=str(level.get("why") or ""),
            answer=str(level.get("answer") or ""),
            evidence=_clean_refs(level.get("evidence")),
        )
    incident_event_add(
        incident=incident,
        kind="investigation.why_chain_added",
        message=f"Five Whys chain started: {chain.title}",
        actor=actor,
        data={"chain": chain.code, "source": source},
    )
    return chain


@transaction.atomic
def why_step_add(
    *,
    chain: WhyChain,
    actor: AbstractBaseUser | None,
    why: str,
    answer: str,
    evidence: Sequence[Mapping[str, Any]] | None = None,
) -> WhyStep:
    if not (why or "").strip() or not (answer or "").strip():
        raise InvestigationError("Each level needs a why and its answer.")
    # Lock the chain so two people adding a level at once get consecutive orders.
    WhyChain.objects.select_for_update().get(pk=chain.pk)
    last = chain.steps.order_by("-order").first()
    step = WhyStep.objects.create(
        chain=chain,
        order=(last.order + 1) if last else 1,
        why=why.strip(),
        answer=answer.strip(),
        evidence=_clean_refs(evidence),
    )
    incident_event_add(
        incident=chain.incident,
        kind="investigation.why_step_added",
        message=f"Why #{step.order} ({chain.title}): {step.answer[:200]}",
        actor=actor,
        data={"chain": chain.code, "order": step.order},
    )
    return step


DRAFT_MARK = "(draft: confirm or edit)"


@transaction.atomic
def why_step_edit(
    *, step: WhyStep, actor: AbstractBaseUser | None, why: str, answer: str
) -> WhyStep:
    """Rewrite a level (an accepted draft of the analysis is confirmed by saving it)."""
    why, answer = (why or "").strip(), (answer or "").strip().replace(DRAFT_MARK, "").strip()
    if not why or not answer:
        raise InvestigationError("Each level needs a why and its answer.")
    WhyChain.objects.select_for_update().get(pk=step.chain_id)
    step.why, step.answer = why, answer
    step.save(update_fields=["why", "answer"])
    incident_event_add(
        incident=step.chain.incident,
        kind="investigation.why_step_edited",
        message=f"Why #{step.order} ({step.chain.title}) edited: {answer[:200]}",
        actor=actor,
        data={"chain": step.chain.code, "order": step.order},
    )
    return step


@transaction.atomic
def why_step_delete(*, step: WhyStep, actor: AbstractBaseUser | None) -> None:
    """Remove a level; the levels after it move up one."""
    chain = WhyChain.objects.select_for_update().get(pk=step.chain_id)
    order, answer = step.order, step.answer
    step.delete()
    for later in chain.steps.filter(order__gt=order).order_by("order"):
        later.order -= 1
        later.save(update_fields=["order"])
    incident_event_add(
        incident=chain.incident,
        kind="investigation.why_step_removed",
        message=f"Why #{order} ({chain.title}) removed: {answer[:200]}",
        actor=actor,
        data={"chain": chain.code, "order": order},
    )


@transaction.atomic
def contributing_factor_edit(
    *, factor: ContributingFactor, actor: AbstractBaseUser | None, text: str
) -> ContributingFactor:
    text = (text or "").strip().replace(DRAFT_MARK, "").strip()
    if not text:
        raise InvestigationError("A contributing factor needs a text (or remove it).")
    factor.text = text[:2000]
    factor.save(update_fields=["text"])
    return factor


@transaction.atomic
def contributing_factor_delete(
    *, factor: ContributingFactor, actor: AbstractBaseUser | None
) -> None:
    incident, text = factor.incident, factor.text
    factor.delete()
    incident_event_add(
        incident=incident,
        kind="investigation.factor_removed",
        message=f"Contributing factor removed: {text[:200]}",
        actor=actor,
        data={},
    )


@transaction.atomic
def why_chain_choose(*, chain: WhyChain, actor: AbstractBaseUser | None) -> WhyChain:
    """Make this chain the one whose last level is the root cause (the last choice wins;
    choosing is serialised per incident so two choices at once cannot both stick)."""
    _lock_chains(chain.incident)
    if not WhyChain.objects.filter(pk=chain.pk).exists():
        raise ConflictError("That chain no longer exists; reload the page.")
    WhyChain.objects.filter(incident=chain.incident, is_chosen=True).exclude(pk=chain.pk).update(
        is_chosen=False
    )
    WhyChain.objects.filter(pk=chain.pk).update(is_chosen=True)
    chain.is_chosen = True
    root = chain.steps.order_by("-order").first()
    incident_event_add(
        incident=chain.incident,
        kind="investigation.root_cause_chosen",
        message=f"Root cause chain chosen: {chain.title}"
        + (f" — {root.answer[:200]}" if root else ""),
        actor=actor,
        data={"chain": chain.code},
    )
    return chain


@transaction.atomic
def contributing_factor_add(
    *, incident: Incident, actor: AbstractBaseUser | None, text: str
) -> ContributingFactor:
    text = (text or "").strip()
    if not text:
        raise InvestigationError("Describe the contributing factor.")
    factor = ContributingFactor.objects.create(incident=incident, text=text[:2000])
    incident_event_add(
        incident=incident,
        kind="investigation.factor_added",
        message=f"Contributing factor: {text[:200]}",
        actor=actor,
    )
    return factor


# ---------------------------------------------------------------- fixes


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


# ---------------------------------------------------------------- action items


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
