from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseStopPolling

from apps.analysis import selectors, services
from apps.analysis.models import Trigger
from apps.incidents.selectors import incident_get_for_user


def _render_panel(request: HttpRequest, incident, *, notice: str = "") -> HttpResponse:
    panel = selectors.analysis_panel_for_incident(incident=incident)
    context = {"incident": incident, "panel": panel, "notice": notice}
    if request.htmx:
        response = render(request, "analysis/panel.html#panel", context)
        if request.GET.get("poll") and not panel.active:
            # The poll is over: htmx swaps this last answer in and stops polling on 286.
            response.status_code = HttpResponseStopPolling.status_code
        return response
    return render(request, "analysis/panel.html", context)


@require_GET
@login_required
def analysis_panel(request: HttpRequest, code: str) -> HttpResponse:
    incident = incident_get_for_user(user=request.user, code=code)
    return _render_panel(request, incident)


@require_POST
@login_required
def analysis_rerun(request: HttpRequest, code: str) -> HttpResponse:
    incident = incident_get_for_user(user=request.user, code=code)
    run = services.analysis_request(incident=incident, trigger=Trigger.MANUAL, actor=request.user)
    notice = (
        ""
        if run is not None
        else "Nothing to analyse yet: no files, or some are still being parsed."
    )
    if request.htmx:
        return _render_panel(request, incident, notice=notice)
    if notice:
        messages.info(request, notice)
    return redirect("analysis:panel", code=incident.code)


@require_GET
@login_required
def analysis_triage_json(request: HttpRequest, code: str) -> JsonResponse:
    incident = incident_get_for_user(user=request.user, code=code)
    document = selectors.analysis_document_for_incident(incident=incident)
    if document is None:
        raise Http404("No analysis yet")
    return JsonResponse(document, json_dumps_params={"ensure_ascii": False})
