"""Analyzer plugins and the one loop that runs them.

The interface every analyzer implements::

    class MyAnalyzer:
        name = "my_analyzer"     # stable; shown in the document's "analyzers" list
        phase = "isolation"      # triage | localization | isolation | root_cause | resolution
        order = 60               # analyzers run in ascending order

        def run(self, ctx: Context) -> None:
            # Read ctx.events / ctx.by_kind / ctx.results / ctx.metrics and what earlier
            # analyzers left in ctx.facts; add findings with ctx.add_finding(...) (every
            # finding needs at least one Event as evidence); write document sections
            # (ctx.doc["job"], ctx.doc["localization"], …) only if you own them.

Register with ``register_analyzer(MyAnalyzer())``. Built-in order: job 10,
nccl 20, failures 30, flight_recorder 32, odd_one_out 34, torchrun 35, noise 40, metrics 50, slowdown 52,
verdict 90 (the verdict reads everything before it and writes triage/root_cause/timeline/
recommendations). An analyzer that raises is recorded in
``doc["analysis"]["errors"]`` and the others still run.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..metrics import MetricsTable
from ..model import Event, Facts, Options, ParseResult, evidence

PHASES = ("triage", "localization", "isolation", "root_cause", "resolution")


class Analyzer(Protocol):
    name: str
    phase: str
    order: int

    def run(self, ctx: Context) -> None: ...


_REGISTRY: dict[str, Analyzer] = {}


def register_analyzer(analyzer: Analyzer) -> Analyzer:
    if analyzer.phase not in PHASES:
        raise ValueError(f"unknown phase {analyzer.phase!r}")
    _REGISTRY[analyzer.name] = analyzer
    return analyzer


def registered_analyzers() -> list[Analyzer]:
    _load_builtin()
    return sorted(_REGISTRY.values(), key=lambda a: (a.order, a.name))


def _time_key(e: Event) -> str:
    return e.time or "9999"


@dataclass
class Context:
    """Everything an analyzer may read, and where it writes."""

    results: list[ParseResult]
    options: Options
    events: list[Event] = field(default_factory=list)
    by_kind: dict[str, list[Event]] = field(default_factory=dict)
    metrics: MetricsTable | None = None
    year: int | None = None
    facts: Facts = field(default_factory=Facts)
    doc: dict[str, Any] = field(default_factory=dict)
    findings: list[dict[str, Any]] = field(default_factory=list)
    _kind_of_file: dict[str, str] | None = field(default=None, repr=False)

    @classmethod
    def build(cls, results: Iterable[ParseResult], options: Options) -> Context:
        results = [r for r in results if r is not None]
        ctx = cls(results=results, options=options)
        years = [r.facts.get("year") for r in results if r.facts.get("year")]
        ctx.year = max(set(years), key=years.count) if years else None
        for r in results:
            for e in r.events:
                if not e.file:
                    e.file = r.name
                if e.time and e.time.startswith("0000-") and ctx.year:
                    e.time = f"{ctx.year:04d}{e.time[4:]}"
                ctx.events.append(e)
        # events without a year stay "0000-…": comparable among themselves only
        ctx.events.sort(key=lambda e: (_time_key(e), e.file, e.line))
        for e in ctx.events:
            ctx.by_kind.setdefault(e.kind, []).append(e)
        ctx.metrics = MetricsTable.concat([r.metrics for r in results if r.metrics is not None])
        return ctx

    def kind_of_file(self, name: str) -> str | None:
        """The artifact kind of the file an event came from."""
        if self._kind_of_file is None:
            self._kind_of_file = {r.name: r.kind for r in self.results}
        return self._kind_of_file.get(name)

    def kinds(self, *kinds: str) -> list[Event]:
        out: list[Event] = []
        for k in kinds:
            out.extend(self.by_kind.get(k, []))
        out.sort(key=lambda e: (_time_key(e), e.file, e.line))
        return out

    def add_finding(
        self,
        *,
        phase: str,
        kind: str,
        title: str,
        detail: str = "",
        confidence: float = 0.5,
        ranks: Iterable[int] = (),
        hosts: Iterable[str] = (),
        evidence_events: Iterable[Event],
        **extra: Any,
    ) -> dict[str, Any] | None:
        ev = [evidence(e) for e in evidence_events][:10]
        if not ev:
            return None  # a finding without a quoted line is not a finding
        f = {
            "phase": phase,
            "kind": kind,
            "title": title,
            "detail": detail,
            "confidence": round(float(confidence), 2),
            "ranks": sorted(set(ranks)),
            "hosts": sorted(set(hosts)),
            "evidence": ev,
        }
        f.update(extra)
        self.findings.append(f)
        return f


def run_all(ctx: Context, progress: Any = None) -> list[dict[str, Any]]:
    """The loop: every registered analyzer in order; failures recorded, never fatal."""
    ran = []
    analyzers = registered_analyzers()
    for i, a in enumerate(analyzers):
        t0 = time.perf_counter()
        status = "ok"
        try:
            a.run(ctx)
        except Exception as exc:
            status = f"error: {type(exc).__name__}: {exc}"
        ran.append(
            {
                "name": a.name,
                "phase": a.phase,
                "status": status,
                "seconds": round(time.perf_counter() - t0, 4),
            }
        )
        if progress:
            progress(i + 1, len(analyzers), f"analyzer {a.name}")
    return ran


_loaded = False


def _load_builtin() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    from . import (  # noqa: F401  # noqa: F401, PLC0415
        chain,
        correlation,
        failures,
        flight_recorder,
        hardware,
        isolation,
        job,
        localization,
        memory,
        metrics,
        nccl,
        noise,
        numerics,
        odd_one_out,
        postmortem_inputs,
        proposals,
        slowdown,
        storage,
        torchrun,
        verdict,
    )
