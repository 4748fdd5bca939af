"""Request bodies are read with a deadline and in full, or not at all.

A WSGI middleware around the Django application (``apps.wsgi``):

- every read of the body waits at most ``RANKSCOPE_REQUEST_BODY_TIMEOUT`` seconds for
  data (the socket's timeout under gunicorn), so a client that stops sending cannot
  hold a web server thread for longer than that;
- a body that ends before its ``Content-Length`` (the client went away, a proxy cut it)
  raises ``UnreadablePostError`` instead of looking like a short, complete body, so an
  upload cut short is refused (400, nothing stored) rather than stored as a prefix;
- a chunked body (no ``Content-Length``; Django would read it as empty) is first copied
  to a temporary file, within the same deadline and the request size limit, and handed
  to Django with its real length; one cut short is answered 400 before Django runs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import tempfile
from collections.abc import Callable, Iterable
from typing import IO, Any

from django.conf import settings
from django.http.request import UnreadablePostError

log = logging.getLogger(__name__)

CHUNK = 256 * 1024


class _CheckedInput:
    """``wsgi.input`` that raises instead of ending early or waiting forever."""

    def __init__(self, stream: IO[bytes], length: int) -> None:
        self._stream = stream
        self._remaining = length
        self._length = length

    def _check(self, data: bytes, asked: int | None) -> bytes:
        if data:
            self._remaining -= len(data)
        elif self._remaining > 0 and asked != 0:
            got = self._length - self._remaining
            raise UnreadablePostError(f"the body ended after {got} of its {self._length} bytes")
        return data

    def read(self, size: int | None = -1) -> bytes:
        try:
            data = self._stream.read(size) if size is not None else self._stream.read()
        except TimeoutError as exc:
            raise UnreadablePostError("the client stopped sending the body") from exc
        except OSError as exc:
            raise UnreadablePostError(f"the body could not be read: {exc}") from exc
        return self._check(data, size)

    def readline(self, size: int | None = -1) -> bytes:
        try:
            data = self._stream.readline(size) if size is not None else self._stream.readline()
        except OSError as exc:
            raise UnreadablePostError(f"the body could not be read: {exc}") from exc
        return self._check(data, size)

    def __iter__(self):
        return self

    def __next__(self) -> bytes:
        line = self.readline()
        if not line:
            raise StopIteration
        return line


def _refuse(start_response: Callable, status: str, detail: str, code: str) -> Iterable[bytes]:
    body = json.dumps({"detail": detail, "code": code}).encode()
    start_response(
        status,
        [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
    )
    return [body]


def _max_request_bytes() -> int:
    return settings.RANKSCOPE_API_MAX_REQUEST_BYTES


class RequestBodyMiddleware:
    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        sock = environ.get("gunicorn.socket")
        prior = None
        timeout = settings.RANKSCOPE_REQUEST_BODY_TIMEOUT
        if sock is not None and timeout > 0:
            try:
                prior = sock.gettimeout()
                sock.settimeout(timeout)
            except OSError:
                sock = None
        try:
            chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
            if chunked and not environ.get("CONTENT_LENGTH"):
                spooled = self._spool(environ, start_response)
                if not isinstance(spooled, int):
                    return spooled
                environ["CONTENT_LENGTH"] = str(spooled)
            try:
                length = int(environ.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = 0
            if length > 0 and "wsgi.input" in environ:
                environ["wsgi.input"] = _CheckedInput(environ["wsgi.input"], length)
            return self.app(environ, start_response)
        finally:
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.settimeout(prior)

    def _spool(self, environ: dict[str, Any], start_response: Callable) -> int | Iterable[bytes]:
        limit = _max_request_bytes()
        stream = environ["wsgi.input"]
        out = tempfile.SpooledTemporaryFile(  # noqa: SIM115 - closed with the request
            max_size=settings.FILE_UPLOAD_MAX_MEMORY_SIZE, dir=settings.FILE_UPLOAD_TEMP_DIR
        )
        size = 0
        try:
            while True:
                data = stream.read(CHUNK)
                if not data:
                    break
                size += len(data)
                if size > limit:
                    out.close()
                    return _refuse(
                        start_response,
                        "413 Request Entity Too Large",
                        f"The request body is larger than the limit of {limit} bytes.",
                        "too_large",
                    )
                out.write(data)
        except Exception as exc:  # gunicorn raises its own errors for a broken chunk
            out.close()
            log.warning("chunked request body cut short after %d bytes: %s", size, exc)
            return _refuse(
                start_response,
                "400 Bad Request",
                "The chunked request body was cut short: nothing was stored. Send it again.",
                "body_incomplete",
            )
        out.seek(0)
        environ["wsgi.input"] = out
        environ.pop("HTTP_TRANSFER_ENCODING", None)
        return size
