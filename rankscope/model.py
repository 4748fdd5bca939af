"""Plain data the engine passes around: events, parse results, findings, options.

Everything here is JSON-serialisable through ``to_json``/``from_json`` so a
``ParseResult`` can be stored per artifact (by the ingest side) and fed to
``analyze`` later, in another process or on another machine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

# Bounds that keep one ParseResult small whatever the input size.
MAX_EVENTS_PER_KIND_PER_RANK = 20
MAX_EVENT_TEXT = 2000
MAX_WARNINGS = 50


@dataclass(slots=True)
class Event:
    """One notable line (or wrapped message) found in an artifact.

    ``kind`` is a stable machine name (``watchdog_timeout``, ``cuda_oom``…);
    ``fields`` holds what the precise parser extracted (seq, op, pg, counters…).
    ``text`` is the raw line exactly as in the file, prefixes included;
    ``line`` is 1-based. ``time`` is ISO-8601; it starts with ``0000-`` when
    the file did not tell the year (the analysis fills it in from the job).
    """

    kind: str
    line: int
    text: str
    rank: int | None = None
    host: str | None = None
    time: str | None = None
    level: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    file: str = ""

    def to_json(self) -> dict[str, Any]:
        # Not dataclasses.asdict: its recursive deep copy was a tenth of a large job's
        # triage. ``fields`` holds JSON scalars and flat lists; one level of copy is enough.
        d = {name: getattr(self, name) for name in self.__slots__}
        d["fields"] = dict(self.fields)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Event:
        return cls(**d)


@dataclass(slots=True)
class RankInfo:
    """What one file says about one rank, besides its notable events."""

    first_time: str | None = None
    last_time: str | None = None
    last_step: int | None = None
    last_step_line: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RankInfo:
        # results stored by older versions carry fields since dropped (``lines_seen``)
        return cls(**{k: v for k, v in d.items() if k in cls.__slots__})


@dataclass
class ParseResult:
    """The digest of one artifact (one file inside an upload or archive).

    Bounded in size: at most ``MAX_EVENTS_PER_KIND_PER_RANK`` events of one kind
    per rank are kept (the first ones, since the first failure matters most;
    lines a catalogue signature read are counted per signature; for a few kinds
    where the last one matters, and for every signature, the last is kept too);
    ``event_counts`` keeps the true totals.
    ``line_index`` is a sparse list of ``(line_no, byte_offset)`` pairs
    (``line_no`` 1-based, the line starting at ``byte_offset``) so a viewer can
    seek close to a line in a huge file. ``metrics`` is columnar and is not
    part of ``to_json``: store it with ``MetricsTable.write``.
    """

    name: str
    kind: str
    ranks: list[int] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    rank_hosts: dict[int, str] = field(default_factory=dict)
    lines: int = 0
    bytes: int = 0
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    line_index: list[tuple[int, int]] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    event_counts: dict[str, int] = field(default_factory=dict)
    rank_info: dict[int, RankInfo] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    flight_recorder: dict[str, Any] | None = None
    metrics: Any = None  # MetricsTable | None (kept untyped to avoid an import cycle)
    parser: str = ""

    def warn(self, message: str) -> None:
        if len(self.warnings) < MAX_WARNINGS and message not in self.warnings:
            self.warnings.append(message)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "parser": self.parser,
            "ranks": list(self.ranks),
            "hosts": list(self.hosts),
            "rank_hosts": {str(k): v for k, v in self.rank_hosts.items()},
            "lines": self.lines,
            "bytes": self.bytes,
            "error": self.error,
            "warnings": list(self.warnings),
            "line_index": [list(p) for p in self.line_index],
            "events": [e.to_json() for e in self.events],
            "event_counts": dict(self.event_counts),
            "rank_info": {str(k): v.to_json() for k, v in self.rank_info.items()},
            "facts": self.facts,
            "flight_recorder": self.flight_recorder,
            "has_metrics": self.metrics is not None,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any], *, metrics: Any = None) -> ParseResult:
        """Rebuild from ``to_json`` output; pass the metrics table read back separately."""
        return cls(
            name=d["name"],
            kind=d["kind"],
            parser=d.get("parser", ""),
            ranks=list(d.get("ranks", [])),
            hosts=list(d.get("hosts", [])),
            rank_hosts={int(k): v for k, v in d.get("rank_hosts", {}).items()},
            lines=d.get("lines", 0),
            bytes=d.get("bytes", 0),
            error=d.get("error"),
            warnings=list(d.get("warnings", [])),
            line_index=[(int(a), int(b)) for a, b in d.get("line_index", [])],
            events=[Event.from_json(e) for e in d.get("events", [])],
            event_counts=dict(d.get("event_counts", {})),
            rank_info={int(k): RankInfo.from_json(v) for k, v in d.get("rank_info", {}).items()},
            facts=dict(d.get("facts", {})),
            flight_recorder=d.get("flight_recorder"),
            metrics=metrics,
        )


@dataclass(slots=True)
class Options:
    """Knobs of one analysis run. Defaults are what the web and CLI use."""

    straggler_score: float = 0.75  # median step time / rank's own below this → straggler
    comm_ratio: float = 1.5  # a node group's comm time this many times the rest → slow network
    throughput_drop: float = 0.2  # fraction below the run's own baseline that counts as a drop
    immediate_seconds: float = 600.0  # failure this soon after start → "immediately"
    hours_seconds: float = 2 * 3600.0  # failure this long after start → "after_hours"
    immediate_steps: int = 50
    max_timeline: int = 200
    max_nccl_rows: int = 100_000
    # isolation / root cause / resolution
    history_hosts: dict[str, int] = field(
        default_factory=dict
    )  # host → past incidents of this team
    step_time_regression: float = 0.10  # step time this fraction above baseline → regression
    baseline_step_time: float | None = None  # seconds; None → the run's own early steps
    expected_busbw: float | None = None  # GB/s the fabric should give (nccl-tests busbw)
    pipeline_stages: int | None = None  # p, for the bubble fraction (p-1)/(m+p-1)
    micro_batches: int | None = None  # m
    correlation_window: float = 600.0  # seconds before a failure that count as "preceding"


class Cause(TypedDict, total=False):
    """A root-cause candidate: a line that says why the job failed, and how specifically."""

    category: str  # OOM, NETWORK, … (document.Category)
    strength: float  # how specific the line is about the root cause, 0..1
    event: Event
    label: str
    ranks: list[int]  # set when another analyzer narrowed who the verdict names


class NcclState(TypedDict, total=False):
    """The collective picture: one row per rank and process group, and the roles."""

    rows: list[dict[str, Any]]  # document.NcclRow plus ``_ev`` (the row's Event)
    groups: list[dict[str, Any]]  # document.NcclGroup
    targets: dict[str, int | None]  # pg → the seq the others wait on
    own: set[int]  # ranks whose own watchdog fired (initiators)
    notified: set[int]  # ranks that only observed another rank's dump signal
    stragglers: list[int]
    ahead: list[int]
    all_in_collective: bool  # every rank entered the collective and none is silent
    silent: list[int]  # ranks with a log but no NCCL state
    notified_from: dict[int, int | None]  # notified rank → the rank its signal named


class MetricsFacts(TypedDict, total=False):
    """What the per-step metrics say (metrics 50, slowdown 52)."""

    stragglers: list[dict[str, Any]]  # rank, median_step_time, score, robust_z
    median_step_time: float
    comm_by_host: dict[str, float]
    compute_by_host: dict[str, float]
    slow_hosts: list[str]
    equal_compute: bool
    throughput_drop: float
    drop_step: int
    nan_step: int
    slowdown_onset: dict[str, Any]  # step, time, factor
    slowdown: dict[str, Any]  # the slowdown verdict (analyzers/slowdown.py)
    straggler_scores: dict[int, float]
    throttled_gpus: list[dict[str, Any]]


@dataclass
class ChainFacts:
    """The root-cause chain on one aligned timeline (chain 85 → verdict 90)."""

    steps: list[dict[str, Any]] = field(default_factory=list)  # document.ChainLink
    trigger: Event | None = None
    category: str | None = None  # the trigger's category
    label: str = ""
    # the trigger came before the hang (or there is no hang): the root category follows it
    precedes: bool = False
    timeline: list[dict[str, Any]] = field(default_factory=list)  # aligned hardware/storage lines
    clock_offsets: dict[str, float] = field(default_factory=dict)


@dataclass
class Facts:
    """What analyzers conclude for each other, one typed attribute per fact.

    Each attribute names its writer (the analyzer and its order) and its readers; an
    analyzer reads only facts written by analyzers with a lower order. Nothing here is
    in the document as such: the owner of a section assembles it from these facts
    (``rankscope.document`` lists the owners).
    """

    # job (10) → verdict
    job_start: str | None = None  # earliest first timestamp of any rank
    last_step: int | None = None  # highest step in the logs' head/tail facts
    # job (10) → nccl, flight_recorder, odd_one_out, metrics, slowdown, isolation, verdict
    rank_host: dict[int, str] = field(default_factory=dict)
    # job (10) → nccl
    seen: set[int] = field(default_factory=set)  # ranks with a line in some file
    # nccl (20), flight_recorder (32) → odd_one_out, chain, verdict, advice, localization
    nccl: NcclState = field(default_factory=lambda: NcclState())
    # failures (30); odd_one_out (34) and flight_recorder (32) add or narrow → verdict, slowdown
    causes: list[Cause] = field(default_factory=list)
    # failures (30) → localization
    first_error_by_rank: list[dict[str, Any]] | None = None
    first_failure: dict[str, Any] | None = None
    # flight_recorder (32) → localization
    flight_recorder: dict[str, Any] | None = None
    # odd_one_out (34) → localization
    odd_one_out: list[dict[str, Any]] | None = None
    # torchrun (35) → verdict (the earliest failure), localization (every summary line)
    torchrun_first: Event | None = None
    torchrun_failures: list[dict[str, Any]] | None = None
    # retry_noise (40) → verdict
    retry_exhausted: list[Event] = field(default_factory=list)
    # retry_noise (40); no analyzer reads these yet (its findings say it)
    retry_escalated: list[Event] = field(default_factory=list)
    retry_noise: bool = False
    # metrics (50), slowdown (52) → verdict, advice
    metrics: MetricsFacts = field(default_factory=lambda: MetricsFacts())
    # metrics (50), slowdown (52): ranks slow in the metrics → localization.straggler_ranks
    metric_stragglers: set[int] = field(default_factory=set)
    # slowdown (52) → localization
    straggler_scores: dict[str, float] | None = None
    straggler_score_source: str | None = None
    slowdown: dict[str, Any] | None = None
    # slowdown (52) → postmortem_inputs (metrics.files): per metrics file, what fed each measure
    metric_sources: list[dict[str, Any]] | None = None
    # storage (60) → chain
    clock_offsets: dict[str, float] = field(default_factory=dict)
    storage_chain: list[tuple[str, Event]] = field(default_factory=list)
    # chain (85) → verdict
    chain: ChainFacts | None = None
    # verdict (90) → localization
    culprit_ranks: list[int] = field(default_factory=list)
    culprit_hosts: list[str] = field(default_factory=list)


def evidence(e: Event) -> dict[str, Any]:
    """An evidence reference for the document: exact raw text, file, 1-based line.

    ``described: true`` marks a text that describes the evidence (a pickle entry)
    rather than quoting a line of the file.
    """
    ref = {"file": e.file, "line": e.line, "text": e.text}
    if e.fields.get("described"):
        ref["described"] = True
    if not e.time and e.fields.get("approx_time"):
        # the line has no timestamp: its time is that of the previous stamped line of the
        # same rank in the same file
        ref["time_approximate"] = True
    return ref
