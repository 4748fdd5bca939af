"""Writes for uploaded artifacts: store (streamed, hashed, deduplicated), parse, fan in.

Bytes never move inside a database transaction and are never held whole in memory:
a file (or archive member) is streamed into Django storage chunk by chunk while its
sha256 is computed; only then is its row written, in a short transaction that
enqueues the parse task on commit.

A package by entity; every public name is re-exported here, so callers keep writing
``from apps.ingest import services`` and ``services.artifact_upload(...)``.
"""

from apps.ingest.services.artifacts import (
    artifact_delete,
    open_for_reading,
)
from apps.ingest.services.audit import (
    MAX_PARSE_ATTEMPTS,
    artifact_enqueue_pending,
)
from apps.ingest.services.parse import (
    artifact_mark_failed,
    artifact_parse,
    incident_parse_fan_in,
    metrics_key_for,
    parse_heartbeat,
    parsed_key_for,
    rank_digests,
)
from apps.ingest.services.sweep import (
    artifact_storage_sweep,
)
from apps.ingest.services.upload import (
    CHUNK,
    HEAD_BYTES,
    MAX_NAME,
    QUEUE_DOWN_NOTE,
    UploadOutcome,
    artifact_upload,
    ingest_limits,
    sanitize_name,
    store_stream,
)

__all__ = [
    "CHUNK",
    "HEAD_BYTES",
    "MAX_NAME",
    "MAX_PARSE_ATTEMPTS",
    "QUEUE_DOWN_NOTE",
    "UploadOutcome",
    "artifact_delete",
    "artifact_enqueue_pending",
    "artifact_mark_failed",
    "artifact_parse",
    "artifact_storage_sweep",
    "artifact_upload",
    "incident_parse_fan_in",
    "ingest_limits",
    "metrics_key_for",
    "open_for_reading",
    "parse_heartbeat",
    "parsed_key_for",
    "rank_digests",
    "sanitize_name",
    "store_stream",
]
