from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.accounts.selectors import team_list_for_user
from apps.incidents import selectors, services, signals
from apps.incidents.forms import IncidentFilterForm, IncidentForm, PhaseForm, StatusForm
from apps.incidents.models import Incident, Phase, Status
from apps.lib.posts import change_from_form


@require_GET
@login_required
def incident_list(request: HttpRequest) -> HttpResponse:
    form = IncidentFilterForm(
        request.GET or None, clusters=selectors.cluster_names_for_user(user=request.user)
    )
    filters = form.cleaned_data if form.is_valid() else {}
    qs = selectors.incident_list_for_user(
        user=request.user, **{k: v for k, v in filters.items() if v}
    )
    page = Paginator(qs, 25).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = {"form": form, "page": page, "query": query.urlencode()}
    template = "incidents/list.html"
    if request.htmx and request.htmx.target == "incident-results":
        template = "incidents/list.html#results"
    return render(request, template, context)


@require_http_methods(["GET", "POST"])
@login_required
def incident_create(request: HttpRequest) -> HttpResponse:
    teams = team_list_for_user(user=request.user)
    form = IncidentForm(request.POST or None, teams=teams)
    existing = None
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            incident = services.incident_create(
                actor=request.user,
                **{k: v for k, v in data.items() if v is not None and v != ""},
            )
        except ValidationError:
            # The form cannot see the one-incident-per-job constraint (run_key is not a
            # form field), so the service's check is the one that answers.
            existing = selectors.incident_for_job(
                team=data["team"], cluster=data.get("cluster", ""), job_id=data.get("job_id", "")
            )
            if existing is None:
                raise
            form.add_error(None, "An incident for this cluster and job id already exists.")
        else:
            messages.success(request, "Incident opened. Drop the logs and metrics in below.")
            return redirect("incidents:detail", code=incident.code)
    context = {"form": form, "has_team": teams.exists(), "existing": existing}
    return render(request, "incidents/create.html", context)


def incident_page_response(
    request: HttpRequest,
    incident: Incident,
    *,
    extra: dict[str, Any] | None = None,
    status: int = 200,
) -> HttpResponse:
    """The incident page; a refused POST renders it again with its errors in `extra`.

    The sections that belong to the apps above (the analysis verdict, the investigation
    steps) are added by their receivers of ``signals.incident_page_requested``.
    """
    context = {
        "incident": incident,
        "phases": selectors.incident_phase_durations(incident=incident),
        "events": incident.events.select_related("actor").order_by("-at", "-pk")[:50],
        "statuses": Status,
        "phase_choices": Phase.choices,
        "phase_form": PhaseForm(),
    }
    for _receiver, sections in signals.incident_page_requested.send(
        sender=Incident, incident=incident, request=request
    ):
        context.update(sections or {})
    context.update(extra or {})
    return render(request, "incidents/detail.html", context, status=status)


@require_GET
@login_required
def incident_detail(request: HttpRequest, code: str) -> HttpResponse:
    """The guided incident page: the first screen, then the five phases as steps."""
    incident = selectors.incident_get_for_user(user=request.user, code=code)
    return incident_page_response(request, incident)


@require_POST
@login_required
def incident_phase(request: HttpRequest, code: str) -> HttpResponse:
    incident = selectors.incident_get_for_user(user=request.user, code=code)
    return change_from_form(
        request,
        PhaseForm(request.POST),
        refuse=lambda form: incident_page_response(
            request, incident, extra={"phase_form": form}, status=422
        ),
        change=lambda data: services.incident_change_phase(
            incident=incident, to_phase=data["phase"], actor=request.user, note=data["note"]
        ),
        refused_by=services.TransitionError,
        then=lambda: redirect("incidents:detail", code=incident.code),
    )


@require_POST
@login_required
def incident_status(request: HttpRequest, code: str) -> HttpResponse:
    incident = selectors.incident_get_for_user(user=request.user, code=code)
    return change_from_form(
        request,
        StatusForm(request.POST),
        refuse=lambda form: incident_page_response(
            request, incident, extra={"status_form": form}, status=422
        ),
        change=lambda data: services.incident_change_status(
            incident=incident, to_status=data["status"], actor=request.user
        ),
        refused_by=services.TransitionError,
        then=lambda: redirect("incidents:detail", code=incident.code),
    )
