"""Upload, the artifact list of an incident, and the evidence viewer."""

from __future__ import annotations

from urllib.parse import unquote

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET, require_POST

from apps.incidents.selectors import incident_get_for_user
from apps.ingest import selectors, services
from apps.ingest.forms import UploadForm
from apps.ingest.models import ACTIVE_STATUSES
from apps.ingest.uploads import SizeLimitUploadHandler
from rankscope.archives import human_size

# Multipart framing around one file: a request this much over the limit holds more.
MULTIPART_SLACK = 64 * 1024
VIEW_LINES = 200
CONTEXT_LINES = 20


def _wants_json(request: HttpRequest) -> bool:
    return "application/json" in request.headers.get("Accept", "")


@csrf_exempt  # the upload handler must be installed before CSRF reads the body...
@require_POST
@login_required
def artifact_upload(request: HttpRequest, code: str) -> HttpResponse:
    incident = incident_get_for_user(user=request.user, code=code)  # 404 before any byte moves
    limit = settings.RANKSCOPE_MAX_FILE_BYTES
    declared = int(request.META.get("CONTENT_LENGTH") or 0)
    if request.headers.get("X-Rankscope-Single-File") == "1" and declared > limit + MULTIPART_SLACK:
        name = unquote(request.headers.get("X-Rankscope-File-Name", ""))[:500]
        return _too_large(request, incident, [services.sanitize_name(name)])
    handler = SizeLimitUploadHandler(request, limit)
    request.upload_handlers.insert(0, handler)
    return _upload(request, incident=incident, handler=handler)


@csrf_protect  # ...and is checked here, once the handlers are in place
def _upload(request: HttpRequest, *, incident, handler: SizeLimitUploadHandler) -> HttpResponse:
    form = UploadForm(request.POST, request.FILES)
    files = form.cleaned_data["files"] if form.is_valid() else []
    if handler.oversized and not files:
        return _too_large(request, incident, handler.oversized)
    outcomes: list[services.UploadOutcome] = []
    for name in handler.oversized:
        outcomes.append(
            services.UploadOutcome(
                name,
                "rejected",
                None,
                f"over the {human_size(handler.limit)} per-file limit; not stored",
            )
        )
    if not files and not outcomes:
        status = 400
        if _wants_json(request):
            return JsonResponse({"error": "Choose at least one file to upload."}, status=status)
        return render(
            request,
            "ingest/upload_result.html",
            {"incident": incident, "error": "Choose at least one file to upload."},
            status=status,
        )
    for f in files:
        try:
            outcomes += services.artifact_upload(
                incident=incident, fileobj=f, name=f.name, actor=request.user, source="web"
            )
        finally:
            f.close()
    if _wants_json(request):
        return JsonResponse({"outcomes": [o.to_json() for o in outcomes]})
    return render(
        request, "ingest/upload_result.html", {"incident": incident, "outcomes": outcomes}
    )


def _too_large(request: HttpRequest, incident, names: list[str]) -> HttpResponse:
    limit = human_size(settings.RANKSCOPE_MAX_FILE_BYTES)
    message = f"over the {limit} per-file limit; not stored"
    if _wants_json(request):
        return JsonResponse(
            {"outcomes": [{"name": n, "status": "rejected", "message": message} for n in names]},
            status=413,
        )
    outcomes = [services.UploadOutcome(n or "upload", "rejected", None, message) for n in names]
    return render(
        request,
        "ingest/upload_result.html",
        {"incident": incident, "outcomes": outcomes},
        status=413,
    )


@require_GET
@login_required
def artifact_list(request: HttpRequest, code: str) -> HttpResponse:
    incident = incident_get_for_user(user=request.user, code=code)
    artifacts = list(selectors.artifact_list_for_incident(incident=incident))
    counts = selectors.incident_parse_counts(incident=incident)
    active = any(a.parse_status in ACTIVE_STATUSES for a in artifacts)
    context = {
        "incident": incident,
        "artifacts": artifacts,
        "counts": counts,
        "active": active,
        "stored": sum(1 for a in artifacts if a.parse_status != "rejected"),
        "embedded": bool(request.htmx),
    }
    if request.htmx:
        # 286 tells htmx to stop polling once nothing is left to parse.
        status = 200 if active else 286
        return render(request, "ingest/artifact_list.html#table", context, status=status)
    return render(request, "ingest/artifact_list.html", context)


@require_GET
@login_required
def artifact_view(request: HttpRequest, code: str, artifact_code: str) -> HttpResponse:
    artifact = selectors.artifact_get_for_user(
        user=request.user, incident_code=code, artifact_code=artifact_code
    )
    line = _int(request.GET.get("line"))
    start = _int(request.GET.get("start"))
    rank_text = (request.GET.get("rank") or "").strip()
    rank = int(rank_text) if rank_text.isdigit() and len(rank_text) <= 6 else None
    if start is None:
        start = max(1, line - CONTEXT_LINES) if line and rank is None else 1
    page = None
    if artifact.storage_key:
        page = selectors.artifact_lines(
            artifact=artifact, start=start, count=VIEW_LINES, highlight=line, rank=rank
        )
    context = {
        "incident": artifact.incident,
        "artifact": artifact,
        "page": page,
        "line": line,
        "prev_start": max(1, start - VIEW_LINES) if start > 1 else None,
        "next_start": page.end + 1 if page and page.has_more else None,
        "rank": rank,
        "rank_error": rank_text if rank_text and rank is None else "",
        "file_ranks": len(artifact.ranks or []),
        "digests": artifact.rank_digests.all()[:64],
    }
    if request.htmx and request.htmx.target == "evidence-lines":
        return render(request, "ingest/artifact_view.html#lines", context)
    return render(request, "ingest/artifact_view.html", context)


def _int(value: str | None) -> int | None:
    try:
        n = int(value) if value else None
    except ValueError:
        return None
    return n if n and n > 0 else None
