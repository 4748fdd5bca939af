"""Event times: ISO-8601 text without a zone, compared and shifted in one way.

Logs rarely say their zone, and glog stamps have no year: a time whose year is unknown
starts with ``0000-`` and compares only with times of the same unknown year (it is read
as year 2000, and written back as ``0000-``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import lru_cache

from .model import Event


def etime(e: Event) -> str | None:
    """The event's time; for an untimed line (a traceback), the time of the last stamped line
    of the same rank above it in its file (``approx_time``)."""
    return e.time or e.fields.get("approx_time")


# Several analyzers read the time of every event, and a job's thousands of events share far
# fewer distinct stamps: each is parsed once (a datetime is immutable, safe to share).
@lru_cache(maxsize=16384)
def to_dt(iso: str | None) -> datetime | None:
    """ISO text → naive datetime; a ``0000-`` year (unknown) becomes year 2000 so such times compare."""
    if not iso:
        return None
    s = iso.replace("Z", "")
    if s.startswith("0000-"):
        s = "2000" + s[4:]
    try:
        d = datetime.fromisoformat(s)
    except ValueError:
        return None
    return d.replace(tzinfo=None) if d.tzinfo else d


def iso_out(d: datetime | None) -> str | None:
    """datetime → ISO text; the stand-in year 2000 of ``to_dt`` goes back to ``0000-`` (unknown)."""
    if d is None:
        return None
    out = d.isoformat()
    return "0000" + out[4:] if d.year == 2000 else out


def shift_iso(iso: str | None, seconds: float) -> str | None:
    d = to_dt(iso)
    if d is None or not seconds:
        return iso
    out = (d + timedelta(seconds=seconds)).isoformat()
    return "0000" + out[4:] if iso and iso.startswith("0000-") else out


def seconds_between(a: str | None, b: str | None) -> float | None:
    """``b - a`` in seconds; None unless both are times of the same (known or unknown) year."""
    if not a or not b or a[:4] != b[:4]:
        return None
    ta, tb = to_dt(a), to_dt(b)
    if ta is None or tb is None:
        return None
    return (tb - ta).total_seconds()
