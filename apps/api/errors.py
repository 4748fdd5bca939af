"""Every API error is JSON: ``{"detail": …, "code": …}`` (validation errors: per field).

DRF answers its own exceptions in JSON; this adds the ones Django raises while reading a
request (too many files or fields, a body over the limit, a body that ended early or
stalled) and the pages Django would otherwise render in HTML (404 for an unknown API path,
500 for a bug), so a client such as the SLURM epilog never has to parse an HTML page.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import (
    RequestDataTooBig,
    SuspiciousOperation,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.request import UnreadablePostError
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from apps.api.parsers import BodyIncomplete, PayloadTooLarge

log = logging.getLogger(__name__)

API_PREFIX = "/api/"


def translate(exc: BaseException) -> BaseException:
    """Django's request-reading exceptions as the API exceptions that describe them."""
    if isinstance(exc, TooManyFilesSent):
        return exceptions.ParseError(
            "Too many files in one request: send them in several requests or as one .tar.gz.",
            code="too_many_files",
        )
    if isinstance(exc, TooManyFieldsSent):
        return exceptions.ParseError(
            "Too many form fields or query parameters in one request.", code="too_many_fields"
        )
    if isinstance(exc, RequestDataTooBig):
        return PayloadTooLarge("The request body is larger than this server accepts.")
    if isinstance(exc, UnreadablePostError):
        return BodyIncomplete(
            f"The request body could not be read in full ({exc}): nothing was stored."
        )
    if isinstance(exc, SuspiciousOperation):
        return exceptions.ParseError("The request was refused as malformed.", code="bad_request")
    return exc


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, after ``translate``; every response carries a ``code``."""
    exc = translate(exc)  # type: ignore[assignment]
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(response.data, dict) and "detail" in response.data:
        response.data.setdefault("code", getattr(exc, "default_code", "error"))
        detail = getattr(exc, "detail", None)
        if isinstance(detail, exceptions.ErrorDetail) and detail.code:
            response.data["code"] = detail.code
    return response


def _json(request: HttpRequest, status_code: int, detail: str, code: str) -> JsonResponse:
    return JsonResponse({"detail": detail, "code": code}, status=status_code)


def is_api(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX)


class ApiJsonErrorsMiddleware:
    """Outside DRF's views (an unknown path, an exception escaping a view): JSON too."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest):
        response = self.get_response(request)
        if (
            is_api(request)
            and response.status_code in (400, 403, 404, 405, 413, 500)
            and not response.get("Content-Type", "").startswith("application/json")
            and not getattr(response, "streaming", False)
        ):
            detail = {
                400: ("Bad request.", "bad_request"),
                403: ("Forbidden.", "permission_denied"),
                404: ("No such API endpoint.", "not_found"),
                405: ("Method not allowed.", "method_not_allowed"),
                413: ("The request body is larger than this server accepts.", "too_large"),
                500: ("Internal error; it has been logged.", "server_error"),
            }[response.status_code]
            return _json(request, response.status_code, *detail)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception):
        if not is_api(request):
            if isinstance(exception, UnreadablePostError):
                # A page's upload cut short or stalled: the client is usually gone; say so
                # plainly rather than log a server error. Nothing was stored.
                log.warning("%s %s: %s", request.method, request.path, exception)
                return HttpResponse(
                    "The upload was incomplete: nothing was stored. Send it again.",
                    status=400,
                    content_type="text/plain; charset=utf-8",
                )
            return None
        translated = translate(exception)
        if isinstance(translated, exceptions.APIException):
            log.warning("%s %s: %s", request.method, request.path, translated.detail)
            codes = translated.get_codes()
            return _json(
                request,
                translated.status_code,
                str(translated.detail),
                codes if isinstance(codes, str) else translated.default_code,
            )
        return None  # the database middleware (503) or Django's 500, made JSON above
