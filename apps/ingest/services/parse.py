"""Parsing one artifact (fenced, heartbeat, outputs at fixed keys) and the fan-in that
announces when every file of an incident is parsed."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import logging
import tempfile
import uuid
from typing import IO, Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

import rankscope as engine
from apps.incidents.models import Incident
from apps.incidents.services import incident_event_add
from apps.ingest import lineindex, signals, storage
from apps.ingest.models import ACTIVE_STATUSES, Artifact, ParseStatus, RankDigest
from apps.ingest.storage import StorageUnavailable
from apps.lib.heartbeat import Heartbeat

log = logging.getLogger(__name__)


_NCCL_EVENT_HINTS = ("nccl", "watchdog", "collective", "comm_", "async_exception", "blocking_wait")


# Two statements every parse runs, written out once (names from the model, values bound):
# the take, and the look for files still to parse. The ORM compiles a query anew on every
# call, which costs the worker several times the round trip itself. (No value is put into
# the text: ``S608`` is told so.)
_ACTIVE_IN = ", ".join(["%s"] * len(ACTIVE_STATUSES))
_TAKE_SQL = (
    f'UPDATE "{Artifact._meta.db_table}" SET "parse_status" = %s, "parse_token" = %s, '  # noqa: S608
    '"parse_started_at" = %s, "parse_heartbeat_at" = %s, "parse_attempts" = "parse_attempts" + 1 '
    f'WHERE "{Artifact._meta.pk.column}" = %s AND "parse_status" IN ({_ACTIVE_IN}) RETURNING *'
)
_ANY_ACTIVE_SQL = (
    f'SELECT EXISTS (SELECT 1 FROM "{Artifact._meta.db_table}" '  # noqa: S608
    f'WHERE "incident_id" = %s AND "parse_status" IN ({_ACTIVE_IN}))'
)


# The rank digests of a won parse, inserted as rows of values (no model instances and no
# ids returned: nothing reads them back); a batch stays well under PostgreSQL's 65,535
# bound parameters.
_DIGEST_COLUMNS = (
    "artifact_id",
    "incident_id",
    "rank",
    "host",
    "first_time",
    "last_time",
    "last_step",
    "last_nccl_state",
    "last_nccl_line",
    "event_count",
)
_DIGEST_ROW = "(" + ", ".join(["%s"] * len(_DIGEST_COLUMNS)) + ")"
_DIGEST_NAMES = ", ".join('"' + c + '"' for c in _DIGEST_COLUMNS)
_DIGEST_INSERT = f'INSERT INTO "{RankDigest._meta.db_table}" ({_DIGEST_NAMES}) VALUES '  # noqa: S608
_DIGEST_BATCH = 1000


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
    artifact = _take(artifact_id, token)
    if artifact is None:
        return None
    # A caller's open transaction holds the row we just took: a heartbeat thread's touch
    # would wait on it, so only beat when running on our own (as a worker does).
    if connection.in_atomic_block:
        return _parse(artifact, token)
    with parse_heartbeat(artifact_id=artifact_id, token=token):
        return _parse(artifact, token)


def _take(artifact_id: int, token: str) -> Artifact | None:
    """Take the row with a compare-and-set to ``parsing`` under ``token``, and read it back
    as it now is, in one statement (``UPDATE … RETURNING``: a round trip fewer than an
    update and a get). None when it is not to be parsed."""
    now = timezone.now()
    params = [ParseStatus.PARSING, token, now, now, artifact_id, *ACTIVE_STATUSES]
    return next(iter(Artifact.objects.raw(_TAKE_SQL, params)), None)


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


def _parse(artifact: Artifact, token: str) -> str | None:
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
        if artifact.parse_attempts > 1:
            # only a won parse writes digests, so the first attempt has none to replace
            RankDigest.objects.filter(artifact=artifact).delete()
        _insert_digests(artifact, digests)
        transaction.on_commit(lambda: incident_parse_fan_in(incident_id=artifact.incident_id))
    return status


def _insert_digests(artifact: Artifact, digests: list[dict[str, Any]]) -> None:
    """Insert the rank digests of one artifact (``bulk_create`` compiled the same INSERT
    through the ORM on every parse: more CPU than the statement itself)."""
    names = _DIGEST_COLUMNS[2:]
    with connection.cursor() as cursor:
        for start in range(0, len(digests), _DIGEST_BATCH):
            batch = digests[start : start + _DIGEST_BATCH]
            params: list[Any] = []
            for d in batch:
                params += [artifact.pk, artifact.incident_id, *(d[n] for n in names)]
            cursor.execute(_DIGEST_INSERT + ", ".join([_DIGEST_ROW] * len(batch)), params)


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


def _any_active(incident_id: int) -> bool:
    """Whether a file of the incident is still to parse: the look every parse ends with."""
    with connection.cursor() as cursor:
        cursor.execute(_ANY_ACTIVE_SQL, [incident_id, *ACTIVE_STATUSES])
        return bool(cursor.fetchone()[0])


def incident_parse_fan_in(*, incident_id: int) -> bool:
    """If nothing of the incident is still pending/queued/parsing, announce it
    (``signals.artifacts_parsed``; the analysis app requests the analysis).

    Exactly once per input set, however many workers finish at the same moment: the
    incident row is locked while the set is checked, and the timeline row recording
    "all parsed" carries the set's fingerprint, so a second finisher sees it and
    stops. ``analysis_request`` is itself idempotent per fingerprint as well.
    Returns True when this call made the request.

    Every parse ends here, so a burst of N files would lock the incident and read its N
    rows N times: a cheap unlocked look first tells the common case (other files still
    to parse) and stops. It cannot miss the last one: each finisher looks after its own
    commit, so of two finishing together, the one that looks last sees both done.
    """
    if _any_active(incident_id):
        return False
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
