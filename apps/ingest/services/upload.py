"""Uploads: files and archive members streamed into storage, hashed, deduplicated per
incident, one Artifact row each, the parse enqueued on commit."""

from __future__ import annotations

import codecs
import hashlib
import io
import logging
import os
from dataclasses import dataclass
from typing import IO, Any, Literal

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.utils import timezone

import rankscope as engine
from apps.incidents.models import Incident
from apps.incidents.services import incident_event_add
from apps.ingest import storage, tasks
from apps.ingest.models import Artifact, ParseStatus
from apps.ingest.services.artifacts import _delete_quietly
from apps.lib.codes import new_code
from rankscope import archives
from rankscope.archives import ArchiveError, Limits, MemberRejected, human_size
from rankscope.detect import is_text

log = logging.getLogger(__name__)


HEAD_BYTES = 65536


CHUNK = 1 << 20


MAX_NAME = 900


QUEUE_DOWN_NOTE = "the task queue is unavailable: kept, and parsed automatically once it is back"


@dataclass(slots=True)
class UploadOutcome:
    """What happened to one file of an upload (archives give one per member)."""

    name: str
    status: Literal["stored", "duplicate", "rejected"]
    artifact: Artifact | None
    message: str

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "message": self.message,
            "artifact": self.artifact.code if self.artifact is not None else None,
        }


def ingest_limits() -> Limits:
    """The configured limits (apps/settings.py), as the archive module wants them."""
    return Limits(
        max_member_bytes=settings.RANKSCOPE_MAX_FILE_BYTES,
        max_total_bytes=settings.RANKSCOPE_ARCHIVE_MAX_TOTAL_BYTES,
        max_members=settings.RANKSCOPE_ARCHIVE_MAX_MEMBERS,
        max_ratio=settings.RANKSCOPE_ARCHIVE_MAX_RATIO,
    )


def sanitize_name(name: str) -> str:
    """A display-safe relative name: no directories above, no control characters.

    Metadata only: it never becomes a storage path.
    """
    name = (name or "").replace("\\", "/").replace("\x00", "")
    parts = [p for p in name.split("/") if p not in ("", ".", "..")]
    if parts and len(parts[0]) == 2 and parts[0][1] == ":":  # C:/Users/…
        parts = parts[1:]
    cleaned = "/".join("".join(ch if ch.isprintable() else "?" for ch in p) for p in parts)
    cleaned = cleaned.strip() or "unnamed"
    return cleaned[-MAX_NAME:] if len(cleaned) > MAX_NAME else cleaned


def _stream_size(fileobj: IO[bytes]) -> int | None:
    size = getattr(fileobj, "size", None)
    if isinstance(size, int):
        return size
    try:
        return os.fstat(fileobj.fileno()).st_size
    except (AttributeError, OSError, io.UnsupportedOperation):
        return None


def _binary_problem(head: bytes, kind: str) -> str | None:
    """Why a file is refused as binary, or None when Rankscope can read it."""
    if is_text(head) or kind != "other":
        return None
    if head[:4] == b"PAR1":  # Parquet metrics: binary, but a format we keep
        return None
    return (
        "binary file: Rankscope reads text logs, metrics (CSV, JSONL, Parquet) and "
        "flight-recorder dumps; not stored"
    )


def _utf8_note(head: bytes) -> str | None:
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return (
            "not valid UTF-8: shown with replacement characters; the raw bytes are kept unchanged"
        )
    return None


class _HashingReader(io.RawIOBase):
    """``head`` then the rest of ``stream``, hashing and counting as it is read."""

    def __init__(self, head: bytes, stream: IO[bytes]) -> None:
        self._head = head
        self._stream = stream
        self.sha = hashlib.sha256()
        self.size = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        if self._head:
            data, self._head = self._head[: len(b)], self._head[len(b) :]
        else:
            data = self._stream.read(min(len(b), CHUNK))
        n = len(data)
        b[:n] = data
        self.sha.update(data)
        self.size += n
        return n


def store_stream(*, key: str, head: bytes, stream: IO[bytes]) -> tuple[str, int, str]:
    """Stream ``head`` + ``stream`` into default storage at ``key``; return (key, size, sha256).

    Chunked: memory stays flat whatever the size. On any error the partial object is
    removed and the error re-raised.
    """
    reader = _HashingReader(head, stream)
    buffered = io.BufferedReader(reader, buffer_size=CHUNK)
    saved = ""
    try:
        saved = storage.save_stream(key, buffered)
    except BaseException:
        _delete_quietly(saved or key)
        raise
    return saved, reader.size, reader.sha.hexdigest()


def _actor(actor: AbstractBaseUser | AnonymousUser | None) -> AbstractBaseUser | None:
    return actor if actor is not None and actor.is_authenticated else None  # type: ignore[return-value]


class _Enqueuer:
    """Hands parse tasks to the broker after commit; stops trying once the broker is down.

    A row whose enqueue failed stays ``pending`` with ``enqueued_at`` null:
    ``artifact_enqueue_pending`` (run by the auditor) sends it later.
    """

    def __init__(self) -> None:
        self.broker_down = False
        self.unsent: set[int] = set()

    def on_commit(self, artifact_id: int) -> None:
        # robust: nothing that goes wrong after the commit may reach the upload's error
        # handling, which would treat a committed row as never written.
        transaction.on_commit(lambda: self.send(artifact_id), robust=True)

    def send(self, artifact_id: int) -> bool:
        if self.broker_down:
            self.unsent.add(artifact_id)
            return False

        try:
            tasks.artifact_parse.delay(artifact_id)
        except Exception:  # any broker failure leaves the row for the auditor
            self.broker_down = True
            self.unsent.add(artifact_id)
            log.warning("could not enqueue the parse of artifact %s; left pending", artifact_id)
            return False
        try:
            Artifact.objects.filter(pk=artifact_id, parse_status=ParseStatus.PENDING).update(
                parse_status=ParseStatus.QUEUED, enqueued_at=timezone.now()
            )
        except DatabaseError:
            # The message is on its way; the row stays pending and the auditor sends a
            # second copy later, which the parse's compare-and-set makes harmless. The
            # committed row and its bytes are kept whatever happens here.
            log.warning("sent the parse of artifact %s but could not mark it queued", artifact_id)
        return True


def artifact_upload(
    *,
    incident: Incident,
    fileobj: IO[bytes],
    name: str,
    actor: AbstractBaseUser | AnonymousUser | None,
    source: str = "web",
    limits: Limits | None = None,
) -> list[UploadOutcome]:
    """Store one uploaded file; an archive is expanded into one artifact per member.

    Each stored file gets a generated storage key (``incidents/<incident>/<artifact>``),
    its sha256 computed while streaming, its kind detected, and a parse task enqueued
    on commit. The same content already in the incident is not stored again
    (``duplicate``). A bad file or member is ``rejected`` with a message and no bytes
    kept; the others are stored. Nothing already stored is changed. Size limits are
    checked before bytes move when the size is known, and while streaming otherwise.
    """
    limits = limits or ingest_limits()
    original = sanitize_name(name)
    outcomes: list[UploadOutcome] = []
    enqueuer = _Enqueuer()
    ctx = _Ctx(incident=incident, actor=_actor(actor), source=source, original=original)

    size = _stream_size(fileobj)
    if size is not None and size > limits.max_member_bytes:
        outcomes.append(
            _reject(
                ctx,
                original,
                f"{human_size(size)} is over the {human_size(limits.max_member_bytes)} "
                "per-file limit; not stored",
                size=size,
            )
        )
    else:
        try:
            for member in archives.iter_members(fileobj, original, limits=limits):
                outcomes.append(_store_member(ctx, member, enqueuer))
        except ArchiveError as exc:
            if not getattr(exc, "reported", False):
                outcomes.append(_reject(ctx, original, str(exc)))
        if not outcomes:
            outcomes.append(_reject(ctx, original, "the archive holds no files"))
    _timeline(ctx, outcomes)
    for o in outcomes:
        if o.status == "stored" and o.artifact is not None and o.artifact.pk in enqueuer.unsent:
            o.message += f"; {QUEUE_DOWN_NOTE}"
    return outcomes


@dataclass(slots=True)
class _Ctx:
    incident: Incident
    actor: AbstractBaseUser | None
    source: str
    original: str


_ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".gz", ".zip", ".tar.xz", ".xz", ".bz2")


def _reject(ctx: _Ctx, display: str, reason: str, *, size: int = 0) -> UploadOutcome:
    artifact = Artifact.objects.create(
        incident=ctx.incident,
        original_name=ctx.original,
        display_name=sanitize_name(display),
        size=size,
        parse_status=ParseStatus.REJECTED,
        parse_error=reason,
        source=ctx.source,
        uploaded_by=ctx.actor,
    )
    return UploadOutcome(display, "rejected", artifact, reason)


def _store_member(ctx: _Ctx, member: archives.Member, enqueuer: _Enqueuer) -> UploadOutcome:
    """Screen one file, stream its bytes to storage, then write its row (or find the copy)."""
    display = sanitize_name(member.name)
    screened = _screen(ctx, member, display)
    if isinstance(screened, UploadOutcome):
        return screened
    code = new_code("a")
    key = f"incidents/{ctx.incident.code}/{code}"
    # Upload outside the DB transaction: this can take long.
    try:
        key, size, sha = store_stream(key=key, head=screened.head, stream=screened.stream)
    except MemberRejected as exc:
        return _reject(ctx, display, f"{exc.reason}; not stored")
    return _record(
        ctx, display, screened, code=code, key=key, size=size, sha=sha, enqueuer=enqueuer
    )


@dataclass(slots=True)
class _Screened:
    """A file that passed the checks on its first bytes, its stream positioned after them."""

    stream: IO[bytes]
    head: bytes
    kind: str
    notes: list[str]


def _screen(ctx: _Ctx, member: archives.Member, display: str) -> _Screened | UploadOutcome:
    """Refuse what cannot be analysed (rejected members, empty, binary) before storing it."""
    if member.rejected is not None:
        out = _reject(ctx, display, member.rejected.reason, size=member.size or 0)
        out.name = member.name  # as the archive spelled it: the user must recognise it
        return out
    try:
        stream = member.open()
        head = storage.read_full(stream, HEAD_BYTES)
    except MemberRejected as exc:
        return _reject(ctx, display, exc.reason)
    if not head:
        return _reject(ctx, display, "empty file (0 bytes): nothing to analyse; not stored")
    kind = engine.detect_kind(display, head)
    problem = _binary_problem(head, kind)
    if problem and display.lower().endswith(_ARCHIVE_SUFFIXES):
        # Named like an archive but not one we can open: say that, not "binary file".
        problem = (
            "not a readable archive: the name says "
            f"{next(x for x in _ARCHIVE_SUFFIXES if display.lower().endswith(x))} but the "
            "content is not (corrupt, truncated or another format); re-create it with "
            "tar -czf and upload again; not stored"
        )
    if problem:
        return _reject(ctx, display, problem, size=member.size or 0)
    notes = [n for n in [_utf8_note(head)] if n and kind not in ("flight_recorder", "metrics")]
    return _Screened(stream=stream, head=head, kind=kind, notes=notes)


def _record(
    ctx: _Ctx,
    display: str,
    screened: _Screened,
    *,
    code: str,
    key: str,
    size: int,
    sha: str,
    enqueuer: _Enqueuer,
) -> UploadOutcome:
    """Write the row of bytes already stored, or answer "duplicate" and drop our copy.

    From here on the bytes are stored: they are deleted only when it is certain that no
    committed row points at them. When that cannot be known (the connection dropped
    during COMMIT), they are kept; the storage sweep removes them later if no row
    refers to them (``artifact_storage_sweep``).
    """
    # No look for the same content first: the unique constraint on (incident, sha256)
    # answers that in the INSERT itself, and a duplicate (a retried epilog) is the rare
    # case; most files cost one statement fewer.
    committing = False
    try:
        with transaction.atomic():
            artifact = Artifact.objects.create(
                code=code,
                incident=ctx.incident,
                original_name=ctx.original,
                display_name=display,
                storage_key=key,
                size=size,
                sha256=sha,
                kind=screened.kind,
                notes=screened.notes,
                source=ctx.source,
                uploaded_by=ctx.actor,
            )
            enqueuer.on_commit(artifact.pk)
            committing = True
    except IntegrityError:  # the same content is already here (stored before, or just now)
        try:
            existing = Artifact.objects.filter(incident=ctx.incident, sha256=sha).first()
        except DatabaseError:
            existing = None
        if existing is None:
            _delete_quietly(key)  # the INSERT failed: no row points at our key
            raise
    except DatabaseError:
        if committing:
            _delete_if_unreferenced(key, code=code)  # COMMIT failed: maybe written
        else:
            _delete_quietly(key)  # the INSERT failed: certainly no row
        raise
    else:
        message = f"stored ({human_size(size)}, {screened.kind.replace('_', ' ')})"
        if screened.notes:
            message += f"; {screened.notes[0]}"
        return UploadOutcome(display, "stored", artifact, message)
    _delete_quietly(key)  # ours is a second copy; the existing row has its own bytes
    return UploadOutcome(
        display,
        "duplicate",
        existing,
        f"same content as {existing.display_name}, already in this incident; stored once",
    )


def _delete_if_unreferenced(key: str, *, code: str) -> None:
    """Delete ``key`` only if it is certain that no committed row ``code`` points at it."""
    if connection.in_atomic_block:
        return  # an outer transaction decides; the sweep cleans up if it rolled back
    try:
        connection.close()  # the broken connection; the check below opens a new one
        if Artifact.objects.filter(code=code).exists():
            return
    except DatabaseError:
        log.warning("could not tell whether %s is referenced; kept for the sweep", key)
        return
    _delete_quietly(key)


def _timeline(ctx: _Ctx, outcomes: list[UploadOutcome]) -> None:
    counts = {
        s: sum(1 for o in outcomes if o.status == s) for s in ("stored", "duplicate", "rejected")
    }
    parts = [f"{n} {s}" for s, n in counts.items() if n]
    incident_event_add(
        incident=ctx.incident,
        kind="ingest.upload",
        message=f"Uploaded {ctx.original}: {', '.join(parts)}",
        actor=ctx.actor,
        data={"name": ctx.original, "source": ctx.source, **counts},
    )
