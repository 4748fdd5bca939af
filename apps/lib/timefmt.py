"""Times as people read them on pages and in exported post-mortems."""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings


def format_time(value: Any) -> str:
    """A stored time to the second: "2026-11-21 13:00:03 UTC" for aware times (shown in the
    server's time zone), "2026-11-21 13:00:03" for log times (the logs' own clock)."""
    if value in (None, ""):
        return "—"
    if isinstance(value, dt.datetime):
        when = value
    else:
        try:
            when = dt.datetime.fromisoformat(str(value))
        except ValueError:
            return str(value)
    if when.tzinfo is None:
        return when.strftime("%Y-%m-%d %H:%M:%S")
    when = when.astimezone(ZoneInfo(settings.TIME_ZONE))
    return when.strftime("%Y-%m-%d %H:%M:%S ") + (when.tzname() or "")
