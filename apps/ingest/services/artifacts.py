"""Artifacts as stored objects: open one for reading, delete one with everything derived from it."""

from __future__ import annotations

import logging
from typing import BinaryIO

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from apps.incidents.services import incident_event_add
from apps.ingest import lineindex, storage
from apps.ingest.models import Artifact

log = logging.getLogger(__name__)


def _delete_quietly(key: str) -> None:
    if not key:
        return
    try:
        storage.delete(key)
    except Exception:  # cleanup must not hide the real error
        log.warning("could not delete %s from storage", key, exc_info=True)


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
