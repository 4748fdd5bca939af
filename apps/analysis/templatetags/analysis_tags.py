"""Template helpers of the analysis panel.

``analysis_evidence_url`` links an evidence reference to the evidence viewer (owned
by the ingest app, whose ``evidence_url`` resolves the file name to the artifact).
"""

from __future__ import annotations

from urllib.parse import urlencode

from django import template
from django.urls import NoReverseMatch

from apps.ingest.selectors import evidence_url
from rankscope.render import rank_ranges as _rank_ranges

register = template.Library()


@register.simple_tag
def analysis_evidence_url(incident, file: str, line: int | None) -> str:
    """The evidence viewer at that file and line; "" when the file is not stored."""
    try:
        return evidence_url(incident, file, line)
    except NoReverseMatch:
        # The viewer's URLs are not mounted (yet): its lookup-by-name address instead.
        query = {"file": file or "", **({"line": str(line)} if line else {})}
        return f"/incidents/{incident.code}/artifacts/?{urlencode(query)}"


@register.filter
def rank_ranges(ranks) -> str:
    return _rank_ranges(list(ranks or []))


@register.filter
def percent(value) -> str:
    try:
        return f"{round(float(value) * 100)}%"
    except (TypeError, ValueError):
        return ""
