"""The declared shape of the triage document (schema ``rankscope.triage/v1``).

One module says what every section of the document holds, for the engine that writes
it and for the web code, API and reports that read it. The contract is
``shared/design/TRIAGE-JSON.md``: names may be added, but renaming or removing one
needs a new ``SCHEMA``.

Each section has one writer (the analyzer that owns it); the others contribute
typed facts (``rankscope.model.Facts``) that the owner assembles:

============  ======================================================
section       writer
============  ======================================================
job           ``job`` analyzer (order 10)
triage        ``verdict`` (90), with the chain's trigger rule applied
localization  ``localization`` (91), assembled from ``Facts``
root_cause    ``verdict`` (90)
findings      ``pipeline.analyze`` (every analyzer's ``add_finding``)
timeline      ``verdict`` (90)
recommendations ``verdict`` (90)
isolation     ``isolation`` (65) and the isolation analyzers (one key each)
proposals     ``proposals`` (99)
artifacts, analysis  ``pipeline.analyze``
============  ======================================================

Readers outside the engine wrap a stored document with ``read_document`` and get
typed sections (empty when absent), whatever engine version wrote it.
"""

from collections.abc import Mapping
from typing import Any, Literal, NotRequired, TypedDict, cast

SCHEMA = "rankscope.triage/v1"

Shape = Literal["crash", "hang", "slow", "diverge", "none"]
Category = Literal[
    "OOM", "NETWORK", "NUMERICAL", "HARDWARE", "STORAGE_IO", "DATA", "SOFTWARE", "INFRA", "UNKNOWN"
]
Severity = Literal["CRITICAL", "WARNING", "OK"]
Scope = Literal["all_ranks", "some_ranks", "one_rank", "unknown"]
When = Literal["immediately", "after_warmup", "after_hours", "unknown"]
Role = Literal["straggler", "initiator", "notified", "waiting", "ahead"]
Phase = Literal["triage", "localization", "isolation", "root_cause", "resolution"]


class EvidenceRef(TypedDict):
    """One quoted line: ``text`` exactly as in ``file`` at 1-based ``line``."""

    file: str
    line: int
    text: str
    described: NotRequired[bool]  # a description of a pickle entry, not a quoted line
    time_approximate: NotRequired[bool]  # untimed line: time of the last stamped line above


class Job(TypedDict):
    framework: str
    world_size: int | None
    nodes: int | None
    ranks_seen: list[int]
    ranks_missing: list[int]
    hosts: dict[str, list[int]]
    resumed_from_checkpoint: bool
    world_size_source: NotRequired[str | None]
    last_step: NotRequired[int | None]
    last_checkpoint_step: NotRequired[int | None]


class Triage(TypedDict):
    shape: Shape
    category: Category
    severity: Severity
    scope: Scope
    when: When
    confidence: float
    summary: str


class NcclRow(TypedDict):
    """One rank and process group as its watchdog / flight recorder left it."""

    rank: int
    pg: str
    pg_desc: NotRequired[str | None]
    seq: int | None
    op: str | None
    last_enqueued: int | None
    last_completed: int | None
    timeout_ms: int | None
    role: Role


class NcclGroup(TypedDict):
    """Ranks of one group that share a role and counters (a compact view of ``nccl``)."""

    pg: str
    role: Role
    seq: int | None
    op: str | None
    last_enqueued: int | None
    last_completed: int | None
    ranks: list[int]


class RankEvent(TypedDict):
    """A rank's notable line: ``first_error_by_rank`` and ``first_failure``."""

    rank: int | None
    kind: str
    time: str | None
    file: str
    line: int
    text: str


class TorchrunFailure(TypedDict):
    rank: int | None
    host: str | None
    time: str | None
    exitcode: int | None
    root_cause: bool
    file: str
    line: int


class FirstInitiator(TypedDict):
    """The rank whose own watchdog fired first, where the logs order the firings."""

    rank: int
    time: str | None
    file: str
    line: int
    by: str  # "timestamp" | "print order in one file"


class Localization(TypedDict):
    culprit_ranks: list[int]
    culprit_hosts: list[str]
    initiator_ranks: list[int]  # every rank whose own watchdog fired (or a dump signal named)
    first_initiator: NotRequired[FirstInitiator | None]
    notified_ranks: list[int]
    straggler_ranks: list[int]
    nccl: list[NcclRow]
    nccl_groups: NotRequired[list[NcclGroup]]
    dump_signal_from: NotRequired[list[dict[str, int]]]  # {rank, notified}
    first_error_by_rank: NotRequired[list[RankEvent]]
    first_failure: NotRequired[RankEvent]
    flight_recorder: NotRequired[dict[str, Any]]  # dumps, versions, groups, partial
    odd_one_out: NotRequired[list[dict[str, Any]]]  # attribute, ranks, value, majority…
    torchrun_failures: NotRequired[list[TorchrunFailure]]
    straggler_scores: NotRequired[dict[str, float]]  # rank → peers' median ÷ own time
    straggler_score_source: NotRequired[str]
    slowdown: NotRequired[dict[str, Any]]  # onset, part, ranks, hosts (analyzers/slowdown.py)


class ChainLink(TypedDict):
    stage: str  # trigger, storage, leaves_loop, collective_hangs, watchdogs_fire, taken_down
    time: str | None
    rank: int | None
    host: str | None
    event: str
    evidence: list[EvidenceRef]
    time_inherited: NotRequired[bool]


class RootCause(TypedDict):
    category: Category
    summary: str
    chain: list[ChainLink]
    trigger: NotRequired[str | None]
    decided_by: NotRequired[str]
    chain_trigger: NotRequired[dict[str, Any]]  # category, event + the evidence ref
    category_from: NotRequired[str]
    clock_offsets: NotRequired[dict[str, float]]


class Finding(TypedDict):
    phase: Phase
    kind: str
    title: str
    detail: str
    confidence: float
    ranks: list[int]
    hosts: list[str]
    evidence: list[EvidenceRef]
    category: NotRequired[str]
    noise: NotRequired[bool]
    action: NotRequired[str]


class TimelineEntry(TypedDict):
    time: str | None
    rank: int | None
    host: NotRequired[str | None]
    file: str
    line: int
    event: str
    text: NotRequired[str]
    clock_offset_seconds: NotRequired[float]


class Recommendation(TypedDict):
    kind: Literal["immediate", "structural", "prevention"]
    text: str


class MemoryRank(TypedDict):
    """The memory analyzer's curve of one rank (``isolation.memory.ranks``)."""

    file: str
    rank: int
    shape: Literal["flat", "staircase", "slope", "fragmentation", "irregular", "unknown"]
    peak: float
    start: float
    capacity_gib: NotRequired[float]
    headroom: NotRequired[float]
    full_at_step: NotRequired[int]


class MemoryVerdict(TypedDict):
    shapes: dict[str, int]  # shape → number of ranks
    ranks: list[MemoryRank]


class Isolation(TypedDict, total=False):
    memory: MemoryVerdict
    correlation: dict[str, Any]
    nccl_tests: list[dict[str, Any]]
    bisection: list[dict[str, Any]]
    pipeline_bubble: dict[str, Any]
    numerics: dict[str, Any]


class Proposals(TypedDict):
    hypotheses: list[dict[str, Any]]
    five_whys: list[dict[str, Any]]
    fixes: list[dict[str, Any]]
    prevention: list[dict[str, Any]]


class Artifact(TypedDict):
    name: str
    kind: str
    parser: str
    lines: int
    bytes: int
    ranks: int
    error: str | None
    warnings: list[str]


class AnalyzerRun(TypedDict):
    name: str
    phase: str
    status: str  # "ok" or "error: <type>: <message>"
    seconds: float


class Analysis(TypedDict):
    analyzers: list[AnalyzerRun]
    seconds: float
    scanner: list[str]


class TriageDocument(TypedDict):
    schema: str
    engine_version: str
    job: Job
    triage: Triage
    localization: Localization
    root_cause: RootCause
    findings: list[Finding]
    timeline: list[TimelineEntry]
    recommendations: list[Recommendation]
    isolation: NotRequired[Isolation]
    proposals: NotRequired[Proposals]
    storage: NotRequired[dict[str, Any]]  # AIStore chain and clock offset
    hardware: NotRequired[dict[str, Any]]  # Xid table, GPUs, repeat offenders
    metrics: NotRequired[dict[str, Any]]  # metrics files and what fed each measure
    artifacts: NotRequired[list[Artifact]]
    analysis: NotRequired[Analysis]


def empty_job() -> Job:
    return {
        "framework": "unknown",
        "world_size": None,
        "nodes": None,
        "ranks_seen": [],
        "ranks_missing": [],
        "hosts": {},
        "resumed_from_checkpoint": False,
    }


def empty_triage() -> Triage:
    return {
        "shape": "none",
        "category": "UNKNOWN",
        "severity": "OK",
        "scope": "unknown",
        "when": "unknown",
        "confidence": 0.0,
        "summary": "",
    }


def empty_localization() -> Localization:
    return {
        "culprit_ranks": [],
        "culprit_hosts": [],
        "initiator_ranks": [],
        "notified_ranks": [],
        "straggler_ranks": [],
        "nccl": [],
    }


def empty_root_cause() -> RootCause:
    return {"category": "UNKNOWN", "summary": "", "chain": []}


def empty_document(engine_version: str) -> TriageDocument:
    return {
        "schema": SCHEMA,
        "engine_version": engine_version,
        "job": empty_job(),
        "triage": empty_triage(),
        "localization": empty_localization(),
        "root_cause": empty_root_cause(),
        "findings": [],
        "timeline": [],
        "recommendations": [],
    }


class DocumentView:
    """Typed read access to a stored triage document.

    The web code, the API and the reports read the document through this instead of
    digging by string keys. A missing document or section (an analysis that has not run,
    a document from an older engine) reads as an empty section: ``.get`` on it gives
    ``None`` for what is not there, as it would on the stored JSON.
    """

    __slots__ = ("raw",)

    def __init__(self, raw: Mapping[str, Any] | None) -> None:
        self.raw: Mapping[str, Any] = raw or {}

    def __bool__(self) -> bool:
        return bool(self.raw)

    def _dict(self, key: str) -> Any:
        value = self.raw.get(key)
        return value if isinstance(value, dict) else {}

    def _list(self, key: str) -> Any:
        value = self.raw.get(key)
        return value if isinstance(value, list) else []

    @property
    def job(self) -> Job:
        return cast(Job, self._dict("job"))

    @property
    def triage(self) -> Triage:
        return cast(Triage, self._dict("triage"))

    @property
    def localization(self) -> Localization:
        return cast(Localization, self._dict("localization"))

    @property
    def root_cause(self) -> RootCause:
        return cast(RootCause, self._dict("root_cause"))

    @property
    def findings(self) -> list[Finding]:
        return cast(list[Finding], self._list("findings"))

    @property
    def timeline(self) -> list[TimelineEntry]:
        return cast(list[TimelineEntry], self._list("timeline"))

    @property
    def recommendations(self) -> list[Recommendation]:
        return cast(list[Recommendation], self._list("recommendations"))

    @property
    def isolation(self) -> Isolation:
        return cast(Isolation, self._dict("isolation"))

    @property
    def proposals(self) -> Proposals:
        return cast(Proposals, self._dict("proposals"))

    @property
    def artifacts(self) -> list[Artifact]:
        return cast(list[Artifact], self._list("artifacts"))

    @property
    def analysis(self) -> Analysis:
        return cast(Analysis, self._dict("analysis"))

    @property
    def metrics(self) -> dict[str, Any]:
        """What the metrics files gave: ``files``, ``step_time``, baselines (post-mortem inputs)."""
        return cast(dict[str, Any], self._dict("metrics"))

    @property
    def memory(self) -> MemoryVerdict | None:
        """The memory analyzer's verdict on the memory curves, when metrics had memory."""
        return self.isolation.get("memory")

    @property
    def memory_shape(self) -> str | None:
        """The job's memory-curve shape: the most telling shape any rank has."""
        mem = self.memory
        if not mem or not mem.get("shapes"):
            return None
        order = {s: i for i, s in enumerate(MEMORY_SHAPE_ORDER)}
        return min(mem["shapes"], key=lambda s: order.get(s, len(order)))


# the shapes the memory analyzer names, the most telling first
MEMORY_SHAPE_ORDER = ("staircase", "fragmentation", "slope", "irregular", "flat", "unknown")


def read_document(raw: Mapping[str, Any] | None) -> DocumentView:
    """A stored (or absent) triage document, for reading its sections typed."""
    return DocumentView(raw)
