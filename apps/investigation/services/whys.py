"""Five Whys: chains, their steps, contributing factors, the chosen chain."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction

from apps.incidents.models import Incident
from apps.incidents.services import incident_event_add
from apps.investigation.models import (
    ContributingFactor,
    Origin,
    WhyChain,
    WhyStep,
)
from apps.investigation.services.common import (
    ConflictError,
    InvestigationError,
    _actor,
    _clean_refs,
)


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
