"""How the analysis app answers the ingest app's announcements (connected in apps.py)."""

from __future__ import annotations

from typing import Any

from apps.analysis.services import analysis_request
from apps.incidents.models import Incident


def on_artifacts_parsed(sender: Any, *, incident: Incident, **kwargs: Any) -> None:
    """The fan-in: the last parse of an input set requests its analysis."""
    analysis_request(incident=incident, trigger="ingest")
