"""Request body parsers for uploads: multipart or a raw body, either optionally gzipped.

Bytes are streamed into temporary files (spooled: small ones stay in memory), never
read whole, and every size limit is enforced while streaming, so a gzip bomb stops at
the limit instead of filling the disk.
"""

from __future__ import annotations

import re
import tempfile
import zlib
from collections.abc import Iterator
from typing import IO, Any

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.http.multipartparser import MultiPartParser as DjangoMultiPartParser
from django.http.multipartparser import MultiPartParserError
from django.utils.datastructures import MultiValueDict
from rest_framework import exceptions, status
from rest_framework.parsers import BaseParser, DataAndFiles

CHUNK = 256 * 1024


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The upload is larger than this server accepts."
    default_code = "too_large"


class BodyIncomplete(exceptions.APIException):
    """The request body ended before its declared length, or stopped arriving."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_detail = "The request body was incomplete: nothing was stored. Send it again."
    default_code = "body_incomplete"


class UnsupportedEncoding(exceptions.APIException):
    status_code = status.HTTP_415_UNSUPPORTED_MEDIA_TYPE
    default_detail = "Unsupported Content-Encoding: send identity or gzip."
    default_code = "unsupported_encoding"


def max_file_bytes() -> int:
    return int(settings.RANKSCOPE_MAX_FILE_BYTES)


def max_request_bytes() -> int:
    return settings.RANKSCOPE_API_MAX_REQUEST_BYTES


def content_encoding(meta: dict[str, Any]) -> str:
    value = (meta.get("HTTP_CONTENT_ENCODING") or "identity").strip().lower()
    if value not in {"identity", "gzip", "x-gzip"}:
        raise UnsupportedEncoding(f"Unsupported Content-Encoding {value!r}: send identity or gzip.")
    return "gzip" if value in {"gzip", "x-gzip"} else "identity"


def check_declared_length(meta: dict[str, Any], *, limit: int) -> None:
    """413 before a byte is read, when the client says up front that it is too big."""
    try:
        length = int(meta.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise exceptions.ParseError("Invalid Content-Length.") from None
    if length > limit:
        raise PayloadTooLarge(f"The body is {length} bytes; the limit is {limit} bytes.")


def _chunks(stream: IO[bytes]) -> Iterator[bytes]:
    while True:
        chunk = stream.read(CHUNK)
        if not chunk:
            return
        yield chunk


def _gunzip(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """Decompress gzip (several members allowed), never more than CHUNK at a time."""
    decomp = zlib.decompressobj(16 + zlib.MAX_WBITS)
    seen_input = False
    try:
        for data in chunks:
            seen_input = True
            while data:
                out = decomp.decompress(data, CHUNK)
                if out:
                    yield out
                if decomp.unconsumed_tail:
                    data = decomp.unconsumed_tail
                elif decomp.eof and decomp.unused_data:
                    data = decomp.unused_data
                    decomp = zlib.decompressobj(16 + zlib.MAX_WBITS)
                else:
                    data = b""
        tail = decomp.flush()
        if tail:
            yield tail
    except zlib.error as exc:
        raise exceptions.ParseError(f"The body is not valid gzip: {exc}") from None
    if seen_input and not decomp.eof:
        raise exceptions.ParseError("The gzip body is truncated.")


def spool(chunks: Iterator[bytes], *, limit: int, what: str) -> tuple[IO[bytes], int]:
    """Copy `chunks` into a temporary file, stopping with 413 past `limit` bytes."""
    out = tempfile.SpooledTemporaryFile(  # noqa: SIM115 - handed to the caller, closed with the request
        max_size=settings.FILE_UPLOAD_MAX_MEMORY_SIZE, dir=settings.FILE_UPLOAD_TEMP_DIR
    )
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > limit:
            out.close()
            raise PayloadTooLarge(f"{what} is larger than the limit of {limit} bytes.")
        out.write(chunk)
    out.seek(0)
    return out, size


_SAFE_NAME = re.compile(r"[\x00-\x1f\x7f]")


def raw_upload_name(request: Any) -> str:
    """The file name of a raw-body upload: ?name=, then X-Filename, then Content-Disposition."""
    name = request.GET.get("name") or request.META.get("HTTP_X_FILENAME", "")
    if not name:
        disposition = request.META.get("HTTP_CONTENT_DISPOSITION", "")
        match = re.search(r'filename="?([^";]+)"?', disposition)
        name = match.group(1) if match else ""
    return _SAFE_NAME.sub("", name).strip()[:1000]


class RawBodyParser(BaseParser):
    """Any non-form body is one file: its name comes from ``?name=`` or ``X-Filename``."""

    media_type = "*/*"

    def parse(self, stream, media_type=None, parser_context=None) -> DataAndFiles:
        request = parser_context["request"]
        meta = request.META
        encoding = content_encoding(meta)
        check_declared_length(
            meta, limit=max_file_bytes() if encoding == "identity" else max_request_bytes()
        )
        name = raw_upload_name(request)
        if not name:
            raise exceptions.ParseError(
                "Name the file: add ?name=FILE to the URL or an X-Filename header."
            )
        chunks = _chunks(stream) if stream is not None else iter(())
        if encoding == "gzip":
            chunks = _gunzip(chunks)
        body, size = spool(chunks, limit=max_file_bytes(), what="The file")
        declared = int(meta.get("CONTENT_LENGTH") or 0)
        if encoding == "identity" and declared and size != declared:
            body.close()  # cut short: a prefix stored as the whole file would mislead
            raise BodyIncomplete(
                f"The body ended after {size} of its {declared} bytes: nothing was stored."
            )
        upload = UploadedFile(
            file=body, name=name, content_type=media_type or "application/octet-stream", size=size
        )
        return DataAndFiles({}, MultiValueDict({"file": [upload]}))


class GzipMultiPartParser(BaseParser):
    """multipart/form-data, optionally with ``Content-Encoding: gzip`` on the whole body."""

    media_type = "multipart/form-data"

    def parse(self, stream, media_type=None, parser_context=None) -> DataAndFiles:
        request = parser_context["request"]
        meta = request.META.copy()
        encoding = content_encoding(meta)
        check_declared_length(meta, limit=max_request_bytes())
        upload_handlers = request.upload_handlers
        if encoding == "gzip":
            body, size = spool(
                _gunzip(_chunks(stream)), limit=max_request_bytes(), what="The request body"
            )
            meta["CONTENT_LENGTH"] = str(size)
            meta.pop("HTTP_CONTENT_ENCODING", None)
            stream = body
        meta["CONTENT_TYPE"] = media_type
        try:
            parser = DjangoMultiPartParser(meta, stream, upload_handlers, "utf-8")
            data, files = parser.parse()
        except MultiPartParserError as exc:
            raise exceptions.ParseError(f"Multipart form parse error: {exc}") from None
        for upload in files.values():
            if upload.size is not None and upload.size > max_file_bytes():
                raise PayloadTooLarge(
                    f"{upload.name} is {upload.size} bytes; the limit is {max_file_bytes()} bytes."
                )
        return DataAndFiles(data, files)
