"""``{% evidence_url incident ref.file ref.line %}``: a link to the raw line, or ""."""

from __future__ import annotations

from django import template
from django.conf import settings

from apps.ingest import selectors
from rankscope.archives import human_size

register = template.Library()


@register.simple_tag
def evidence_url(incident, file: str, line: int | str | None = None) -> str:
    if incident is None or not file:
        return ""
    return selectors.evidence_url(incident, file, line)


@register.simple_tag
def ingest_max_file_size() -> str:
    return human_size(settings.RANKSCOPE_MAX_FILE_BYTES)


@register.simple_tag
def ingest_max_file_bytes() -> int:
    return settings.RANKSCOPE_MAX_FILE_BYTES
