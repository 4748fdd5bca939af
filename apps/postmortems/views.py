from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from apps.accounts.selectors import user_is_team_lead
from apps.incidents.selectors import incident_get_for_user
from apps.lib.posts import change_from_form
from apps.postmortems import selectors, services
from apps.postmortems.cost import FORMULA_LINES, INPUT_LABELS, CostInputError
from apps.postmortems.forms import (
    CommentForm,
    CostForm,
    PostMortemFilterForm,
    PostMortemForm,
    StatusChangeForm,
)
from apps.postmortems.models import SECTIONS, STATUS_TRANSITIONS, PostMortem, Status
from apps.postmortems.snapshot import MARKERS


@require_GET
@login_required
def postmortem_list(request: HttpRequest) -> HttpResponse:
    form = PostMortemFilterForm(
        request.GET or None,
        categories=selectors.postmortem_categories_for_user(user=request.user),
        clusters=selectors.postmortem_clusters_for_user(user=request.user),
    )
    filters = form.cleaned_data if form.is_valid() else {}
    qs = selectors.postmortem_list_for_user(
        user=request.user, **{k: v for k, v in filters.items() if v not in (None, "")}
    )
    page = Paginator(qs, 25).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = {"form": form, "page": page, "query": query.urlencode()}
    template = "postmortems/list.html"
    if request.htmx and request.htmx.target == "postmortem-results":
        template = "postmortems/list.html#results"
    return render(request, template, context)


def _cost_context(pm: PostMortem, form: CostForm | None = None) -> dict[str, Any]:
    cost, cost_error = services.postmortem_cost(postmortem=pm)
    if form is None:
        form = CostForm(initial=pm.cost_inputs)
    sources = services.cost_sources(postmortem=pm)
    return {
        "postmortem": pm,
        "cost": cost,
        "cost_error": cost_error,
        "cost_form": form,
        "cost_sources": sources,
        "waste_source": sources.get("waste_fraction", ""),
        "missing_labels": [
            {n: label for n, label, _ in INPUT_LABELS}.get(m, m)
            for m in (cost.missing if cost else [])
        ],
        "show_undetected": services.cost_shows_undetected(postmortem=pm),
        "comments_by_section": {
            "cost": list(pm.comments.filter(section="cost").select_related("author"))
        },
        "formula_lines": FORMULA_LINES,
        "input_rows": [
            (label, unit, (pm.cost_inputs or {}).get(name)) for name, label, unit in INPUT_LABELS
        ],
    }


def _detail_context(
    request: HttpRequest, pm: PostMortem, *, cost_form: CostForm | None = None
) -> dict[str, Any]:
    ctx = services.postmortem_context(postmortem=pm)
    comments = list(pm.comments.select_related("author"))
    by_section: dict[str, list[Any]] = {}
    for comment in comments:
        by_section.setdefault(comment.section, []).append(comment)
    is_lead = user_is_team_lead(user=request.user, team=pm.team)
    allowed = STATUS_TRANSITIONS.get(pm.status, set())
    actions = [
        (target, label, target not in {Status.APPROVED, Status.PUBLISHED} or is_lead)
        for target, label in [
            (
                Status.IN_REVIEW,
                "Submit for review" if pm.status == Status.DRAFT else "Reopen review",
            ),
            (Status.DRAFT, "Send back to draft"),
            (Status.APPROVED, "Approve"),
            (Status.PUBLISHED, "Publish"),
        ]
        if target in allowed
    ]
    ctx.update(_cost_context(pm, cost_form))
    ctx.update(
        {
            "snap": pm.snapshot or {},
            "incident": pm.incident,
            "edit_form": PostMortemForm(instance=pm),
            "comment_form": CommentForm(),
            "status_form": StatusChangeForm(),
            "comments_by_section": by_section,
            "comment_count": len(comments),
            "sections": SECTIONS,
            "actions": actions,
            "is_lead": is_lead,
            "markers": MARKERS,
            "phase_total": sum(p["seconds"] for p in ctx["phases"]),
            "missing": (
                services.postmortem_missing(postmortem=pm) if pm.status != Status.PUBLISHED else []
            ),
        }
    )
    return ctx


def _page(
    request: HttpRequest,
    pm: PostMortem,
    *,
    status: int = 200,
    cost_form: CostForm | None = None,
    **forms: Any,
) -> HttpResponse:
    """The post-mortem page; a refused POST passes its bound form, shown with its errors."""
    ctx = _detail_context(request, pm, cost_form=cost_form)
    ctx.update(forms)
    return render(request, "postmortems/detail.html", ctx, status=status)


@require_GET
@login_required
def postmortem_detail(request: HttpRequest, code: str) -> HttpResponse:
    pm = selectors.postmortem_get_for_user(user=request.user, code=code)
    return _page(request, pm)


@require_POST
@login_required
def postmortem_edit(request: HttpRequest, code: str) -> HttpResponse:
    pm = selectors.postmortem_get_for_user(user=request.user, code=code)
    form = PostMortemForm(request.POST, instance=PostMortem.objects.get(pk=pm.pk))
    if not form.is_valid():
        return _page(request, pm, edit_form=form, status=422)
    try:
        services.postmortem_update(
            postmortem=pm,
            actor=request.user,
            expected_revision=form.cleaned_data["expected_revision"],
            phase_key_actions=form.phase_key_actions(),
            **form.narrative(),
        )
    except services.ReviewError as exc:
        # The text stays in the form (someone else may have saved first: nothing is lost).
        form.add_error(None, str(exc))
        return _page(request, pm, edit_form=form, status=409)
    messages.success(request, "Saved; the previous text is kept as a revision.")
    return redirect("postmortems:detail", code=pm.code)


@require_POST
@login_required
def postmortem_cost(request: HttpRequest, code: str) -> HttpResponse:
    pm = selectors.postmortem_get_for_user(user=request.user, code=code)
    form = CostForm(request.POST)
    status = 200
    if form.is_valid():
        try:
            pm = services.postmortem_cost_update(
                postmortem=pm, actor=request.user, inputs=form.inputs()
            )
            form = None
        except CostInputError as exc:
            form.add_error(None, str(exc))
            status = 422
    else:
        status = 422
    if request.htmx:
        return render(
            request, "postmortems/detail.html#cost", _cost_context(pm, form), status=status
        )
    if form is not None:
        return _page(request, pm, cost_form=form, status=status)
    return redirect(f"{pm.get_absolute_url()}#cost")


@require_POST
@login_required
def postmortem_status(request: HttpRequest, code: str) -> HttpResponse:
    pm = selectors.postmortem_get_for_user(user=request.user, code=code)
    return change_from_form(
        request,
        StatusChangeForm(request.POST),
        refuse=lambda form: _page(request, pm, status_form=form, status=422),
        change=lambda data: services.postmortem_transition(
            postmortem=pm, to_status=data["status"], actor=request.user, note=data["note"]
        ),
        refused_by=services.ReviewError,
        then=lambda: redirect("postmortems:detail", code=pm.code),
    )


@require_POST
@login_required
def postmortem_resnapshot(request: HttpRequest, code: str) -> HttpResponse:
    """Take the snapshot again: Five Whys, factors and fixes edited since the draft."""
    pm = selectors.postmortem_get_for_user(user=request.user, code=code)
    try:
        services.postmortem_snapshot_refresh(postmortem=pm, actor=request.user)
        messages.success(request, "Snapshot refreshed from the incident.")
    except services.ReviewError as exc:
        messages.error(request, str(exc))
    return redirect("postmortems:detail", code=pm.code)


@require_POST
@login_required
def postmortem_comment(request: HttpRequest, code: str) -> HttpResponse:
    pm = selectors.postmortem_get_for_user(user=request.user, code=code)
    form = CommentForm(request.POST)
    if form.is_valid():
        try:
            comment = services.postmortem_comment_add(
                postmortem=pm,
                actor=request.user,
                section=form.cleaned_data["section"],
                body=form.cleaned_data["body"],
            )
            return redirect(f"{pm.get_absolute_url()}#{comment.section}")
        except services.ReviewError as exc:
            form.add_error(None, str(exc))
    return _page(request, pm, comment_form=form, status=422)


@require_GET
@login_required
def postmortem_markdown(request: HttpRequest, code: str) -> HttpResponse:
    pm = selectors.postmortem_get_for_user(user=request.user, code=code)
    text = services.postmortem_render_markdown(
        postmortem=pm, base_url=request.build_absolute_uri("/")
    )
    response = HttpResponse(text, content_type="text/markdown; charset=utf-8")
    if request.GET.get("inline") != "1":
        response["Content-Disposition"] = f'attachment; filename="postmortem-{pm.code}.md"'
    return response


# --- Incident-scoped: the panel on the incident page, and drafting ------------------


@require_GET
@login_required
def incident_panel(request: HttpRequest, code: str) -> HttpResponse:
    incident = incident_get_for_user(user=request.user, code=code)
    services.incident_signature_refresh(incident=incident)
    context = {
        "incident": incident,
        "postmortem": selectors.postmortem_latest_for_incident(incident=incident),
        "similar": selectors.similar_incidents(incident=incident),
    }
    template = "postmortems/incident_panel.html"
    if request.htmx:
        template = "postmortems/incident_panel.html#panel"
    return render(request, template, context)


@require_POST
@login_required
def incident_draft(request: HttpRequest, code: str) -> HttpResponse:
    incident = incident_get_for_user(user=request.user, code=code)
    pm = services.postmortem_draft_create(incident=incident, actor=request.user)
    if request.htmx:
        response = HttpResponse(status=204)
        response["HX-Redirect"] = pm.get_absolute_url()
        return response
    return redirect(pm.get_absolute_url())
