"""``Idempotency-Key`` for POSTs: a retried request gets the first answer back, not a second effect.

Answers are kept in the shared cache (Redis in production) for a day, keyed by who asked,
the path and the key. A second request with the same key while the first still runs gets
409, so a client retrying too eagerly cannot make two effects either. While the cache
is unreachable requests are served without this guarantee (see ``apps.lib.sharedcache``).

A key reused for a different request (another JSON body, another content type, length or
name of an upload) is refused with 409 instead of replaying an answer that was not its
own. An upload's body is streamed to storage, never read into memory here, so uploads are
told apart by their headers and length only (their content is deduplicated per incident
anyway).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.permissions import request_token
from apps.lib import sharedcache

KEEP_SECONDS = 24 * 3600
IN_FLIGHT_SECONDS = 600
HEADER = "HTTP_IDEMPOTENCY_KEY"
# JSON bodies up to this size are part of the request's fingerprint
_FINGERPRINT_BODY_BYTES = 1 << 20
_FINGERPRINT_META = (
    "REQUEST_METHOD",
    "CONTENT_TYPE",
    "CONTENT_LENGTH",
    "QUERY_STRING",
    "HTTP_CONTENT_ENCODING",
    "HTTP_X_FILENAME",
)


def _cache_key(request: Request, key: str) -> str:
    token = request_token(request)
    who = f"token:{token.prefix}" if token else f"user:{request.user.pk}"
    digest = hashlib.sha256(f"{who}\n{request.path}\n{key}".encode()).hexdigest()
    return f"idempotency:{digest}"


def _fingerprint(request: Request) -> str:
    """What makes two requests with one key the same request: the headers that shape the
    body and, for a small JSON body, the body itself."""
    meta = request.META
    h = hashlib.sha256("\n".join(str(meta.get(k, "")) for k in _FINGERPRINT_META).encode())
    try:
        length = int(meta.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if str(meta.get("CONTENT_TYPE", "")).startswith("application/json") and (
        0 < length <= _FINGERPRINT_BODY_BYTES
    ):
        h.update(b"\n" + request.body)
    return h.hexdigest()


def idempotent(handler: Callable[[Request], Response], request: Request) -> Response:
    """Run `handler(request)` at most once per Idempotency-Key (when the client sends one)."""
    key = request.META.get(HEADER, "")
    if not key:
        return handler(request)
    if len(key) > 255 or any(not " " <= ch <= "~" for ch in key):
        return Response(
            {"detail": "Idempotency-Key must be at most 255 printable ASCII characters."},
            status=status.HTTP_400_BAD_REQUEST,
        )
    cache_key = _cache_key(request, key)
    fingerprint = _fingerprint(request)
    stored: dict[str, Any] | None = sharedcache.get(cache_key)
    if stored is not None:
        if stored.get("fingerprint", fingerprint) != fingerprint:
            return Response(
                {
                    "detail": "This Idempotency-Key was already used for a different request; "
                    "use a new key for a new request."
                },
                status=status.HTTP_409_CONFLICT,
            )
        return Response(
            stored["body"], status=stored["status"], headers={"Idempotent-Replayed": "true"}
        )
    locked = sharedcache.add(cache_key + ":lock", 1, timeout=IN_FLIGHT_SECONDS)
    if locked is None:
        # The cache is down: act without the guarantee rather than refuse. Uploads stay
        # safe to repeat (content is deduplicated per incident).
        return handler(request)
    if not locked:
        return Response(
            {"detail": "A request with this Idempotency-Key is still being processed."},
            status=status.HTTP_409_CONFLICT,
        )
    try:
        response = handler(request)
        if response.status_code < 500:
            sharedcache.set(
                cache_key,
                {
                    "status": response.status_code,
                    "body": response.data,
                    "fingerprint": fingerprint,
                },
                KEEP_SECONDS,
            )
        return response
    finally:
        sharedcache.delete(cache_key + ":lock")
