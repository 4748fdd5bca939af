"""Template helpers for the investigation page."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import format_html, format_html_join

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


# A refused investigation POST comes back with ``failed = {"key": …, "form": bound form}``
# (apps/investigation/views.py::_refuse); these put its errors and the typed text back at
# the fields of the one form on the page that was sent: the form named `key`, for the
# record `ident` ("" for the forms that add a record).


def _failed_form(failed: Any, key: str, ident: Any) -> Any:
    name = f"{key}-{ident}" if ident not in (None, "") else key
    if isinstance(failed, dict) and failed.get("key") == name:
        return failed.get("form")
    return None


@register.simple_tag
def field_errors(failed: Any, key: str, ident: Any, name: str) -> str:
    """The errors of field `name` when that form was refused (an ``errorlist``), else ""."""
    form = _failed_form(failed, key, ident)
    if form is None or name not in form.errors:
        return ""
    return format_html(
        '<ul class="errorlist" role="alert">{}</ul>',
        format_html_join("", "<li>{}</li>", ((e,) for e in form.errors[name])),
    )


@register.simple_tag
def kept(failed: Any, key: str, ident: Any, name: str, default: Any = "") -> Any:
    """What was typed in field `name` when that form was refused, else `default`."""
    form = _failed_form(failed, key, ident)
    if form is None or name not in form.data:
        return "" if default is None else default
    return form.data.get(name, "")


@register.simple_tag
def refused(failed: Any, key: str, ident: Any = "") -> bool:
    """Whether that form is the one refused (to open its <details>, mark its fields)."""
    return _failed_form(failed, key, ident) is not None
