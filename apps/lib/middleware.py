"""Middleware shared by every app."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse

log = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5
MESSAGE = (
    "The database is unavailable or the connection to it dropped. Nothing was half-saved: "
    "try again in a few seconds."
)
_PAGE = (
    "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
    "<title>Database unavailable · Rankscope</title></head><body>"
    "<h1>Database unavailable</h1><p>{message}</p></body></html>"
)


class DatabaseUnavailableMiddleware:
    """A dropped or refused database connection answers 503 with a clear message.

    Not a traceback and not a bare 500: the client (a person, or the SLURM epilog, which
    retries on 503) is told to try again. Writes are one transaction each, so nothing is
    left half-written; Django closes the broken connection when the request ends and the
    next request reconnects. The page is built without templates or the session, which
    would need the database again.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, OperationalError | InterfaceError):
            return None
        log.error("database unavailable during %s %s: %s", request.method, request.path, exception)
        wants_json = request.path.startswith("/api/") or "application/json" in request.headers.get(
            "Accept", ""
        )
        if wants_json:
            response: HttpResponse = JsonResponse(
                {"detail": MESSAGE, "code": "database_unavailable"}, status=503
            )
        else:
            response = HttpResponse(_PAGE.format(message=MESSAGE), status=503)
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
