"""Investigation writes from the incident page.

Every POST works as a plain form (redirect back to the incident page at the section's
anchor) and as an htmx request (the section partial is re-rendered in place). Access:
``incident_get_for_user`` (404 for outsiders, before the form is read), then records
are looked up inside that incident. The fields are read through
``apps.investigation.forms``; a refused form or write answers 422 (409 for a lost
compare-and-set) with the section — or the whole page without htmx — showing the error
at the field of the form that was sent and what was typed in it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from apps.incidents.models import Incident
from apps.incidents.selectors import incident_get_for_user
from apps.incidents.views import incident_page_response
from apps.investigation import charts, protocol, selectors, services
from apps.investigation import forms as inv_forms
from apps.investigation.models import ActionStatus, HypothesisStatus, Priority
from rankscope.document import read_document

SECTIONS = {
    "hypotheses": "section-hypotheses",
    "whys": "section-whys",
    "fixes": "section-fixes",
    "actions": "section-actions",
}


def section_context(*, incident: Incident, doc: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the investigation partials need (also used by the incident page)."""
    if doc is None:
        doc = selectors.analysis_document(incident=incident)
    triage = read_document(doc).triage
    members = get_user_model().objects.filter(teams=incident.team).order_by("username")
    return {
        "incident": incident,
        "doc": doc,
        "proposals": selectors.pending_proposals(incident=incident, doc=doc),
        "suggested_fixes": protocol.fixes_for(triage.get("category"), triage.get("shape")),
        "checklists": protocol.CHECKLISTS,
        "checklist_labels": protocol.CHECKLIST_LABELS,
        "hypothesis_statuses": [
            (v, label) for v, label in HypothesisStatus.choices if v != HypothesisStatus.PENDING
        ],
        "action_statuses": ActionStatus.choices,
        "priorities": Priority.choices,
        "team_members": members,
        "metrics_artifacts": [a for a, _ in selectors.incident_metrics_tables(incident=incident)],
        **selectors.investigation_records(incident=incident),
    }


def _respond(request: HttpRequest, incident: Incident, section: str) -> HttpResponse:
    if request.htmx:
        return render(
            request,
            f"investigation/sections.html#{section}",
            section_context(incident=incident),
        )
    return redirect(reverse("incidents:detail", args=[incident.code]) + f"#{SECTIONS[section]}")


def _refuse(
    request: HttpRequest,
    incident: Incident,
    section: str,
    *,
    form: forms.Form | None = None,
    key: str = "",
    error: str = "",
    status: int = 422,
) -> HttpResponse:
    """Answer a refused write: the section (htmx) or the whole incident page, with the
    message on top and the form's errors at its fields, the typed text kept in them."""
    failed = {"key": key, "form": form} if form is not None else None
    if form is not None and not error:
        error = " ".join(form.non_field_errors()) or "Not saved: see the fields marked below."
    extra = {"error": error, "error_section": section, "failed": failed}
    if request.htmx:
        ctx = {**section_context(incident=incident), **extra}
        return render(request, f"investigation/sections.html#{section}", ctx, status=status)
    return incident_page_response(request, incident, extra=extra, status=status)


def _incident(request: HttpRequest, code: str) -> Incident:
    return incident_get_for_user(user=request.user, code=code)


def _submit(
    request: HttpRequest,
    incident: Incident,
    section: str,
    form: forms.Form,
    work: Callable[[], object],
    *,
    key: str,
) -> HttpResponse:
    """Validate `form` (422 with field errors, nothing stored), run `work`, answer with the
    section (htmx) or a redirect; an InvestigationError is shown in the section with
    status 422 (409 for a ConflictError, someone else changed the record first)."""
    if not form.is_valid():
        return _refuse(request, incident, section, form=form, key=key)
    try:
        work()
    except services.InvestigationError as exc:
        status = 409 if isinstance(exc, services.ConflictError) else 422
        return _refuse(
            request, incident, section, form=form, key=key, error=str(exc), status=status
        )
    return _respond(request, incident, section)


def _act(
    request: HttpRequest, incident: Incident, section: str, work: Callable[[], object]
) -> HttpResponse:
    """A write without fields (a button): run `work`, answer as `_submit` does."""
    return _submit(request, incident, section, forms.Form({}), work, key="")


# ---------------------------------------------------------------- hypotheses


@require_POST
@login_required
def hypothesis_add(request: HttpRequest, code: str) -> HttpResponse:
    incident = _incident(request, code)  # 404 for outsiders, before the form is read
    form = inv_forms.HypothesisForm(request.POST)

    def work() -> None:
        data = form.cleaned_data
        services.hypothesis_create(
            incident=incident,
            actor=request.user,
            title=data["title"],
            description=data["description"],
            expected_if_true=data["expected_if_true"],
            test_plan=data["test_plan"],
            evidence=data["evidence"],
        )

    return _submit(request, incident, "hypotheses", form, work, key="hyp-add")


@require_POST
@login_required
def hypothesis_edit(request: HttpRequest, code: str, hcode: str) -> HttpResponse:
    incident = _incident(request, code)
    h = selectors.hypothesis_get(incident=incident, code=hcode)
    form = inv_forms.HypothesisEditForm(request.POST)

    def work() -> None:
        services.hypothesis_update(hypothesis=h, actor=request.user, **form.changes())

    return _submit(request, incident, "hypotheses", form, work, key=f"hyp-edit-{h.code}")


@require_POST
@login_required
def hypothesis_test(request: HttpRequest, code: str, hcode: str) -> HttpResponse:
    incident = _incident(request, code)
    h = selectors.hypothesis_get(incident=incident, code=hcode)
    form = inv_forms.HypothesisTestForm(request.POST)

    def work() -> None:
        data = form.cleaned_data
        services.hypothesis_record_test(
            hypothesis=h,
            actor=request.user,
            status=data["status"],
            test_plan=data["test_plan"],
            test_result=data["test_result"],
            evidence=data["evidence"],
        )

    return _submit(request, incident, "hypotheses", form, work, key=f"hyp-test-{h.code}")


# ---------------------------------------------------------------- proposals

_PROPOSAL_SECTION = {
    "hypotheses": "hypotheses",
    "five_whys": "whys",
    "fixes": "fixes",
    "prevention": "actions",
}
PROPOSAL_ID_MAX = 120  # the proposal_id columns


def _proposal_section(kind: str, pid: str) -> str:
    # No analyzer writes a longer id, so there is no such proposal (rather than cutting it).
    if len(pid) > PROPOSAL_ID_MAX:
        raise Http404("No such proposal.")
    return _PROPOSAL_SECTION.get(kind, "hypotheses")


@require_POST
@login_required
def proposal_accept(request: HttpRequest, code: str, kind: str, pid: str) -> HttpResponse:
    incident = _incident(request, code)
    section = _proposal_section(kind, pid)

    def work() -> None:
        services.proposal_accept(
            incident=incident,
            actor=request.user,
            kind=kind,
            proposal_id=pid,
            doc=selectors.analysis_document(incident=incident),
        )

    return _act(request, incident, section, work)


@require_POST
@login_required
def proposal_dismiss(request: HttpRequest, code: str, kind: str, pid: str) -> HttpResponse:
    incident = _incident(request, code)
    section = _proposal_section(kind, pid)

    def work() -> None:
        services.proposal_dismiss(incident=incident, actor=request.user, kind=kind, proposal_id=pid)

    return _act(request, incident, section, work)


# ---------------------------------------------------------------- five whys


@require_POST
@login_required
def why_chain_add(request: HttpRequest, code: str) -> HttpResponse:
    incident = _incident(request, code)
    form = inv_forms.WhyChainForm(request.POST)

    def work() -> None:
        services.why_chain_create(
            incident=incident,
            actor=request.user,
            title=form.cleaned_data["title"],
            levels=form.levels(),
        )

    return _submit(request, incident, "whys", form, work, key="chain-add")


@require_POST
@login_required
def why_step_add(request: HttpRequest, code: str, wcode: str) -> HttpResponse:
    incident = _incident(request, code)
    chain = selectors.why_chain_get(incident=incident, code=wcode)
    form = inv_forms.WhyStepForm(request.POST)

    def work() -> None:
        data = form.cleaned_data
        services.why_step_add(
            chain=chain,
            actor=request.user,
            why=data["why"],
            answer=data["answer"],
            evidence=data["evidence"],
        )

    return _submit(request, incident, "whys", form, work, key=f"step-add-{chain.code}")


@require_POST
@login_required
def why_step_change(request: HttpRequest, code: str, wcode: str, step_id: int) -> HttpResponse:
    """Edit (or confirm) a level, or remove it (``action=remove``)."""
    incident = _incident(request, code)
    chain = selectors.why_chain_get(incident=incident, code=wcode)
    step = get_object_or_404(chain.steps, pk=step_id)
    form = inv_forms.WhyStepChangeForm(request.POST)

    def work() -> None:
        if form.removes:
            services.why_step_delete(step=step, actor=request.user)
        else:
            services.why_step_edit(
                step=step,
                actor=request.user,
                why=form.cleaned_data["why"],
                answer=form.cleaned_data["answer"],
            )

    return _submit(request, incident, "whys", form, work, key=f"step-{step.pk}")


@require_POST
@login_required
def factor_change(request: HttpRequest, code: str, factor_id: int) -> HttpResponse:
    """Edit a contributing factor, or remove it (``action=remove``)."""
    incident = _incident(request, code)
    factor = get_object_or_404(incident.contributing_factors, pk=factor_id)
    form = inv_forms.FactorChangeForm(request.POST)

    def work() -> None:
        if form.removes:
            services.contributing_factor_delete(factor=factor, actor=request.user)
        else:
            services.contributing_factor_edit(
                factor=factor, actor=request.user, text=form.cleaned_data["text"]
            )

    return _submit(request, incident, "whys", form, work, key=f"factor-{factor.pk}")


@require_POST
@login_required
def why_chain_choose(request: HttpRequest, code: str, wcode: str) -> HttpResponse:
    incident = _incident(request, code)
    chain = selectors.why_chain_get(incident=incident, code=wcode)
    return _act(
        request,
        incident,
        "whys",
        lambda: services.why_chain_choose(chain=chain, actor=request.user),
    )


@require_POST
@login_required
def factor_add(request: HttpRequest, code: str) -> HttpResponse:
    incident = _incident(request, code)
    form = inv_forms.FactorForm(request.POST)

    def work() -> None:
        services.contributing_factor_add(
            incident=incident, actor=request.user, text=form.cleaned_data["text"]
        )

    return _submit(request, incident, "whys", form, work, key="factor-add")


# ---------------------------------------------------------------- fixes


@require_POST
@login_required
def fix_add(request: HttpRequest, code: str) -> HttpResponse:
    incident = _incident(request, code)
    form = inv_forms.FixForm(request.POST)

    def work() -> None:
        data = form.cleaned_data
        services.fix_create(
            incident=incident,
            actor=request.user,
            kind=data["kind"],
            title=data["title"],
            detail=data["detail"],
            applied=data["applied"],
        )

    return _submit(request, incident, "fixes", form, work, key="fix-add")


@require_POST
@login_required
def fix_applied(request: HttpRequest, code: str, fcode: str) -> HttpResponse:
    incident = _incident(request, code)
    fix = selectors.fix_get(incident=incident, code=fcode)
    return _act(
        request, incident, "fixes", lambda: services.fix_mark_applied(fix=fix, actor=request.user)
    )


@require_POST
@login_required
def fix_verify(request: HttpRequest, code: str, fcode: str) -> HttpResponse:
    incident = _incident(request, code)
    fix = selectors.fix_get(incident=incident, code=fcode)
    form = inv_forms.FixVerifyForm(request.POST, incident=incident)

    def work() -> None:
        baseline, post = form.trials()
        data = form.cleaned_data
        services.fix_verify(
            fix=fix,
            actor=request.user,
            baseline=baseline,
            post_fix=post,
            tolerance=data["tolerance"],
            target=data["target"],
            problem_resolved=data["problem_resolved"],
        )

    return _submit(request, incident, "fixes", form, work, key=f"verify-{fix.code}")


# ---------------------------------------------------------------- action items


@require_POST
@login_required
def action_add(request: HttpRequest, code: str) -> HttpResponse:
    incident = _incident(request, code)
    form = inv_forms.ActionItemForm(request.POST, incident=incident)

    def work() -> None:
        data = form.cleaned_data
        services.action_item_create(
            incident=incident,
            actor=request.user,
            text=data["text"],
            kind=data["kind"],
            checklist=data["checklist"],
            owner=data["owner"],
            priority=data["priority"],
            due_date=data["due_date"],
        )

    return _submit(request, incident, "actions", form, work, key="action-add")


@require_POST
@login_required
def actions_seed(request: HttpRequest, code: str) -> HttpResponse:
    incident = _incident(request, code)
    form = inv_forms.ActionSeedForm(request.POST)

    def work() -> None:
        services.action_items_seed(
            incident=incident, actor=request.user, checklist=form.cleaned_data["checklist"]
        )

    return _submit(request, incident, "actions", form, work, key="seed")


@require_POST
@login_required
def action_update(request: HttpRequest, code: str, acode: str) -> HttpResponse:
    incident = _incident(request, code)
    item = selectors.action_item_get(incident=incident, code=acode)
    form = inv_forms.ActionUpdateForm(request.POST, incident=incident)

    def work() -> None:
        services.action_item_update(item=item, actor=request.user, **form.changes())

    return _submit(request, incident, "actions", form, work, key=f"action-{item.code}")


# ---------------------------------------------------------------- charts


@require_GET
@login_required
def incident_charts(request: HttpRequest, code: str) -> HttpResponse:
    """The charts section (loaded after the first screen, so the page is fast at 3 AM)."""
    incident = _incident(request, code)
    doc = selectors.analysis_document(incident=incident)
    table = selectors.incident_metrics_table(incident=incident)
    figures = charts.incident_figures(doc, table)
    template = "investigation/charts.html#charts" if request.htmx else "investigation/charts.html"
    return render(request, template, {"incident": incident, "figures": figures})
