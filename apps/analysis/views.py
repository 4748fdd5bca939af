from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from apps.analysis import selectors, services
from apps.analysis.models import Trigger
from apps.incidents.selectors import incident_get_for_user


def _page_events(seen: str, panel: selectors.AnalysisPanel) -> list[str]:
    """What the rest of the incident page must refresh, given what it last saw.

    ``seen`` is the fingerprint the page was rendered with (files.parsed.run:status).
    Files added by any path (browser, API, CLI) change the first number; a run that
    finished with a document changes the last part.
    """
    events = []
    old = seen.split(".", 2)
    new = panel.fingerprint.split(".", 2)
    if len(old) != 3 or old[:2] != new[:2]:
        events.append("artifacts-changed")
    if (len(old) != 3 or old[2] != new[2]) and panel.document is not None and not panel.active:
        events.append("rankscope:analysed")
    return events


def _render_panel(request: HttpRequest, incident, *, notice: str = "") -> HttpResponse:
    panel = selectors.analysis_panel_for_incident(incident=incident)
    # On the incident page the panel is a status line: the verdict and the findings are
    # shown once, on the first screen and in the phases.
    compact = bool(request.GET.get("poll"))
    context = {"incident": incident, "panel": panel, "notice": notice, "compact": compact}
    if request.htmx:
        seen = request.GET.get("seen", "")
        if seen and seen == panel.fingerprint and not notice:
            return HttpResponse(status=204)  # nothing moved; htmx swaps nothing
        response = render(request, "analysis/panel.html#panel", context)
        # `since`: the first load, with what the page was rendered with (always answered).
        seen = seen or request.GET.get("since", "")
        events = _page_events(seen, panel) if seen else []
        if events:
            response["HX-Trigger-After-Swap"] = ", ".join(events)
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
