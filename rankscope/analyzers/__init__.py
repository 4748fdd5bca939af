"""Analyzer plugins and the one loop that runs them.

An analyzer declares itself in its own module, in one place::

    class MyAnalyzer:
        name = "my_analyzer"     # stable; shown in the document's "analyzers" list
        phase = "isolation"      # triage | localization | isolation | root_cause | resolution
        order = 60               # analyzers run in ascending order
        reads = ("events", "facts.rank_host")        # what it reads
        writes = ("facts.my_fact", "findings")        # what it writes

        def run(self, ctx: Context) -> None:
            # Read ctx.events / ctx.by_kind / ctx.results / ctx.metrics and the facts
            # earlier analyzers left (ctx.facts, a ``Facts``); add findings with
            # ctx.add_finding(...) (every finding needs at least one Event as evidence);
            # write a document section (ctx.doc[...]) only if you are its writer.

    register_analyzer(MyAnalyzer())

``reads``/``writes`` name ``facts.<attribute>`` (``rankscope.model.Facts``),
``doc.<section>`` (or ``doc.isolation.<key>``), ``findings``, ``events``, ``results``
and ``metrics``. A document section has one writer: registering a second one fails.
``tests/analysis/engine/test_document_shape.py`` checks the declarations against the
code and that every fact read is written by an analyzer of lower order.

Every module of this package is imported on first use, so a new analyzer is one new
file. ``registered_analyzers()`` lists them in order (the built-in orders are in
docs/analysis.md). An analyzer that raises is recorded in
``doc["analysis"]["analyzers"]`` and the others still run.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..metrics import MetricsTable
from ..model import Event, Facts, Options, ParseResult, evidence
from ..plugins import load_plugins

PHASES = ("triage", "localization", "isolation", "root_cause", "resolution")


class Analyzer(Protocol):
    name: str
    phase: str
    order: int
    reads: tuple[str, ...]
    writes: tuple[str, ...]

    def run(self, ctx: Context) -> None: ...


_REGISTRY: dict[str, Analyzer] = {}


def register_analyzer(analyzer: Analyzer) -> Analyzer:
    """Add ``analyzer`` to the loop; a document section it writes must have no other writer."""
    if analyzer.phase not in PHASES:
        raise ValueError(f"unknown phase {analyzer.phase!r}")
    for section in section_writes(analyzer):
        other = next(
            (
                a.name
                for a in _REGISTRY.values()
                if a.name != analyzer.name and section in section_writes(a)
            ),
            None,
        )
        if other is not None:
            raise ValueError(f"{analyzer.name} and {other} would both write {section}")
    _REGISTRY[analyzer.name] = analyzer
    return analyzer


def section_writes(analyzer: Analyzer) -> set[str]:
    """The document sections (or ``isolation`` keys) an analyzer declares it writes."""
    return {w for w in getattr(analyzer, "writes", ()) if w.startswith("doc.")}


def registered_analyzers() -> list[Analyzer]:
    _load_builtin()
    return sorted(_REGISTRY.values(), key=lambda a: (a.order, a.name))


def _order_key(e: Event) -> tuple[str, str, int]:
    """Events in time order (untimed last), then file and line: one call per event."""
    return (e.time or "9999", e.file, e.line)


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
        year = f"{ctx.year:04d}" if ctx.year else None
        for r in results:
            for e in r.events:
                if not e.file:
                    e.file = r.name
                if year and e.time and e.time.startswith("0000-"):
                    e.time = f"{year}{e.time[4:]}"
            ctx.events.extend(r.events)
        # events without a year stay "0000-…": comparable among themselves only
        ctx.events.sort(key=_order_key)
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
        out.sort(key=_order_key)
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


def _load_builtin() -> None:
    load_plugins(__name__)
