"""Template helpers for the investigation page."""

from __future__ import annotations

from typing import Any

from django import template

from apps.ingest.selectors import evidence_url
from apps.lib.timefmt import format_time

register = template.Library()


@register.simple_tag
def evidence_href(incident: Any, ref: Any) -> str:
    """Link to an evidence ref's line in the evidence viewer ("" when it cannot be resolved).

    Delegates to the ingest app's ``evidence_url``; refs without a file or line (notes
    people typed) have no link.
    """
    if not isinstance(ref, dict) or not ref.get("file") or not ref.get("line"):
        return ""
    try:
        return evidence_url(incident, ref["file"], ref["line"]) or ""
    except Exception:  # an unresolvable file is shown without a link, not as an error page
        return ""


@register.filter
def pct(value: Any) -> str:
    try:
        return f"{float(value) * 100:+.1f} %"
    except (TypeError, ValueError):
        return "—"


@register.filter
def lookup(mapping: Any, key: Any) -> Any:
    try:
        return mapping.get(key)
    except AttributeError:
        return None


@register.filter
def to_second(value: Any) -> str:
    """A stored time (ISO text or datetime) to the second, with its zone when it has one."""
    return format_time(value)


@register.filter
def why_question(value: Any) -> str:
    """A Why level's question with one "Why" in front."""
    text = str(value or "").strip()
    return text if text.lower().startswith("why") else f"Why? {text}"
