"""AIStore daemon logs (targets and proxies) → time range, restarts, stats counters, errors.

File names tell the daemon and when the file starts::

    aistarget.ais-target-3.INFO.0514-210038.1          (MMDD-HHMMSS)
    aisproxy.ais-proxy-1.root.log.INFO.20250514-210038.1  (glog: YYYYMMDD-HHMMSS)

Lines are ``<I|W|E> [YYYY-MM-DD ]HH:MM:SS.micro <file:line> message``; most
have the time only, so the date comes from the file name or the
``Started up at 2025/05/13 19:28:24, host …`` / ``Rotated at …`` header and is
advanced when the clock wraps past midnight. ``common:NNN 14 May 25 21:00 UTC ====``
markers state the timezone. Periodic stats lines (``{get.n:…,err.get.n:…}``) are
kept as counter samples (``facts["aistore"]["stats"]``); E/W lines become events:

- ``ais_pressure`` — resource pressure, disk/memory critical, low memory, forced GC
- ``ais_stream_broken`` — inter-target data mover (``shared-dm``) stream terminated / broken pipe
- ``ais_out_of_bounds`` — ``x-get-batch`` … ``out-of-bounds index``
- ``ais_dropped`` — ``… not found, dropping recv`` (objects dropped after the batch was aborted)
- ``ais_restart`` — the daemon started (a ``Started up at`` header)
- ``ais_error`` / ``ais_warning`` — any other E / W line
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any, BinaryIO

from .._lazy import lazy_compile
from ..detect import Head, Recognizer, basename
from ..model import MAX_EVENTS_PER_KIND_PER_RANK, Event, ParseResult
from . import ParseError, Progress, register_parser
from ._lines import clip, iter_lines

_NAME = lazy_compile(
    r"^ais(?P<role>target|proxy)\.(?P<id>[^.]+(?:\.[^.]+)*?)\.(?:[\w-]+\.log\.)?(?:INFO|WARNING|ERROR)\."
    r"(?P<stamp>(?:\d{8}|\d{4})-\d{6})"
)
_LINE = lazy_compile(
    r"^(?P<l>[IWE]) (?:(?P<d>\d{4}[-\u2011/]\d\d[-\u2011/]\d\d) )?(?P<t>\d\d:\d\d:\d\d)(?:\.(?P<f>\d+))? (?P<m>.*)$"
)
_HEADER = lazy_compile(
    r"^(?P<what>Started up|Rotated) at (?P<d>\d{4}/\d\d/\d\d) (?P<t>\d\d:\d\d:\d\d), host (?P<h>[\w.-]+)"
)
_TZ = lazy_compile(
    r"(?P<d>\d{1,2} [A-Z][a-z]{2} \d\d) (?P<t>\d\d:\d\d) (?P<tz>[A-Z]{2,5}|[+-]\d{4}) ====="
)
_KV = lazy_compile(r"([A-Za-z][\w.-]*):(-?\d+)")
_PRESSURE = lazy_compile(
    r"resource pressure|load=critical|dsk=critical|disk[^,;]*critical|mem=low|memory pressure|low memory|"
    r"oom|free memory|force[d ]?[- ]?gc|FreeOSMemory|out of space|high[- ]wm|housekeeping skipped",
    re.I,
)
MAX_STATS = 4000
_KEEP_COUNTERS = lazy_compile(
    r"^(?:err\.|get\.n$|put\.n$|.*batch.*|.*broken.*|kalive|.*\.err\b|.*\.n\.err|lst\.n$)"
)


def _stamp_start(stamp: str, year: int | None) -> datetime | None:
    try:
        if len(stamp) == 15:  # YYYYMMDD-HHMMSS
            return datetime.strptime(stamp, "%Y%m%d-%H%M%S")
        return datetime.strptime(f"{year or 2000}{stamp}", "%Y%m%d-%H%M%S")
    except ValueError:
        return None


def daemon_of(name: str) -> dict[str, Any]:
    """``{"role", "daemon", "stamp"}`` from an AIS log file name (empty values when unknown)."""
    base = basename(name)
    m = _NAME.match(base)
    if not m:
        role = "target" if "target" in base else ("proxy" if "proxy" in base else "unknown")
        if base.startswith(("aistarget.", "aisproxy.")) and base.count(".") > 1:
            daemon = base.split(".")[1]
        else:  # "ais-target-13.log" (kubectl logs / ais log get saved by hand): the stem
            daemon = base.split(".", 1)[0] or base
        return {"role": role, "daemon": daemon, "stamp": None}
    return {"role": m.group("role"), "daemon": m.group("id"), "stamp": m.group("stamp")}


def classify_ais(level: str, msg: str) -> str | None:
    if "shared-dm" in msg and (
        "broken pipe" in msg or "terminated" in msg or "reset by peer" in msg
    ):
        return "ais_stream_broken"
    if "out-of-bounds index" in msg:
        return "ais_out_of_bounds"
    if "dropping recv" in msg or ("not found" in msg and "dropping" in msg):
        return "ais_dropped"
    if _PRESSURE.search(msg) and level in ("W", "E"):
        return "ais_pressure"
    if level == "E":
        return "ais_error"
    if level == "W":
        return "ais_warning"
    return None


# the first line of every AIS daemon log, whatever the file is called
_AIS_HEADER = lazy_compile(
    r"\s*(?:Started up|Rotated) at \d{4}/\d\d/\d\d \d\d:\d\d:\d\d, host [\w.-]+, go\d"
)


def _is_aistore(h: Head) -> bool:
    return (
        h.base.startswith(("aistarget", "aisproxy", "ais-target", "ais-proxy"))
        or ".ais-target-" in h.base
        # the header's words first: most files are not AIS logs, and have neither
        or ((h.has("Started up at ") or h.has("Rotated at ")) and bool(_AIS_HEADER.match(h.text)))
    )


def _yearless(v: str | None) -> str | None:
    """A time read without a year (placed in 2000) marked ``0000-`` like the text logs do."""
    return "0000" + v[4:] if v and v.startswith("2000-") else v


def _clock(m: re.Match[str], day: datetime | None, last: datetime | None) -> datetime | None:
    """The line's time: its own date when it has one, else the day being read."""
    hms = m.group("t")
    frac = (m.group("f") or "0")[:6].ljust(6, "0")
    if m.group("d"):
        d = m.group("d").replace("\u2011", "-").replace("/", "-")
        try:
            return datetime.strptime(f"{d} {hms}.{frac}", "%Y-%m-%d %H:%M:%S.%f")
        except ValueError:
            return None
    base = last or day or datetime(2000, 1, 1)
    h, mi, s = (int(x) for x in hms.split(":"))
    return base.replace(hour=h, minute=mi, second=s, microsecond=int(frac))


class _Scan:
    """One pass over a daemon log: the clock, the counters and the events kept so far."""

    def __init__(self, result: ParseResult) -> None:
        self.result = result
        self.info = daemon_of(result.name)
        self.stamp = stamp = self.info["stamp"]
        self.year: int | None = int(stamp[:4]) if stamp and len(stamp) == 15 else None
        self.day: datetime | None = _stamp_start(stamp, self.year) if stamp else None
        self.start_from_name = self.day
        self.last_t: datetime | None = None
        self.first_t: datetime | None = None
        self.per_kind: dict[str, int] = {}
        self.last_of: dict[str, Event] = {}
        self.stats: list[dict[str, Any]] = []
        self.tz: str | None = None
        self.seen_lines = 0

    def feed(self, line_no: int, text: str) -> None:
        self.seen_lines += 1
        mh = _HEADER.match(text)
        if mh:
            self._header(mh, line_no, text)
            return
        m = _LINE.match(text)
        mt = _TZ.search(m.group("m") if m else text)
        if mt:
            self.tz = mt.group("tz")
        if m:
            self._line(m, line_no, text)

    def _header(self, mh: re.Match[str], line_no: int, text: str) -> None:
        """``Started up at …`` / ``Rotated at …``: the date, the host, a restart."""
        info, result = self.info, self.result
        if (
            self.first_t is None
            and not _NAME.match(basename(result.name))
            and "ais" not in info["daemon"].lower()
        ):
            info["daemon"] = mh.group("h")  # the name says nothing; the header does
        hd = datetime.strptime(f"{mh.group('d')} {mh.group('t')}", "%Y/%m/%d %H:%M:%S")
        self.year = hd.year
        if self.day is None or (self.day.year == 2000 and self.stamp):
            self.day = hd if self.day is None else self.day.replace(year=hd.year)
            self.start_from_name = self.start_from_name and self.start_from_name.replace(
                year=hd.year
            )
        if self.first_t is None:
            self.first_t = hd
        if mh.group("what") == "Started up":
            self._add(
                Event(
                    kind="ais_restart",
                    line=line_no,
                    text=clip(text),
                    host=mh.group("h"),
                    time=hd.isoformat(),
                    level="I",
                    fields={"daemon": info["daemon"], "role": info["role"]},
                    file=result.name,
                )
            )
        if mh.group("h") not in result.hosts:
            result.hosts.append(mh.group("h"))

    def _tick(self, m: re.Match[str]) -> datetime | None:
        """The line's time, advancing the day when the clock wrapped past midnight."""
        t = _clock(m, self.day, self.last_t)
        if t is not None:
            last_t = self.last_t
            if last_t is not None and t < last_t - timedelta(hours=12) and not m.group("d"):
                t += timedelta(days=1)  # the clock wrapped past midnight
                self.day = (self.day or t) + timedelta(days=1)
            self.last_t = t
            self.first_t = self.first_t or t
        return t

    def _line(self, m: re.Match[str], line_no: int, text: str) -> None:
        """A ``<I|W|E> time message`` line: a stats sample, an event or nothing."""
        t = self._tick(m)
        msg = m.group("m")
        level = m.group("l")
        body = msg.split(" ", 1)[1] if re.match(r"[\w-]+:\d+ ", msg) else msg
        if body.startswith("{") and ":" in body:
            counters = {k: int(v) for k, v in _KV.findall(body) if _KEEP_COUNTERS.match(k)}
            if len(self.stats) < MAX_STATS:
                self.stats.append(
                    {
                        "time": t.isoformat() if t else None,
                        "line": line_no,
                        "counters": counters,
                        "text": clip(text)[:600],
                    }
                )
            return
        kind = classify_ais(level, msg)
        if kind is None:
            return
        info = self.info
        self._add(
            Event(
                kind=kind,
                line=line_no,
                text=clip(text),
                host=info["daemon"],
                time=t.isoformat() if t else None,
                level=level,
                fields={"daemon": info["daemon"], "role": info["role"], "what": msg[:300]},
                file=self.result.name,
            )
        )

    def _add(self, ev: Event) -> None:
        """Keep the first events of a kind, and the last one past the cap."""
        n = self.per_kind.get(ev.kind, 0) + 1
        self.per_kind[ev.kind] = n
        self.result.event_counts[ev.kind] = n
        if n <= MAX_EVENTS_PER_KIND_PER_RANK:
            self.result.events.append(ev)
        else:
            ev.fields["nth"] = n
            self.last_of[ev.kind] = ev

    def finish(self) -> None:
        """The kept last events, year-less times marked, the daemon's facts."""
        result, info = self.result, self.info
        if self.seen_lines == 0:
            raise ParseError("empty AIStore log")
        result.events.extend(
            e for k, e in self.last_of.items() if self.per_kind[k] > MAX_EVENTS_PER_KIND_PER_RANK
        )
        result.events.sort(key=lambda e: e.line)
        fix = _yearless if self.year is None else (lambda v: v)
        if self.year is None:  # no year anywhere: mark times "0000-" like the text logs do
            for e in result.events:
                e.time = _yearless(e.time)
            for s in self.stats:
                s["time"] = _yearless(s["time"])
        if info["daemon"] not in result.hosts:
            result.hosts.insert(0, info["daemon"])
        result.facts["aistore"] = {
            "role": info["role"],
            "daemon": info["daemon"],
            "file_start": fix(_iso(self.start_from_name)),
            "first_time": fix(_iso(self.first_t)),
            "last_time": fix(_iso(self.last_t)),
            "timezone": self.tz,
            "stats": self.stats,
        }
        if self.year:
            result.facts["year"] = self.year


def _iso(d: datetime | None) -> str | None:
    return d.isoformat() if d else None


class AIStoreParser:
    name = "aistore"
    kinds = ("aistore",)
    recognizers = (Recognizer("aistore", 60, _is_aistore, ("Started up at ", "Rotated at ")),)

    def parse(self, stream: BinaryIO, result: ParseResult, progress: Progress | None) -> None:
        scan = _Scan(result)
        for line_no, text in iter_lines(stream, result):
            scan.feed(line_no, text)
        scan.finish()


register_parser(AIStoreParser())
