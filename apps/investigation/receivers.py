"""How the investigation app fills pages of the apps below it (connected in apps.py)."""

from __future__ import annotations

from typing import Any

from apps.incidents.models import Incident
from apps.investigation.page import incident_page_context


def incident_page(sender: Any, *, incident: Incident, **kwargs: Any) -> dict[str, Any]:
    """The guided sections of the incident page: first screen, phases, findings."""
    return incident_page_context(incident=incident)
