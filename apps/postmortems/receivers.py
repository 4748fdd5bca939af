"""How the postmortems app answers the analysis app's signals (connected in apps.py)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from apps.analysis.models import AnalysisRun
from apps.incidents.models import Incident
from apps.postmortems.models import IncidentSignature
from apps.postmortems.services import incident_signature_refresh


def host_history(sender: Any, *, incident: Incident, **kwargs: Any) -> dict[str, int]:
    """How many of this team's other incidents blamed each host (for "repeat offenders")."""
    counts: Counter[str] = Counter()
    rows = IncidentSignature.objects.filter(team_id=incident.team_id).exclude(
        incident_id=incident.pk
    )
    for hosts in rows.values_list("hosts", flat=True):
        counts.update({str(h) for h in hosts or []})
    return dict(counts)


def on_analysis_succeeded(
    sender: Any, *, run: AnalysisRun, incident: Incident, **kwargs: Any
) -> None:
    """Keep the incident's failure signature current so similar-incident search sees it."""
    incident_signature_refresh(incident=incident)
