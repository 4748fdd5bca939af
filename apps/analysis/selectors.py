"""Reads for analysis. Access checks live in the incident selector (404 for outsiders)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from apps.analysis.models import AnalysisRun, Finding, RunStatus
from apps.analysis.services import settle_key
from apps.incidents.models import Incident
from apps.ingest.models import DONE_STATUSES, ParseStatus
from apps.ingest.selectors import incident_parse_counts
from rankscope.document import read_document
from rankscope.render import rank_ranges

PHASES = ("triage", "localization", "isolation", "root_cause", "resolution")
PHASE_LABELS = {
    "triage": "Triage",
    "localization": "Localization",
    "isolation": "Isolation",
    "root_cause": "Root cause",
    "resolution": "Resolution",
}


def analysis_latest_for_incident(*, incident: Incident) -> AnalysisRun | None:
    """The incident's newest run, whatever its status."""
    return incident.analysis_runs.order_by("-created_at", "-pk").first()


def analysis_document_for_incident(*, incident: Incident) -> dict | None:
    """The triage document of the newest run that produced one, or None."""
    run = (
        incident.analysis_runs.filter(document__isnull=False)
        .filter(status__in=(RunStatus.SUCCEEDED, RunStatus.FAILED))
        .order_by("-finished_at", "-pk")
        .only("document")
        .first()
    )
    return run.document if run is not None else None


def _parse_counts(incident: Incident) -> dict[str, int]:
    return dict(incident_parse_counts(incident=incident))


@dataclass
class RankGroup:
    label: str
    ranks: list[int]
    hosts: list[str]

    @property
    def ranges(self) -> str:
        return rank_ranges(self.ranks)


@dataclass
class PhaseFindings:
    phase: str
    label: str
    findings: list[Finding] = field(default_factory=list)


@dataclass
class AnalysisPanel:
    """Everything the analysis panel shows, read in one place."""

    incident: Incident
    run: AnalysisRun | None
    parse_counts: dict[str, int]
    document: dict[str, Any] | None = None
    rank_groups: list[RankGroup] = field(default_factory=list)
    phases: list[PhaseFindings] = field(default_factory=list)
    failed_files: list[dict[str, Any]] = field(default_factory=list)
    analyzer_errors: list[dict[str, Any]] = field(default_factory=list)
    # Every file is parsed but no run covers them yet (the debounce window is open, or
    # the request is on its way): the panel keeps polling so the verdict arrives by itself.
    waiting: bool = False

    @property
    def files_total(self) -> int:
        return sum(self.parse_counts.values())

    @property
    def files_parsed(self) -> int:
        return sum(self.parse_counts.get(s, 0) for s in DONE_STATUSES)

    @property
    def parsing(self) -> bool:
        return self.files_parsed < self.files_total

    @property
    def active(self) -> bool:
        """Something is still moving, so the panel keeps polling."""
        running = self.run is not None and not self.run.is_finished
        return running or self.parsing or self.waiting

    @property
    def state(self) -> str:
        if self.parsing:
            return "parsing"
        if self.waiting:
            return "waiting"
        if self.run is None:
            return "empty"
        if not self.run.is_finished:
            return "running"
        return self.run.status

    @property
    def parse_percent(self) -> int:
        return round(100 * self.files_parsed / self.files_total) if self.files_total else 0

    @property
    def fingerprint(self) -> str:
        """What the incident page last saw: files, parsed files, newest run and its status.

        The page's poll sends it back; an unchanged answer is a 204 (nothing to swap),
        a changed one tells the rest of the page what moved (see the panel view).
        """
        run = f"{self.run.pk}:{self.run.status}" if self.run is not None else "-"
        return f"{self.files_total}.{self.files_parsed}.{run}"


def _run_is_pending(incident: Incident, run: AnalysisRun | None) -> bool:
    """Files are all parsed but the newest run does not cover them (a run is coming)."""
    from django.core.cache import cache

    if cache.get(settle_key(incident.pk)):
        return True
    stored = set(
        incident.artifacts.exclude(parse_status=ParseStatus.REJECTED).values_list("pk", flat=True)
    )
    if not stored:
        return False
    return run is None or not stored <= {int(pk) for pk in run.inputs or []}


def analysis_seen_for_incident(*, incident: Incident) -> str:
    """The panel fingerprint as of now, for a page rendered now (cheap: no findings read)."""
    run = analysis_latest_for_incident(incident=incident)
    return AnalysisPanel(
        incident=incident, run=run, parse_counts=_parse_counts(incident)
    ).fingerprint


def analysis_panel_for_incident(*, incident: Incident) -> AnalysisPanel:
    run = analysis_latest_for_incident(incident=incident)
    panel = AnalysisPanel(incident=incident, run=run, parse_counts=_parse_counts(incident))
    if panel.files_total and not panel.parsing and (run is None or run.is_finished):
        panel.waiting = _run_is_pending(incident, run)
    if run is None or run.document is None:
        return panel
    doc = run.document
    panel.document = doc
    view = read_document(doc)
    loc = view.localization
    hosts_by_rank: dict[int, str] = {}
    for host, ranks in (view.job.get("hosts") or {}).items():
        for r in ranks:
            hosts_by_rank[int(r)] = host
    for key, label, hosts_key in (
        ("culprit_ranks", "Culprit", "culprit_hosts"),
        ("initiator_ranks", "Initiators (own watchdog fired)", None),
        ("notified_ranks", "Notified (saw another rank's dump signal)", None),
        ("straggler_ranks", "Stragglers", None),
    ):
        ranks = [int(r) for r in loc.get(key) or []]
        if not ranks and not (hosts_key and loc.get(hosts_key)):
            continue
        hosts = list(loc.get(hosts_key) or []) if hosts_key else []
        if not hosts:
            hosts = sorted({hosts_by_rank[r] for r in ranks if r in hosts_by_rank})
        panel.rank_groups.append(RankGroup(label=label, ranks=ranks, hosts=hosts))
    by_phase: dict[str, PhaseFindings] = {
        p: PhaseFindings(phase=p, label=PHASE_LABELS[p]) for p in PHASES
    }
    # Noise (e.g. retries that recovered) is reported, but after what matters.
    for f in sorted(run.findings.all(), key=lambda f: "noise" in f.kind):
        by_phase.setdefault(f.phase, PhaseFindings(phase=f.phase, label=f.phase)).findings.append(f)
    panel.phases = [pf for pf in by_phase.values() if pf.findings]
    panel.failed_files = [a for a in view.artifacts if a.get("error")]
    panel.analyzer_errors = [
        a
        for a in view.analysis.get("analyzers") or []
        if str(a.get("status", "")).startswith("error")
    ]
    return panel
