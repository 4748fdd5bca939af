"""The input set of a run: the incident's artifacts, their fingerprint, their parse results."""

from __future__ import annotations

import hashlib
import logging
from typing import Any

import rankscope as engine
from apps.incidents.models import Incident
from apps.ingest.models import Artifact
from apps.ingest.selectors import artifact_parse_result

logger = logging.getLogger(__name__)


def _incident_artifacts(incident: Incident):
    return Artifact.objects.filter(incident=incident)


def analysis_fingerprint(*, artifacts: list[Any]) -> str:
    """sha256 over the sorted (sha256, parse status) pairs of the inputs + engine version."""
    h = hashlib.sha256(f"engine={engine.ENGINE_VERSION}\n".encode())
    for sha, status in sorted((a.sha256, a.parse_status) for a in artifacts):
        h.update(f"{sha}:{status}\n".encode())
    return h.hexdigest()


def artifact_parse_result_load(*, artifact: Any) -> Any:
    """The artifact's ParseResult, or None; the one place analysis reads parse output."""
    return artifact_parse_result(artifact=artifact)
