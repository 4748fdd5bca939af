"""Where artifact bytes live: the one module that talks to the configured store.

Every read and write of artifact bytes (uploads, parse outputs, the evidence viewer)
goes through here, so a web host and a worker host that share nothing but PostgreSQL,
Redis and the object store see the same bytes. Two backends, chosen by
``RANKSCOPE_STORAGE`` (``apps/settings.py``): the local filesystem (one host) and an
S3-compatible object store (many hosts).

On S3:

- writes stream in parts of ``RANKSCOPE_S3_PART_BYTES``: memory holds one part,
  whatever the size of the file; a write that fails or is interrupted aborts its
  multipart upload (``abort_stale_uploads`` sweeps those a killed process left);
- reads never download a whole object to disk: ``open_stream`` reads it in ranged
  GETs as it is consumed, and ``read_range`` fetches exactly the bytes asked for (the
  evidence viewer's page of lines).

``fetched`` counts the bytes read from the store in this process (both backends), for
the benchmarks and for tests that check a page view reads only its range.
"""

from __future__ import annotations

import io
import logging
import threading
from datetime import UTC, datetime, timedelta
from typing import IO, Any, BinaryIO

from botocore.exceptions import BotoCoreError, ClientError
from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage
from django.utils.functional import empty


class StorageUnavailable(Exception):
    """Storage could not be reached or written: transient, the task retries."""


log = logging.getLogger(__name__)

# What a failing store raises: the filesystem's OSError, S3's client and transport errors.
ERRORS: tuple[type[BaseException], ...] = (OSError, BotoCoreError, ClientError)

STREAM_CHUNK = 8 << 20  # one ranged GET per this many bytes of a sequential read
MIN_PART = 5 << 20  # S3's smallest part (all but the last)
MAX_PARTS = 10_000  # S3's most parts in one upload


class _Counter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.bytes = 0
        self.requests = 0

    def add(self, n: int) -> None:
        with self._lock:
            self.bytes += n
            self.requests += 1

    def reset(self) -> None:
        with self._lock:
            self.bytes = 0
            self.requests = 0


fetched = _Counter()


def is_s3() -> bool:
    return _s3() is not None


def _s3() -> Any | None:
    """The django-storages S3 backend in use, or None on the filesystem."""
    if default_storage._wrapped is empty:
        default_storage._setup()
    backend = default_storage._wrapped
    return backend if getattr(backend, "bucket_name", None) else None


def _client_and_key(key: str) -> tuple[Any, str, str]:
    backend = _s3()
    assert backend is not None
    return backend.connection.meta.client, backend.bucket_name, backend._normalize_name(key)


def _part_size(expected_size: int | None = None) -> int:
    part = max(MIN_PART, settings.RANKSCOPE_S3_PART_BYTES)
    limit = expected_size or settings.RANKSCOPE_MAX_FILE_BYTES
    while limit // part >= MAX_PARTS:  # a huge file: bigger parts, never over 10,000
        part *= 2
    return part


def read_full(stream: IO[bytes], n: int) -> bytes:
    """Up to ``n`` bytes of ``stream``: fewer only at its end."""
    parts: list[bytes] = []
    got = 0
    while got < n:
        data = stream.read(n - got)
        if not data:
            break
        parts.append(data)
        got += len(data)
    return b"".join(parts)


# --- writes -------------------------------------------------------------------------


def save_stream(key: str, stream: IO[bytes], *, replace: bool = False) -> str:
    """Stream ``stream`` into the store at ``key``; return the key it was stored under.

    ``replace`` overwrites an object already at ``key`` (a parse re-run writes its own
    output again); otherwise the filesystem backend may pick a free name next to it.
    On S3 the bytes go up in parts (one part in memory at a time); when anything fails
    the multipart upload is aborted and the error re-raised, so no half-written object
    and no hidden parts are left behind.
    """
    if _s3() is None:
        if replace and default_storage.exists(key):
            default_storage.delete(key)
        return default_storage.save(key, File(stream, name=key.rsplit("/", 1)[-1]))
    client, bucket, full = _client_and_key(key)
    part = _part_size()
    data = read_full(stream, part)
    if len(data) < part:
        client.put_object(Bucket=bucket, Key=full, Body=data)
        return key
    upload_id = client.create_multipart_upload(Bucket=bucket, Key=full)["UploadId"]
    try:
        parts = []
        number = 1
        while data:
            etag = client.upload_part(
                Bucket=bucket, Key=full, UploadId=upload_id, PartNumber=number, Body=data
            )["ETag"]
            parts.append({"ETag": etag, "PartNumber": number})
            number += 1
            data = b""  # let the part go before the next one is read
            data = read_full(stream, part)
        client.complete_multipart_upload(
            Bucket=bucket, Key=full, UploadId=upload_id, MultipartUpload={"Parts": parts}
        )
    except BaseException:
        _abort(client, bucket, full, upload_id)
        raise
    return key


def _abort(client: Any, bucket: str, full: str, upload_id: str) -> None:
    try:
        client.abort_multipart_upload(Bucket=bucket, Key=full, UploadId=upload_id)
    except Exception:  # the sweep catches what this misses; never hide the real error
        log.warning("could not abort the multipart upload of %s", full, exc_info=True)


def abort_stale_uploads(*, older_than: timedelta = timedelta(hours=6)) -> int:
    """Abort multipart uploads under our prefix started more than ``older_than`` ago.

    Their process was killed before it could abort them itself; their parts are billed
    and invisible. Returns how many were aborted (0 on the filesystem).
    """
    backend = _s3()
    if backend is None:
        return 0
    client = backend.connection.meta.client
    prefix = backend._normalize_name("x")[:-1]
    cutoff = datetime.now(UTC) - older_than
    aborted = 0
    kwargs: dict[str, Any] = {"Bucket": backend.bucket_name, "Prefix": prefix}
    while True:
        page = client.list_multipart_uploads(**kwargs)
        for upload in page.get("Uploads") or []:
            if upload["Initiated"] < cutoff:
                _abort(client, backend.bucket_name, upload["Key"], upload["UploadId"])
                aborted += 1
        if not page.get("IsTruncated"):
            return aborted
        kwargs["KeyMarker"] = page.get("NextKeyMarker", "")
        kwargs["UploadIdMarker"] = page.get("NextUploadIdMarker", "")


def delete(key: str) -> None:
    """Remove the object at ``key``; a missing one is not an error."""
    if key:
        default_storage.delete(key)


def exists(key: str) -> bool:
    return default_storage.exists(key)


def listdir(prefix: str) -> tuple[list[str], list[str]]:
    """``(folders, objects)`` directly under ``prefix``; FileNotFoundError when there is none."""
    return default_storage.listdir(prefix)


def modified_time(key: str) -> datetime:
    return default_storage.get_modified_time(key)


# --- reads --------------------------------------------------------------------------


def read_range(key: str, start: int, end: int) -> bytes:
    """Bytes ``start`` up to (not including) ``end`` of the object; fewer at its end.

    On S3 one GET with a ``Range`` header; on the filesystem a seek and a read.
    Raises ``FileNotFoundError`` when there is no such object.
    """
    if end <= start:
        return b""
    if _s3() is None:
        with default_storage.open(key, "rb") as fp:
            fp.seek(start)
            data = fp.read(end - start)
        fetched.add(len(data))
        return data
    client, bucket, full = _client_and_key(key)
    try:
        response = client.get_object(Bucket=bucket, Key=full, Range=f"bytes={start}-{end - 1}")
    except client.exceptions.NoSuchKey as exc:
        raise FileNotFoundError(key) from exc
    except client.exceptions.ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "InvalidRange":  # past the end
            fetched.add(0)
            return b""
        raise
    with response["Body"] as body:
        data = body.read()
    fetched.add(len(data))
    return data


def size(key: str) -> int:
    """The object's length in bytes; ``FileNotFoundError`` when there is none."""
    if _s3() is None:
        return default_storage.size(key)
    client, bucket, full = _client_and_key(key)
    try:
        return int(client.head_object(Bucket=bucket, Key=full)["ContentLength"])
    except client.exceptions.ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            raise FileNotFoundError(key) from exc
        raise


class RangeReader(io.RawIOBase):
    """A seekable, read-only file over an object, fetched in ranges as it is read.

    ``chunk`` is the first range's length; each further range doubles, up to
    ``max_chunk``: a short read costs little, a long one few requests.
    """

    def __init__(
        self,
        key: str,
        *,
        start: int = 0,
        length: int | None = None,
        chunk: int = 64 << 10,
        max_chunk: int = STREAM_CHUNK,
    ) -> None:
        super().__init__()
        self.key = key
        self._pos = start
        self._size = length
        self._chunk = chunk
        self._max_chunk = max(chunk, max_chunk)
        self._buf = b""
        self._buf_start = start

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_CUR:
            offset += self._pos
        elif whence == io.SEEK_END:
            if self._size is None:
                self._size = size(self.key)
            offset += self._size
        self._pos = max(0, offset)
        return self._pos

    def readinto(self, b: Any) -> int:  # type: ignore[override]
        want = len(b)
        if want == 0:
            return 0
        end_buf = self._buf_start + len(self._buf)
        if not (self._buf_start <= self._pos < end_buf):
            if self._size is not None and self._pos >= self._size:
                return 0
            length = max(self._chunk, want)
            self._buf = read_range(self.key, self._pos, self._pos + length)
            self._buf_start = self._pos
            self._chunk = min(self._chunk * 2, self._max_chunk)
            if not self._buf:
                return 0
        i = self._pos - self._buf_start
        data = self._buf[i : i + want]
        b[: len(data)] = data
        self._pos += len(data)
        return len(data)


def open_stream(key: str) -> BinaryIO:
    """The object at ``key`` as a readable, seekable binary file (callers close it).

    On S3 it is read in ranged GETs as consumed (never downloaded whole first); on
    the filesystem it is the file itself. Raises ``FileNotFoundError`` when missing.
    """
    if _s3() is None:
        return default_storage.open(key, "rb")  # type: ignore[return-value]
    total = size(key)  # a HEAD: a missing object fails here, before any reading
    raw = RangeReader(key, length=total, chunk=STREAM_CHUNK)
    return io.BufferedReader(raw, buffer_size=1 << 20)  # type: ignore[return-value]
