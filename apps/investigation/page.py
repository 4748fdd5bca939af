"""Context for the guided incident page (templates/incidents/detail.html)."""

from __future__ import annotations

from typing import Any

from apps.analysis.selectors import analysis_seen_for_incident
from apps.incidents.models import PHASE_ORDER, Incident, Phase
from apps.investigation import protocol, selectors
from apps.investigation.views import section_context


def incident_page_context(*, incident: Incident) -> dict[str, Any]:
    doc = selectors.analysis_document(incident=incident)
    findings = selectors.findings_by_phase(doc=doc)
    idx = PHASE_ORDER.index(incident.phase)
    next_phase = PHASE_ORDER[idx + 1] if idx + 1 < len(PHASE_ORDER) else None
    guides = [
        {
            "phase": p,
            "label": Phase(p).label,
            "number": i + 1,
            "guide": protocol.PHASES[p],
            "findings": findings.get(p, []),
            "current": p == incident.phase,
        }
        for i, p in enumerate(PHASE_ORDER)
    ]
    return {
        **section_context(incident=incident, doc=doc),
        "analysis_seen": analysis_seen_for_incident(incident=incident),
        "first": selectors.first_screen(doc=doc),
        "phase_guides": guides,
        "next_phase": next_phase,
        "next_phase_label": Phase(next_phase).label if next_phase else "",
    }
