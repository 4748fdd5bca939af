"""Investigation writes from the incident page.

Every POST works as a plain form (redirect back to the incident page at the section's
anchor) and as an htmx request (the section partial is re-rendered in place). Access:
``incident_get_for_user`` (404 for outsiders), then records are looked up inside
that incident.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from apps.incidents.models import Incident
from apps.incidents.selectors import incident_get_for_user
from apps.investigation import charts, protocol, selectors, services
from apps.investigation.models import ActionStatus, HypothesisStatus, Priority
from apps.investigation.verification import parse_trials
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


def _fail(request: HttpRequest, incident: Incident, section: str, exc: Exception) -> HttpResponse:
    if request.htmx:
        ctx = section_context(incident=incident)
        ctx["error"] = str(exc)
        ctx["posted"] = request.POST
        # 409 when someone else changed the record first (a lost compare-and-set).
        status = 409 if isinstance(exc, services.ConflictError) else 422
        return render(request, f"investigation/sections.html#{section}", ctx, status=status)
    messages.error(request, str(exc))
    return redirect(reverse("incidents:detail", args=[incident.code]) + f"#{SECTIONS[section]}")


def _incident(request: HttpRequest, code: str) -> Incident:
    return incident_get_for_user(user=request.user, code=code)


def _act(
    request: HttpRequest, code: str, section: str, work: Callable[[Incident], object]
) -> HttpResponse:
    """Load the incident for this user (404 for outsiders, before anything is read from
    the form), run `work` on it, answer with the section (htmx) or a redirect; an
    InvestigationError is shown in the section with status 422 (409 for a ConflictError)."""
    incident = _incident(request, code)
    try:
        work(incident)
    except services.InvestigationError as exc:
        return _fail(request, incident, section, exc)
    return _respond(request, incident, section)


def _text(request: HttpRequest, name: str, limit: int = 10000) -> str:
    return (request.POST.get(name) or "")[:limit]


# ---------------------------------------------------------------- hypotheses


@require_POST
@login_required
def hypothesis_add(request: HttpRequest, code: str) -> HttpResponse:
    def work(incident: Incident) -> None:
        services.hypothesis_create(
            incident=incident,
            actor=request.user,
            title=_text(request, "title", 300),
            description=_text(request, "description"),
            expected_if_true=_text(request, "expected_if_true"),
            test_plan=_text(request, "test_plan"),
            evidence=services.evidence_parse(_text(request, "evidence")),
        )

    return _act(request, code, "hypotheses", work)


@require_POST
@login_required
def hypothesis_edit(request: HttpRequest, code: str, hcode: str) -> HttpResponse:
    def work(incident: Incident) -> None:
        h = selectors.hypothesis_get(incident=incident, code=hcode)
        fields = {
            name: _text(request, name)
            for name in ("title", "description", "expected_if_true", "test_plan")
            if name in request.POST
        }
        services.hypothesis_update(hypothesis=h, actor=request.user, **fields)

    return _act(request, code, "hypotheses", work)


@require_POST
@login_required
def hypothesis_test(request: HttpRequest, code: str, hcode: str) -> HttpResponse:
    def work(incident: Incident) -> None:
        h = selectors.hypothesis_get(incident=incident, code=hcode)
        services.hypothesis_record_test(
            hypothesis=h,
            actor=request.user,
            status=_text(request, "status", 20),
            test_plan=_text(request, "test_plan"),
            test_result=_text(request, "test_result"),
            evidence=services.evidence_parse(_text(request, "evidence")),
        )

    return _act(request, code, "hypotheses", work)


# ---------------------------------------------------------------- proposals

_PROPOSAL_SECTION = {
    "hypotheses": "hypotheses",
    "five_whys": "whys",
    "fixes": "fixes",
    "prevention": "actions",
}


@require_POST
@login_required
def proposal_accept(request: HttpRequest, code: str, kind: str, pid: str) -> HttpResponse:
    section = _PROPOSAL_SECTION.get(kind, "hypotheses")

    def work(incident: Incident) -> None:
        services.proposal_accept(
            incident=incident,
            actor=request.user,
            kind=kind,
            proposal_id=pid,
            doc=selectors.analysis_document(incident=incident),
        )

    return _act(request, code, section, work)


@require_POST
@login_required
def proposal_dismiss(request: HttpRequest, code: str, kind: str, pid: str) -> HttpResponse:
    section = _PROPOSAL_SECTION.get(kind, "hypotheses")

    def work(incident: Incident) -> None:
        services.proposal_dismiss(
            incident=incident, actor=request.user, kind=kind, proposal_id=pid[:120]
        )

    return _act(request, code, section, work)


# ---------------------------------------------------------------- five whys


@require_POST
@login_required
def why_chain_add(request: HttpRequest, code: str) -> HttpResponse:
    def work(incident: Incident) -> None:
        levels = []
        if _text(request, "why").strip() or _text(request, "answer").strip():
            levels.append(
                {
                    "why": _text(request, "why"),
                    "answer": _text(request, "answer"),
                    "evidence": services.evidence_parse(_text(request, "evidence")),
                }
            )
        services.why_chain_create(
            incident=incident, actor=request.user, title=_text(request, "title", 300), levels=levels
        )

    return _act(request, code, "whys", work)


@require_POST
@login_required
def why_step_add(request: HttpRequest, code: str, wcode: str) -> HttpResponse:
    def work(incident: Incident) -> None:
        chain = selectors.why_chain_get(incident=incident, code=wcode)
        services.why_step_add(
            chain=chain,
            actor=request.user,
            why=_text(request, "why"),
            answer=_text(request, "answer"),
            evidence=services.evidence_parse(_text(request, "evidence")),
        )

    return _act(request, code, "whys", work)


@require_POST
@login_required
def why_step_change(request: HttpRequest, code: str, wcode: str, step_id: int) -> HttpResponse:
    """Edit (or confirm) a level, or remove it (``action=remove``)."""

    def work(incident: Incident) -> None:
        chain = selectors.why_chain_get(incident=incident, code=wcode)
        step = get_object_or_404(chain.steps, pk=step_id)
        if request.POST.get("action") == "remove":
            services.why_step_delete(step=step, actor=request.user)
        else:
            services.why_step_edit(
                step=step,
                actor=request.user,
                why=_text(request, "why"),
                answer=_text(request, "answer"),
            )

    return _act(request, code, "whys", work)


@require_POST
@login_required
def factor_change(request: HttpRequest, code: str, factor_id: int) -> HttpResponse:
    """Edit a contributing factor, or remove it (``action=remove``)."""

    def work(incident: Incident) -> None:
        factor = get_object_or_404(incident.contributing_factors, pk=factor_id)
        if request.POST.get("action") == "remove":
            services.contributing_factor_delete(factor=factor, actor=request.user)
        else:
            services.contributing_factor_edit(
                factor=factor, actor=request.user, text=_text(request, "text", 2000)
            )

    return _act(request, code, "whys", work)


@require_POST
@login_required
def why_chain_choose(request: HttpRequest, code: str, wcode: str) -> HttpResponse:
    def work(incident: Incident) -> None:
        chain = selectors.why_chain_get(incident=incident, code=wcode)
        services.why_chain_choose(chain=chain, actor=request.user)

    return _act(request, code, "whys", work)


@require_POST
@login_required
def factor_add(request: HttpRequest, code: str) -> HttpResponse:
    def work(incident: Incident) -> None:
        services.contributing_factor_add(
            incident=incident, actor=request.user, text=_text(request, "text", 2000)
        )

    return _act(request, code, "whys", work)


# ---------------------------------------------------------------- fixes


@require_POST
@login_required
def fix_add(request: HttpRequest, code: str) -> HttpResponse:
    def work(incident: Incident) -> None:
        services.fix_create(
            incident=incident,
            actor=request.user,
            kind=_text(request, "kind", 20) or "immediate",
            title=_text(request, "title", 300),
            detail=_text(request, "detail"),
            applied=request.POST.get("applied") == "1",
        )

    return _act(request, code, "fixes", work)


@require_POST
@login_required
def fix_applied(request: HttpRequest, code: str, fcode: str) -> HttpResponse:
    def work(incident: Incident) -> None:
        fix = selectors.fix_get(incident=incident, code=fcode)
        services.fix_mark_applied(fix=fix, actor=request.user)

    return _act(request, code, "fixes", work)


def _trials_from_artifacts(incident: Incident, codes: list[str]) -> dict[str, list[float]]:
    tables = {a.code: t for a, t in selectors.incident_metrics_tables(incident=incident)}
    out: dict[str, list[float]] = {}
    for c in codes:
        if c not in tables:
            raise services.InvestigationError("That metrics file is not part of this incident.")
        for name, value in selectors.metrics_trial_summary(table=tables[c]).items():
            out.setdefault(name, []).append(value)
    return out


@require_POST
@login_required
def fix_verify(request: HttpRequest, code: str, fcode: str) -> HttpResponse:
    def work(incident: Incident) -> None:
        fix = selectors.fix_get(incident=incident, code=fcode)
        try:
            tolerance = float(request.POST.get("tolerance") or 5) / 100
        except ValueError:
            raise services.InvestigationError("Tolerance is a percentage, e.g. 5.") from None
        base_files = request.POST.getlist("baseline_files")
        post_files = request.POST.getlist("post_files")
        try:
            baseline = parse_trials(_text(request, "baseline"))
            post = parse_trials(_text(request, "post_fix"))
        except ValueError as exc:
            raise services.InvestigationError(f"Could not read the numbers: {exc}") from None
        for name, values in _trials_from_artifacts(incident, base_files).items():
            baseline.setdefault(name, []).extend(values)
        for name, values in _trials_from_artifacts(incident, post_files).items():
            post.setdefault(name, []).extend(values)
        resolved = {"yes": True, "no": False}.get(request.POST.get("problem_resolved", ""))
        services.fix_verify(
            fix=fix,
            actor=request.user,
            baseline=baseline,
            post_fix=post,
            tolerance=tolerance,
            target=_text(request, "target", 60).strip(),
            problem_resolved=resolved,
        )

    return _act(request, code, "fixes", work)


# ---------------------------------------------------------------- action items


def _date(value: str) -> dt.date | None:
    if not value:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise services.InvestigationError("Due date must be a date (YYYY-MM-DD).") from None


def _owner(incident: Incident, username: str) -> Any:
    if not username:
        return None
    user = get_user_model().objects.filter(username=username, teams=incident.team).first()
    if user is None:
        raise services.InvestigationError("The owner must be a member of the incident's team.")
    return user


@require_POST
@login_required
def action_add(request: HttpRequest, code: str) -> HttpResponse:
    def work(incident: Incident) -> None:
        services.action_item_create(
            incident=incident,
            actor=request.user,
            text=_text(request, "text", 2000),
            kind=_text(request, "kind", 20) or "prevention",
            checklist=_text(request, "checklist", 20),
            owner=_owner(incident, _text(request, "owner", 150)),
            priority=_text(request, "priority", 4) or "p2",
            due_date=_date(_text(request, "due_date", 20)),
        )

    return _act(request, code, "actions", work)


@require_POST
@login_required
def actions_seed(request: HttpRequest, code: str) -> HttpResponse:
    def work(incident: Incident) -> None:
        services.action_items_seed(
            incident=incident, actor=request.user, checklist=_text(request, "checklist", 20)
        )

    return _act(request, code, "actions", work)


@require_POST
@login_required
def action_update(request: HttpRequest, code: str, acode: str) -> HttpResponse:
    def work(incident: Incident) -> None:
        item = selectors.action_item_get(incident=incident, code=acode)
        services.action_item_update(
            item=item,
            actor=request.user,
            status=request.POST.get("status") or None,
            owner=_owner(incident, _text(request, "owner", 150))
            if "owner" in request.POST
            else False,
            due_date=_date(_text(request, "due_date", 20)) if "due_date" in request.POST else False,
            priority=request.POST.get("priority") or None,
        )

    return _act(request, code, "actions", work)


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
