"""Writes for uploaded artifacts: store (streamed, hashed, deduplicated), parse, fan in.

Bytes never move inside a database transaction and are never held whole in memory:
a file (or archive member) is streamed into Django storage chunk by chunk while its
sha256 is computed; only then is its row written, in a short transaction that
enqueues the parse task on commit.
"""

from __future__ import annotations

import codecs
import gzip
import hashlib
import io
import json
import logging
import os
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import IO, Any, BinaryIO, Literal

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models import F, QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

import rankscope as engine
from apps.incidents.models import Incident
from apps.incidents.services import incident_event_add
from apps.ingest import lineindex, signals, storage, tasks
from apps.ingest.models import ACTIVE_STATUSES, Artifact, ParseStatus, RankDigest
from apps.ingest.storage import StorageUnavailable
from apps.lib.brokerqueue import queue_depth
from apps.lib.codes import new_code
from apps.lib.heartbeat import Heartbeat
from rankscope import archives
from rankscope.archives import ArchiveError, Limits, MemberRejected, human_size

log = logging.getLogger(__name__)

HEAD_BYTES = 65536
CHUNK = 1 << 20
MAX_NAME = 900
_NCCL_EVENT_HINTS = ("nccl", "watchdog", "collective", "comm_", "async_exception", "blocking_wait")
# The auditor gives up on an artifact whose parse was started this many times without
# finishing (its worker was killed, or the hard time limit stopped it, each time).
MAX_PARSE_ATTEMPTS = 3
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


def _read_head(stream: IO[bytes], n: int = HEAD_BYTES) -> bytes:
    parts: list[bytes] = []
    got = 0
    while got < n:
        data = stream.read(n - got)
        if not data:
            break
        parts.append(data)
        got += len(data)
    return b"".join(parts)


def _is_text(head: bytes) -> bool:
    sample = head[:8192]
    if b"\x00" in sample:
        return False
    bad = sum(1 for b in sample if b < 9 or 13 < b < 32)
    return bad <= len(sample) * 0.02


def _binary_problem(head: bytes, kind: str) -> str | None:
    """Why a file is refused as binary, or None when Rankscope can read it."""
    if _is_text(head) or kind != "other":
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


def _delete_quietly(key: str) -> None:
    if not key:
        return
    try:
        storage.delete(key)
    except Exception:  # cleanup must not hide the real error
        log.warning("could not delete %s from storage", key, exc_info=True)


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
    display = sanitize_name(member.name)
    if member.rejected is not None:
        out = _reject(ctx, display, member.rejected.reason, size=member.size or 0)
        out.name = member.name  # as the archive spelled it: the user must recognise it
        return out
    try:
        stream = member.open()
        head = _read_head(stream)
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

    code = new_code("a")
    key = f"incidents/{ctx.incident.code}/{code}"
    # Upload outside the DB transaction: this can take long.
    try:
        key, size, sha = store_stream(key=key, head=head, stream=stream)
    except MemberRejected as exc:
        return _reject(ctx, display, f"{exc.reason}; not stored")

    # From here on the bytes are stored: they are deleted only when it is certain that no
    # committed row points at them. When that cannot be known (the connection dropped
    # during COMMIT), they are kept; the storage sweep removes them later if no row
    # refers to them (``artifact_storage_sweep``).
    try:
        existing = Artifact.objects.filter(incident=ctx.incident, sha256=sha).first()
    except DatabaseError:
        _delete_quietly(key)  # nothing was written yet
        raise
    if existing is None:
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
                    kind=kind,
                    notes=notes,
                    source=ctx.source,
                    uploaded_by=ctx.actor,
                )
                enqueuer.on_commit(artifact.pk)
                committing = True
        except IntegrityError:  # a concurrent upload of the same content won
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
            message = f"stored ({human_size(size)}, {kind.replace('_', ' ')})"
            if notes:
                message += f"; {notes[0]}"
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


# --- stored objects nobody points at ----------------------------------------------------

# What a parse writes beside an artifact's bytes (``parsed_key_for``, ``metrics_key_for``).
_DERIVED_SUFFIXES = (".parse.json.gz", ".metrics.arrow")


def _walk_storage(prefix: str) -> Iterator[str]:
    try:
        dirs, files = storage.listdir(prefix)
    except FileNotFoundError:
        return
    for f in files:
        yield f"{prefix}/{f}"
    for d in dirs:
        yield from _walk_storage(f"{prefix}/{d}")


def artifact_storage_sweep(
    *,
    grace: timedelta | None = None,
    dry_run: bool = False,
    incident_codes: list[str] | None = None,
) -> list[str]:
    """Delete stored objects under ``incidents/`` that no artifact row points at.

    An upload stores its bytes before it writes its row; when the row could not be
    written and it could not be told whether it was (the connection dropped during the
    commit), the bytes are kept rather than risk deleting evidence a row points at.
    This sweep removes such objects once they are older than ``grace`` (default
    ``RANKSCOPE_STORAGE_SWEEP_GRACE_SECONDS``, one hour: far longer than any upload
    takes between storing its bytes and committing its row). An object is referenced
    when it is an artifact's ``storage_key`` or a parse output derived from one.
    ``incident_codes`` limits the sweep to those incidents' folders.
    Returns the keys deleted (or that would be, with ``dry_run``).
    """
    if grace is None:
        grace = timedelta(seconds=settings.RANKSCOPE_STORAGE_SWEEP_GRACE_SECONDS)
    cutoff = timezone.now() - grace
    removed: list[str] = []
    if incident_codes is None:
        try:
            incident_codes, _files = storage.listdir("incidents")
        except FileNotFoundError:
            return removed
    for incident_code in incident_codes:
        prefix = f"incidents/{incident_code}"
        keys = set(
            Artifact.objects.filter(storage_key__startswith=f"{prefix}/").values_list(
                "storage_key", flat=True
            )
        )
        for name in _walk_storage(prefix):
            base = name
            for suffix in _DERIVED_SUFFIXES:
                if name.endswith(suffix):
                    base = name[: -len(suffix)]
                    break
            if name in keys or base in keys:
                continue
            try:
                modified = storage.modified_time(name)
            except (FileNotFoundError, NotImplementedError):
                continue
            if modified >= cutoff:
                continue  # an upload may still be about to write its row
            # Checked again just before deleting: an upload may have committed meanwhile.
            if Artifact.objects.filter(storage_key__in=[name, base]).exists():
                continue
            if not dry_run:
                _delete_quietly(name)
            removed.append(name)
    if removed:
        log.warning(
            "storage sweep: %s %d unreferenced object(s)",
            "would delete" if dry_run else "deleted",
            len(removed),
        )
    return removed


# --- re-enqueueing (the auditor) ---------------------------------------------------


def artifact_enqueue_pending(*, older_than: timedelta | None = None, limit: int = 1000) -> int:
    """Send the parse task of artifacts whose task never reached a worker.

    Picks rows still ``pending`` (``enqueued_at`` null: the broker was down at upload)
    created more than ``older_than`` ago (default 60 s, so uploads in flight are left
    alone); rows ``queued`` (sent at ``enqueued_at``) for more than
    ``RANKSCOPE_PARSE_QUEUED_SECONDS`` while the ingest queue is empty — no worker took
    their message: it was lost with a killed worker or with Redis; a duplicate is a no-op;
    and rows ``parsing`` whose heartbeat (``parse_heartbeat_at``, or ``parse_started_at``
    for a row taken before heartbeats existed) is older than
    ``RANKSCOPE_PARSE_HEARTBEAT_STALE_SECONDS`` (default 60 s): their worker died, or
    the hard time limit stopped them. A row whose parse was already started
    ``MAX_PARSE_ATTEMPTS`` times is failed with the reason instead.
    Safe to run from several auditors at once: the parse task is itself idempotent.
    Returns how many were sent.
    """
    now = timezone.now()
    cutoff = now - (older_than if older_than is not None else timedelta(seconds=60))
    stale = now - timedelta(seconds=settings.RANKSCOPE_PARSE_HEARTBEAT_STALE_SECONDS)
    queued_cutoff = now - timedelta(seconds=settings.RANKSCOPE_PARSE_QUEUED_SECONDS)
    pending = Artifact.objects.filter(
        parse_status=ParseStatus.PENDING, enqueued_at__isnull=True, created_at__lt=cutoff
    )
    lost = Artifact.objects.filter(parse_status=ParseStatus.QUEUED, enqueued_at__lt=queued_cutoff)
    if lost.exists() and _ingest_queue_busy():
        # Messages still wait in the queue: these rows may only be behind them. Once it
        # has drained, whatever is still "queued" was lost (with a killed worker's
        # prefetched message, or with Redis) and is re-sent.
        lost = lost.none()
    stuck = _parsing_gone_quiet(stale)
    stuck_ids: set[int] = set()
    ids = list(pending.values_list("pk", flat=True)[:limit])
    ids += list(lost.values_list("pk", flat=True)[: max(0, limit - len(ids))])
    for pk, attempts in stuck.values_list("pk", "parse_attempts")[: max(0, limit - len(ids))]:
        if attempts >= MAX_PARSE_ATTEMPTS:
            artifact_mark_failed(
                artifact_id=pk,
                reason=(
                    f"its parse was started {attempts} times and never finished (the worker "
                    f"was killed or stopped by the hard time limit of "
                    f"{settings.CELERY_TASK_TIME_LIMIT} s each time)"
                ),
            )
        else:
            ids.append(pk)
            stuck_ids.add(pk)
    enqueuer = _Enqueuer()
    sent = 0
    for pk in ids:
        if not enqueuer.send(pk):
            continue
        sent += 1
        # Re-sent: back to queued (an orphaned parse too, unless a worker took it in the
        # meantime), and it waits a full window before the next re-send.
        rows = Artifact.objects.filter(pk=pk, parse_status=ParseStatus.QUEUED)
        if pk in stuck_ids:
            rows = _parsing_gone_quiet(stale).filter(pk=pk)
        rows.update(parse_status=ParseStatus.QUEUED, enqueued_at=timezone.now())
    return sent


def _ingest_queue_busy() -> bool:
    depth = queue_depth("ingest")
    return bool(depth)


def _parsing_gone_quiet(stale: datetime) -> QuerySet[Artifact]:
    """Rows ``parsing`` whose last sign of life is older than ``stale``."""
    return Artifact.objects.alias(
        last_beat=Coalesce("parse_heartbeat_at", "parse_started_at")
    ).filter(parse_status=ParseStatus.PARSING, last_beat__lt=stale)


# --- parsing --------------------------------------------------------------------------


def parsed_key_for(artifact: Artifact) -> str:
    return f"{artifact.storage_key}.parse.json.gz"


def metrics_key_for(artifact: Artifact) -> str:
    return f"{artifact.storage_key}.metrics.arrow"


def _storage_replace(key: str, fp: IO[bytes]) -> str:
    """Write ``fp`` at exactly ``key`` (a re-run overwrites its own output)."""
    try:
        fp.seek(0)
        saved = storage.save_stream(key, fp, replace=True)
    except storage.ERRORS as exc:
        raise StorageUnavailable(f"could not write {key}: {exc}") from exc
    return saved


def _nccl_state(event: engine.Event) -> str:
    f = event.fields or {}
    bits = [event.kind.replace("_", " ")]
    if f.get("seq") is not None:
        bits.append(f"seq {f['seq']}")
    if f.get("op"):
        bits.append(str(f["op"]))
    if f.get("last_completed") is not None:
        bits.append(f"last completed {f['last_completed']}")
    return " · ".join(bits)[:300]


def rank_digests(result: engine.ParseResult) -> list[dict[str, Any]]:
    """Per-rank digest of one ParseResult: first/last time, last step, last NCCL state."""
    ranks = sorted(set(result.ranks) | set(result.rank_info))
    single_host = result.hosts[0] if len(result.hosts) == 1 else ""
    last_nccl: dict[int, engine.Event] = {}
    counts: dict[int, int] = {}
    for ev in result.events:
        if ev.rank is None:
            continue
        counts[ev.rank] = counts.get(ev.rank, 0) + 1
        if any(h in ev.kind for h in _NCCL_EVENT_HINTS) or "seq" in (ev.fields or {}):
            prev = last_nccl.get(ev.rank)
            if prev is None or ev.line >= prev.line:
                last_nccl[ev.rank] = ev
    out = []
    for r in ranks:
        info = result.rank_info.get(r)
        nccl = last_nccl.get(r)
        out.append(
            {
                "rank": r,
                "host": (result.rank_hosts.get(r) or single_host or "")[:200],
                "first_time": (info.first_time or "") if info else "",
                "last_time": (info.last_time or "") if info else "",
                "last_step": info.last_step if info else None,
                "last_nccl_state": _nccl_state(nccl) if nccl else "",
                "last_nccl_line": nccl.line if nccl else None,
                "event_count": counts.get(r, 0),
            }
        )
    return out


def artifact_parse(*, artifact_id: int) -> str | None:
    """Parse one stored artifact: stream it from storage once, store the digest.

    Contract (the Celery task is a thin wrapper):
    - missing row, or already parsed/failed/rejected → returns None, changes nothing;
    - takes the row with a compare-and-set to ``parsing`` and a fresh fence token; a
      run that lost its token (a redelivered copy took over) writes nothing;
    - outputs go to fixed storage keys (``<key>.parse.json.gz``, ``<key>.metrics.arrow``)
      and the rank digests are replaced in one transaction: running it twice yields
      the same rows;
    - content problems never raise: ``parse_status=failed`` with the engine's reason;
    - storage or database trouble raises (``StorageUnavailable``, ``OperationalError``)
      so the task retries;
    - after commit, the fan-in: when nothing of the incident is pending/queued/parsing,
      the analysis is requested (exactly once per input set).
    Returns the final status.
    """
    token = uuid.uuid4().hex
    now = timezone.now()
    taken = Artifact.objects.filter(pk=artifact_id, parse_status__in=ACTIVE_STATUSES).update(
        parse_status=ParseStatus.PARSING,
        parse_token=token,
        parse_started_at=now,
        parse_heartbeat_at=now,
        parse_attempts=F("parse_attempts") + 1,
    )
    if not taken:
        return None
    # A caller's open transaction holds the row we just took: a heartbeat thread's touch
    # would wait on it, so only beat when running on our own (as a worker does).
    if connection.in_atomic_block:
        return _parse(artifact_id, token)
    with parse_heartbeat(artifact_id=artifact_id, token=token):
        return _parse(artifact_id, token)


def parse_heartbeat(*, artifact_id: int, token: str) -> Heartbeat:
    """The heartbeat of one parse attempt (not started; use it as a context manager).

    Every ``RANKSCOPE_PARSE_HEARTBEAT_SECONDS`` it sets ``parse_heartbeat_at`` on the row,
    only while the row is ``parsing`` under this attempt's fence ``token``: a thread left
    over from an older attempt touches nothing and stops at its next beat.
    """

    def touch() -> bool:
        ours = Artifact.objects.filter(
            pk=artifact_id, parse_token=token, parse_status=ParseStatus.PARSING
        )
        return bool(ours.update(parse_heartbeat_at=timezone.now()))

    return Heartbeat(
        touch,
        interval=settings.RANKSCOPE_PARSE_HEARTBEAT_SECONDS,
        name=f"parse-heartbeat-{artifact_id}",
    )


def _parse(artifact_id: int, token: str) -> str | None:
    artifact = Artifact.objects.select_related("incident").get(pk=artifact_id)
    try:
        fp = storage.open_stream(artifact.storage_key)
    except FileNotFoundError:
        return _finish_failed(artifact, token, "the stored file is missing from storage")
    except Exception as exc:
        raise StorageUnavailable(f"could not open {artifact.storage_key}: {exc}") from exc
    with fp:
        # The viewer's line index is noted on the way: the file is read once.
        indexing = lineindex.IndexingReader(fp)
        result = engine.parse_artifact(indexing, name=artifact.display_name)  # type: ignore[arg-type]
    if indexing.error is not None:  # the store failed mid-read: retry, not "bad file"
        raise StorageUnavailable(f"could not read {artifact.storage_key}: {indexing.error}")

    parsed_key = _write_result(artifact, result)
    index = indexing.payload() if result.kind != "metrics" else None
    if index is not None:
        _storage_replace(lineindex.key_for(artifact.storage_key), io.BytesIO(index))
    metrics_key = ""
    if result.metrics is not None and len(result.metrics):
        with tempfile.TemporaryFile() as tmp:
            result.metrics.write(tmp)
            metrics_key = _storage_replace(metrics_key_for(artifact), tmp)
    status = ParseStatus.FAILED if result.error else ParseStatus.PARSED
    digests = rank_digests(result)
    notes = list(dict.fromkeys([*(artifact.notes or []), *result.warnings[:20]]))
    with transaction.atomic():
        won = Artifact.objects.filter(
            pk=artifact.pk, parse_token=token, parse_status=ParseStatus.PARSING
        ).update(
            parse_status=status,
            parse_error=result.error or "",
            kind=result.kind,
            ranks=sorted(set(result.ranks) | set(result.rank_info)),
            hosts=sorted(set(result.hosts) | set(result.rank_hosts.values())),
            rank_hosts={str(k): v for k, v in sorted(result.rank_hosts.items())},
            line_count=result.lines,
            event_count=sum(result.event_counts.values()),
            notes=notes,
            parsed_key=parsed_key,
            metrics_key=metrics_key,
            parsed_at=timezone.now(),
        )
        if not won:
            return None
        RankDigest.objects.filter(artifact=artifact).delete()
        RankDigest.objects.bulk_create(
            RankDigest(artifact=artifact, incident_id=artifact.incident_id, **d) for d in digests
        )
        transaction.on_commit(lambda: incident_parse_fan_in(incident_id=artifact.incident_id))
    return status


def _write_result(artifact: Artifact, result: engine.ParseResult) -> str:
    with tempfile.TemporaryFile() as tmp:
        with gzip.GzipFile(fileobj=tmp, mode="wb") as gz:
            gz.write(json.dumps(result.to_json(), separators=(",", ":")).encode())
        return _storage_replace(parsed_key_for(artifact), tmp)


def _finish_failed(artifact: Artifact, token: str, reason: str) -> str | None:
    with transaction.atomic():
        won = Artifact.objects.filter(
            pk=artifact.pk, parse_token=token, parse_status=ParseStatus.PARSING
        ).update(parse_status=ParseStatus.FAILED, parse_error=reason, parsed_at=timezone.now())
        if not won:
            return None
        transaction.on_commit(lambda: incident_parse_fan_in(incident_id=artifact.incident_id))
    return ParseStatus.FAILED


def artifact_mark_failed(*, artifact_id: int, reason: str) -> bool:
    """Give up on an artifact's parse (retries exhausted). Compare-and-set; fans in."""
    with transaction.atomic():
        row = Artifact.objects.filter(pk=artifact_id, parse_status__in=ACTIVE_STATUSES).first()
        if row is None:
            return False
        won = Artifact.objects.filter(pk=artifact_id, parse_status=row.parse_status).update(
            parse_status=ParseStatus.FAILED, parse_error=reason, parsed_at=timezone.now()
        )
        if won:
            transaction.on_commit(lambda: incident_parse_fan_in(incident_id=row.incident_id))
    return bool(won)


def _input_fingerprint(rows: list[tuple[int, str]]) -> str:
    h = hashlib.sha256()
    for pk, status in sorted(rows):
        h.update(f"{pk}:{status}\n".encode())
    return h.hexdigest()


def incident_parse_fan_in(*, incident_id: int) -> bool:
    """If nothing of the incident is still pending/queued/parsing, announce it
    (``signals.artifacts_parsed``; the analysis app requests the analysis).

    Exactly once per input set, however many workers finish at the same moment: the
    incident row is locked while the set is checked, and the timeline row recording
    "all parsed" carries the set's fingerprint, so a second finisher sees it and
    stops. ``analysis_request`` is itself idempotent per fingerprint as well.
    Returns True when this call made the request.
    """
    with transaction.atomic():
        incident = Incident.objects.select_for_update().filter(pk=incident_id).first()
        if incident is None:
            return False
        rows = list(
            Artifact.objects.filter(incident=incident)
            .exclude(parse_status=ParseStatus.REJECTED)
            .values_list("pk", "parse_status")
        )
        if not rows or any(s in ACTIVE_STATUSES for _, s in rows):
            return False
        fingerprint = _input_fingerprint(rows)
        if incident.events.filter(kind="ingest.parsed", data__fingerprint=fingerprint).exists():
            return False
        failed = sum(1 for _, s in rows if s == ParseStatus.FAILED)
        message = f"All {len(rows)} uploaded files parsed"
        if failed:
            message += f" ({failed} could not be parsed)"
        incident_event_add(
            incident=incident,
            kind="ingest.parsed",
            message=message,
            data={"fingerprint": fingerprint, "artifacts": len(rows), "failed": failed},
        )
        signals.artifacts_parsed.send(sender=Artifact, incident=incident)
    return True


def artifact_delete(*, artifact: Artifact, actor: AbstractBaseUser | None = None) -> None:
    """Remove an artifact: its row (and rank digests) and every object stored for it.

    The row goes first, in a transaction with a timeline entry, so nothing points at
    bytes that are being removed; objects that cannot be removed are logged (the
    store's own sweep finds them later) and do not undo the deletion.
    """
    keys = [
        artifact.storage_key,
        artifact.parsed_key,
        artifact.metrics_key,
        lineindex.key_for(artifact.storage_key) if artifact.storage_key else "",
    ]
    with transaction.atomic():
        incident_event_add(
            incident=artifact.incident,
            kind="ingest.deleted",
            message=f"Deleted {artifact.display_name}",
            actor=actor,
            data={"artifact": artifact.code, "name": artifact.display_name},
        )
        artifact.delete()
    for key in keys:
        _delete_quietly(key)


def open_for_reading(artifact: Artifact) -> BinaryIO:
    """The stored bytes of an artifact (callers close it)."""
    return storage.open_stream(artifact.storage_key)
