"""The storage sweep: stored objects no artifact row points at (an upload whose row
could not be written) are deleted once old enough."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from apps.ingest import storage
from apps.ingest.models import Artifact
from apps.ingest.services.artifacts import _delete_quietly

log = logging.getLogger(__name__)


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
