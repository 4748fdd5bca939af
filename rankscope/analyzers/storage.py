"""Storage (AIStore): file time ranges, restarts in the failure window, counter deltas,
errors and warnings, clock alignment with the workers, and the batch-GET failure chain.

The failure window ends at the job's death on the worker side and starts at the
first client-side data/storage symptom (or the first hung collective's start,
``timeout time - Timeout(ms)``), or one hour before the death.

Clock alignment: AIS daemons log in their own zone (the ``… UTC =====``
markers say which); worker logs rarely say. The anchor both sides saw is the
job's death: on the AIS side, the moment the targets' ``get.n`` counter stops
growing. An offset near a whole number of half-hours (±10 min) is a timezone
difference and is applied to every AIS time (``ctx.facts.clock_offsets``,
used by the chain analyzer); a smaller one is reported as skew only.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from ..model import Event
from ..times import iso_out, shift_iso, to_dt
from . import Context, register_analyzer
from ._rc import job_death

CHAIN = (
    ("ais_pressure", "storage target under resource pressure"),
    ("ais_stream_broken", "inter-target data-mover streams broke"),
    ("ais_out_of_bounds", "batch GET hit an out-of-bounds index (objects lost in streaming)"),
    ("ais_dropped", "objects dropped after the batch job was aborted"),
)
CLIENT = ("data_error", "retry_exhausted", "storage_error")
ERR_KEYS = ("err.", "broken")


def _ais_results(ctx: Context) -> list[Any]:
    return [
        r for r in ctx.results if r.kind == "aistore" and r.facts.get("aistore") and not r.error
    ]


def _counter_event(r: Any, s: dict[str, Any], kind: str = "ais_stats") -> Event:
    a = r.facts["aistore"]
    return Event(
        kind=kind,
        line=s["line"],
        text=s["text"],
        host=a["daemon"],
        time=s["time"],
        file=r.name,
        fields={"daemon": a["daemon"], "role": a["role"]},
    )


class _Window:
    """Whether a time falls in the failure window, with some slack (seconds) each side."""

    def __init__(self, start: datetime, end: datetime) -> None:
        self.start, self.end = start, end

    def __call__(self, t: str | None, slack: float = 300) -> bool:
        d = to_dt(t)
        return d is not None and self.start - timedelta(seconds=slack) <= d <= self.end + timedelta(
            seconds=slack
        )


class StorageAnalyzer:
    name = "storage"
    phase = "isolation"
    order = 60
    reads = ("results", "events")
    writes = ("doc.storage", "facts.clock_offsets", "facts.storage_chain", "findings")

    def run(self, ctx: Context) -> None:
        ais = _ais_results(ctx)
        if not ais:
            self._retries(ctx, ais, [])
            return
        out: dict[str, Any] = {"daemons": {}, "offset_seconds": 0.0, "window": None, "chain": []}
        ctx.doc["storage"] = out
        death = job_death(ctx)
        offset = out["offset_seconds"] = self._align_clocks(ctx, ais, death)
        window = self._window(ctx, ais, death)
        if window is None:
            return
        start, end = window
        out["window"] = {"start": iso_out(start), "end": iso_out(end)}
        inside = _Window(start, end)
        by_daemon: dict[str, list[Any]] = {}
        for r in ais:
            by_daemon.setdefault(r.facts["aistore"]["daemon"], []).append(r)
        for daemon, files in sorted(by_daemon.items()):
            out["daemons"][daemon] = self._daemon(ctx, daemon, files, offset, inside)
        self._restarts(ctx, ais, inside)
        # error / warning lines in the window and the chain
        evs = sorted(
            (
                e
                for r in ais
                for e in r.events
                if e.kind.startswith("ais_") and e.kind != "ais_restart" and inside(e.time)
            ),
            key=lambda e: (to_dt(e.time), e.file, e.line),
        )
        counts: dict[str, int] = {}
        for e in evs:
            counts[e.kind] = counts.get(e.kind, 0) + 1
        out["window_counts"] = counts
        chain, client = self._chain(ctx, ais, evs, inside)
        out["chain"] = [
            {"step": label, "time": e.time, "daemon": e.host, "file": e.file, "line": e.line}
            for label, e in chain
        ]
        ctx.facts.storage_chain = chain
        self._report(ctx, chain, client, evs, counts)
        self._retries(ctx, ais, evs)

    def _align_clocks(self, ctx: Context, ais: list[Any], death: Event | None) -> float:
        """Shift every AIS time by the timezone offset to the workers' clock; the offset."""
        offset, anchor = self._offset(ctx, ais, death)
        if offset:
            ctx.facts.clock_offsets.update({r.name: offset for r in ais})
            for r in ais:
                for e in r.events:
                    e.time = shift_iso(e.time, offset)
            ev = [e for e in (death, anchor) if e is not None]
            ctx.add_finding(
                phase="isolation",
                kind="clock_offset",
                title=f"AIStore logs are {offset / 3600:+.1f} h from the worker logs (timezone); aligned",
                detail="Anchor: the job's death in the worker logs vs the moment the targets' GET counter stopped growing."
                f" AIS times were shifted by {offset:+.0f} s before correlating.",
                confidence=0.7,
                evidence_events=ev,
                offset_seconds=offset,
            )
        return offset

    @staticmethod
    def _window(
        ctx: Context, ais: list[Any], death: Event | None
    ) -> tuple[datetime, datetime] | None:
        """The failure window on the worker clock: first client symptom (or hung collective's
        start, or an hour before) to the job's death (or the last AIS line)."""
        end = to_dt(death.time) if death else None
        starts = [
            to_dt(e.time)
            for e in ctx.kinds(*CLIENT, "retry", "connection_error")
            if e.time and e.file not in {r.name for r in ais}
        ]
        for e in ctx.kinds("watchdog_timeout"):
            t, ms = to_dt(e.time), e.fields.get("timeout_ms") or e.fields.get("ran_ms")
            if t and ms:
                starts.append(t - timedelta(milliseconds=ms))
        starts = [s for s in starts if s is not None and (end is None or s <= end)]
        if end is None:
            ais_times = [
                to_dt(e.time)
                for r in ais
                for e in r.events
                if e.kind != "ais_restart" and e.kind != "ais_warning" and e.time
            ]
            ais_times = [t for t in ais_times if t]
            end = max(ais_times) if ais_times else None
        if end is None:
            return None
        start = min(starts) if starts else end - timedelta(hours=1)
        return min(start, end - timedelta(minutes=5)), end

    def _daemon(
        self, ctx: Context, daemon: str, files: list[Any], offset: float, inside: _Window
    ) -> dict[str, Any]:
        """One daemon's file time ranges, its restarts in the window and its counter deltas."""
        files.sort(
            key=lambda r: (
                r.facts["aistore"].get("file_start") or r.facts["aistore"].get("first_time") or ""
            )
        )
        ranges = []
        for i, r in enumerate(files):
            a = r.facts["aistore"]
            s0 = shift_iso(a.get("file_start") or a.get("first_time"), offset)
            nxt = files[i + 1].facts["aistore"] if i + 1 < len(files) else None
            e0 = shift_iso(
                (nxt.get("file_start") or nxt.get("first_time")) if nxt else a.get("last_time"),
                offset,
            )
            ranges.append(
                {
                    "file": r.name,
                    "start": s0,
                    "end": e0,
                    "covers_window": bool(
                        to_dt(s0)
                        and to_dt(e0)
                        and to_dt(s0) <= inside.end
                        and to_dt(e0) >= inside.start
                    ),
                }
            )
            if i > 0 and inside(s0, 0):
                ev = next((e for e in r.events if e.kind == "ais_restart"), None) or Event(
                    kind="ais_restart", line=1, text="", file=r.name, time=s0
                )
                if not ev.text:
                    continue
                ctx.add_finding(
                    phase="isolation",
                    kind="storage_restart",
                    title=f"{daemon} restarted inside the failure window",
                    detail=f"A new log file starts at {s0}; a daemon restart during the failure window is itself significant.",
                    confidence=0.7,
                    hosts=[daemon],
                    evidence_events=[ev],
                )
        deltas = self._deltas(ctx, files, offset, inside.start, inside.end)
        return {
            "role": files[0].facts["aistore"]["role"],
            "files": ranges,
            "deltas": deltas["deltas"],
        }

    @staticmethod
    def _restarts(ctx: Context, ais: list[Any], inside: _Window) -> None:
        """Restart lines inside the window not already reported as a new log file."""
        for r in ais:
            for e in r.events:
                if (
                    e.kind == "ais_restart"
                    and inside(e.time, 0)
                    and not any(
                        f["kind"] == "storage_restart" and f["evidence"][0]["file"] == e.file
                        for f in ctx.findings
                    )
                ):
                    ctx.add_finding(
                        phase="isolation",
                        kind="storage_restart",
                        title=f"{e.host} (re)started inside the failure window",
                        confidence=0.7,
                        hosts=[e.host or ""],
                        evidence_events=[e],
                    )

    @staticmethod
    def _chain(
        ctx: Context, ais: list[Any], evs: list[Event], inside: _Window
    ) -> tuple[list[tuple[str, Event]], list[Event]]:
        """The storage-side steps of ``CHAIN`` in time order, then the client's failure; and
        the client-side errors inside the window."""
        chain: list[tuple[str, Event]] = []
        t_prev = None
        for kind, label in CHAIN:
            cand = [
                e
                for e in evs
                if e.kind == kind
                and (t_prev is None or to_dt(e.time) >= t_prev - timedelta(seconds=60))
            ]
            if cand:
                chain.append((label, cand[0]))
                t_prev = to_dt(cand[0].time)
        client = [
            e
            for e in ctx.kinds(*CLIENT)
            if e.file not in {r.name for r in ais} and inside(e.time, 600)
        ]
        if chain and client:
            after = [
                e
                for e in client
                if t_prev is None
                or (to_dt(e.time) and to_dt(e.time) >= t_prev - timedelta(seconds=60))
            ]
            if after:
                chain.append(
                    ("the client's batch loader failed (fewer objects than requested)", after[0])
                )
        return chain, client

    @staticmethod
    def _report(
        ctx: Context,
        chain: list[tuple[str, Event]],
        client: list[Event],
        evs: list[Event],
        counts: dict[str, int],
    ) -> None:
        """The chain as a root-cause finding, or else the window's error lines."""
        if len(chain) >= 2:
            ctx.add_finding(
                phase="root_cause",
                kind="storage_failure_chain",
                title="AIStore batch-GET failure chain: "
                + " → ".join(lbl.split(" (")[0] for lbl, _ in chain),
                detail="Storage-side causes line up in time ahead of the client errors; fix the storage targets "
                "(disk/memory pressure, inter-target network) rather than the training job.",
                confidence=0.8 if client else 0.65,
                hosts=sorted({e.host for _, e in chain if e.host}),
                evidence_events=[e for _, e in chain],
                category="STORAGE_IO",
            )
        elif evs:
            worst = [e for e in evs if e.level == "E"][:5] or evs[:5]
            ctx.add_finding(
                phase="isolation",
                kind="storage_errors",
                title=f"{sum(counts.values())} AIStore error/warning line(s) inside the failure window",
                detail=", ".join(f"{k}: {v}" for k, v in sorted(counts.items())),
                confidence=0.5,
                hosts=sorted({e.host for e in evs if e.host})[:20],
                evidence_events=worst,
            )

    def _offset(
        self, ctx: Context, ais: list[Any], death: Event | None
    ) -> tuple[float, Event | None]:
        if death is None:
            return 0.0, None
        best: tuple[Any, Any, Any] | None = None  # (time, result, sample) of the last GET increment
        for r in ais:
            a = r.facts["aistore"]
            if a["role"] != "target":
                continue
            prev = None
            for s in a["stats"]:
                g = s["counters"].get("get.n")
                if g is None or not s["time"]:
                    continue
                if prev is not None and g > prev[0]:
                    t = to_dt(s["time"])
                    if best is None or t > best[0]:
                        best = (t, r, s)
                prev = (g, s)
        if best is None:
            return 0.0, None
        diff = (to_dt(death.time) - best[0]).total_seconds()
        half_hours = round(diff / 1800)
        if abs(diff) >= 2700 and abs(diff - half_hours * 1800) <= 600:
            return float(half_hours * 1800), _counter_event(best[1], best[2])
        return 0.0, None

    def _deltas(
        self, ctx: Context, files: list[Any], offset: float, start: Any, end: Any
    ) -> dict[str, Any]:
        samples = [
            (to_dt(shift_iso(s["time"], offset)), r, s)
            for r in files
            for s in r.facts["aistore"]["stats"]
            if s["time"]
        ]
        samples = [x for x in samples if x[0] is not None]
        samples.sort(key=lambda x: x[0])
        if len(samples) < 2:
            return {"deltas": {}}
        before = [x for x in samples if x[0] <= start]
        after = [x for x in samples if x[0] >= end]
        a = before[-1] if before else samples[0]
        b = after[0] if after else samples[-1]
        if a is b:
            return {"deltas": {}}
        ca, cb = a[2]["counters"], b[2]["counters"]
        deltas = {k: cb[k] - ca.get(k, 0) for k in cb if cb[k] - ca.get(k, 0) != 0}
        if cb.get("get.n", 0) < ca.get("get.n", 0):
            deltas = {
                k: v for k, v in cb.items() if v
            }  # counters reset: a restart between the samples
            deltas["_reset"] = 1
        errs = {
            k: v
            for k, v in deltas.items()
            if any(k.startswith(p) or p in k for p in ERR_KEYS) and v > 0
        }
        if errs:
            daemon = a[1].facts["aistore"]["daemon"]
            rate = ""
            if deltas.get("get.n"):
                rate = (
                    f"; GET error rate {deltas.get('err.get.n', 0) / max(1, deltas['get.n']):.1%}"
                )
            ctx.add_finding(
                phase="isolation",
                kind="storage_counters",
                title=f"{daemon}: error counters grew across the failure window ("
                + ", ".join(f"{k} +{v}" for k, v in sorted(errs.items(), key=lambda kv: -kv[1])[:4])
                + ")",
                detail=f"Stats from {a[2]['time']} to {b[2]['time']} (AIS clock){rate}.",
                confidence=0.6,
                hosts=[daemon],
                evidence_events=[_counter_event(a[1], a[2]), _counter_event(b[1], b[2])],
                deltas=errs,
                role=a[1].facts["aistore"]["role"],
            )
        return {"deltas": deltas}

    def _retries(self, ctx: Context, ais: list[Any], ais_evs: list[Event]) -> None:
        retries = [
            e
            for e in ctx.by_kind.get("retry", [])
            if e.fields.get("attempt") and e.fields.get("max")
        ]
        exhausted = list(ctx.by_kind.get("retry_exhausted", []))
        top = max((e.fields["attempt"] for e in retries), default=0)
        if not retries and not exhausted:
            return
        escalated = [e for e in retries if e.fields["attempt"] > 1]
        if not escalated and not exhausted:
            return  # always recovering on the first retry: noise (the noise analyzer says so)
        first = escalated[0] if escalated else exhausted[0]
        last = exhausted[-1] if exhausted else max(retries, key=lambda e: e.fields["attempt"])
        storage_side = [e for e in ais_evs if e.level == "E"][:2]
        ctx.add_finding(
            phase="isolation",
            kind="storage_retry_escalation",
            title=f"Client retries escalated (up to attempt {top}{'/' + str(last.fields.get('max')) if last.fields.get('max') else ''}"
            + (", exhausted" if exhausted else "")
            + ")"
            + (" while AIStore logged errors" if storage_side else ""),
            detail="Retries that climb to their limit are a cause, not noise; they line up with the storage errors quoted.",
            confidence=0.7 if storage_side else 0.55,
            ranks=[e.rank for e in (first, last) if e.rank is not None],
            evidence_events=[first, last, *storage_side],
        )


register_analyzer(StorageAnalyzer())
