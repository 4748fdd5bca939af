"""Reads for the investigation page. Access is checked once, on the incident
(``incident_get_for_user``); records are then looked up inside that incident only,
so a code from another incident is a 404."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Prefetch
from django.shortcuts import get_object_or_404

from apps.analysis.selectors import analysis_document_for_incident
from apps.incidents.models import Incident
from apps.ingest.selectors import artifact_list_for_incident, artifact_metrics
from apps.investigation import protocol
from apps.investigation.models import (
    ActionItem,
    Fix,
    FixVerification,
    Hypothesis,
    WhyChain,
    WhyStep,
)
from rankscope.document import read_document
from rankscope.metrics import MetricsTable
from rankscope.render import rank_ranges

logger = logging.getLogger(__name__)


def hypothesis_get(*, incident: Incident, code: str) -> Hypothesis:
    return get_object_or_404(Hypothesis, incident=incident, code=code)


def why_chain_get(*, incident: Incident, code: str) -> WhyChain:
    return get_object_or_404(WhyChain, incident=incident, code=code)


def fix_get(*, incident: Incident, code: str) -> Fix:
    return get_object_or_404(Fix, incident=incident, code=code)


def action_item_get(*, incident: Incident, code: str) -> ActionItem:
    return get_object_or_404(ActionItem, incident=incident, code=code)


def analysis_document(*, incident: Incident) -> dict[str, Any] | None:
    """The latest triage document, or None while there is none."""
    return analysis_document_for_incident(incident=incident)


def _is_noise(finding: dict[str, Any]) -> bool:
    return "noise" in str(finding.get("kind") or "")


# A retry that has attempts left ("retrying 1/5", urllib3's "Retrying (Retry(total=4") is
# what the retry analyzer calls noise; an exhausted one is a cause and is kept.
_RETRY_LINE = re.compile(
    r"\b[Rr]etry(?:ing)?\b[^0-9\n]{0,20}(?P<k>\d+)\s*(?:/|of)\s*(?P<n>\d+)"
    r"|Retrying \(Retry\(total=(?P<left>\d+)"
)
_EXHAUSTED = re.compile(r"[Mm]ax retries exceeded|gave up|giving up|exhausted", re.I)


def noise_refs(doc: dict[str, Any] | None) -> set[tuple[str, Any]]:
    """(file, line) of every line the analysis itself calls noise."""
    out: set[tuple[str, Any]] = set()
    for f in read_document(doc).findings:
        if _is_noise(f):
            out.update((str(r.get("file")), r.get("line")) for r in f.get("evidence") or [])
    return out


def is_noise_ref(ref: dict[str, Any], noise: set[tuple[str, Any]]) -> bool:
    """Whether an evidence line is noise: cited as such, or a retry with attempts left."""
    if (str(ref.get("file")), ref.get("line")) in noise:
        return True
    text = str(ref.get("text") or "")
    if _EXHAUSTED.search(text):
        return False
    m = _RETRY_LINE.search(text)
    if m is None:
        return False
    if m["left"] is not None:
        return int(m["left"]) > 0
    return int(m["k"]) < int(m["n"])


def _evidence_of(doc: dict[str, Any], ranks: set[int]) -> list[dict[str, Any]]:
    """Evidence lines of the findings about these ranks (best first), never noise."""
    refs: list[dict[str, Any]] = []
    noise = noise_refs(doc)
    # Localization findings say "where" best; findings that are explicitly noise (retries
    # that recovered) never serve as evidence of where the failure is.
    ordered = sorted(
        read_document(doc).findings,
        key=lambda f: (f.get("phase") != "localization", -(f.get("confidence") or 0)),
    )
    for f in ordered:
        if _is_noise(f) or (ranks and not ranks & set(f.get("ranks") or [])):
            continue
        for ref in f.get("evidence") or []:
            if is_noise_ref(ref, noise):
                continue
            # Several findings often cite the same line; show it once.
            if (ref.get("file"), ref.get("line")) not in {
                (r.get("file"), r.get("line")) for r in refs
            }:
                refs.append(ref)
        if len(refs) >= 3:
            break
    return refs[:3]


# triage.when as a person says it ("one rank · after hours" read as "outside office hours").
_WHEN = {
    "immediately": "at start-up",
    "after_warmup": "after warm-up",
    "after_hours": "after hours of training",
}


def _scope(value: object) -> str:
    """The triage's scope as the first screen says it; nothing when the engine does not know."""
    text = str(value or "").replace("_", " ")
    return "" if text in ("", "unknown") else f"scope: {text}"


@dataclass
class FirstScreen:
    """What broke, where, and what to do first — each claim with its evidence."""

    has_document: bool = False
    shape: str = ""
    category: str = ""
    severity: str = ""
    summary: str = ""
    confidence: float | None = None
    scope: str = ""
    when: str = ""
    what_evidence: list[dict[str, Any]] = field(default_factory=list)
    culprit_ranks: str = ""
    culprit_hosts: list[str] = field(default_factory=list)
    missing_ranks: str = ""
    where_evidence: list[dict[str, Any]] = field(default_factory=list)
    first_action: str = ""
    first_action_evidence: list[dict[str, Any]] = field(default_factory=list)
    world_size: int | None = None
    hosts_count: int = 0


def first_screen(*, doc: dict[str, Any] | None) -> FirstScreen:
    if not doc:
        return FirstScreen()
    view = read_document(doc)
    triage, loc, job, root = view.triage, view.localization, view.job, view.root_cause
    culprits = {int(r) for r in loc.get("culprit_ranks") or [] if isinstance(r, int)}
    what_ev: list[dict[str, Any]] = []
    noise = noise_refs(doc)
    for step in root.get("chain") or []:
        what_ev.extend(r for r in step.get("evidence") or [] if not is_noise_ref(r, noise))
    if not what_ev:
        what_ev = _evidence_of(doc, set())
    recs = view.recommendations
    immediate = [r for r in recs if r.get("kind") == "immediate"] or recs
    first_action = immediate[0].get("text", "") if immediate else ""
    if not first_action:
        fixes = protocol.fixes_for(triage.get("category"), triage.get("shape"))
        if fixes.get("immediate"):
            first_action = fixes["immediate"][0][0]
    return FirstScreen(
        has_document=True,
        shape=str(triage.get("shape") or ""),
        category=str(triage.get("category") or ""),
        severity=str(triage.get("severity") or ""),
        summary=str(triage.get("summary") or root.get("summary") or ""),
        confidence=triage.get("confidence"),
        scope=_scope(triage.get("scope")),
        when=_WHEN.get(str(triage.get("when") or ""), ""),
        what_evidence=what_ev[:3],
        culprit_ranks=rank_ranges(culprits, limit=12),
        culprit_hosts=[str(h) for h in (loc.get("culprit_hosts") or [])][:12],
        missing_ranks=rank_ranges(job.get("ranks_missing"), limit=12),
        where_evidence=_evidence_of(doc, culprits)[:3] if culprits else what_ev[:1],
        first_action=str(first_action),
        first_action_evidence=what_ev[:1],
        world_size=job.get("world_size"),
        hosts_count=len(job.get("hosts") or {}),
    )


def findings_by_phase(*, doc: dict[str, Any] | None) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {p: [] for p in protocol.PHASES}
    # Noise (e.g. retries that recovered) is reported, but after what matters.
    for f in sorted(read_document(doc).findings, key=_is_noise):
        out.setdefault(str(f.get("phase") or "triage"), []).append(f)
    return out


def _dismissed(incident: Incident) -> set[tuple[str, str]]:
    return {
        (str(d.get("kind")), str(d.get("id")))
        for d in incident.events.filter(kind="investigation.proposal_dismissed").values_list(
            "data", flat=True
        )
        if isinstance(d, dict)
    }


def pending_proposals(
    *, incident: Incident, doc: dict[str, Any] | None
) -> dict[str, list[dict[str, Any]]]:
    """Analyzer proposals not yet accepted or dismissed, per kind."""
    proposals = read_document(doc).proposals
    dismissed = _dismissed(incident)
    accepted = {
        "hypotheses": set(
            incident.hypotheses.exclude(proposal_id="").values_list("proposal_id", flat=True)
        ),
        "five_whys": set(
            incident.why_chains.exclude(proposal_id="").values_list("proposal_id", flat=True)
        ),
        "fixes": set(incident.fixes.exclude(proposal_id="").values_list("proposal_id", flat=True)),
        "prevention": set(),
    }
    existing_actions = set(incident.action_items.values_list("text", flat=True))
    out: dict[str, list[dict[str, Any]]] = {}
    for kind in ("hypotheses", "five_whys", "fixes", "prevention"):
        items = []
        for p in proposals.get(kind) or []:
            pid = str(p.get("id") or "")
            if not pid or (kind, pid) in dismissed or pid in accepted[kind]:
                continue
            if kind == "prevention" and p.get("text") in existing_actions:
                continue
            items.append(p)
        out[kind] = items
    return out


def investigation_records(*, incident: Incident) -> dict[str, Any]:
    chains = list(
        incident.why_chains.prefetch_related(
            Prefetch("steps", queryset=WhyStep.objects.order_by("order"))
        )
    )
    return {
        "hypotheses": list(incident.hypotheses.select_related("created_by")),
        "why_chains": chains,
        "chosen_chain": next((c for c in chains if c.is_chosen), None),
        "factors": list(incident.contributing_factors.all()),
        "fixes": list(
            incident.fixes.prefetch_related(
                Prefetch(
                    "verifications",
                    queryset=FixVerification.objects.select_related("created_by").order_by(
                        "-created_at"
                    ),
                )
            )
        ),
        "action_items": list(incident.action_items.select_related("owner")),
    }


def incident_metrics_tables(*, incident: Incident) -> list[tuple[Any, Any]]:
    """(artifact, MetricsTable) for each parsed metrics artifact of the incident."""
    out = []
    for artifact in artifact_list_for_incident(incident=incident):
        if not getattr(artifact, "metrics_key", ""):
            continue
        try:
            table = artifact_metrics(artifact=artifact)
        except Exception:  # a broken stored table must not take the incident page down
            logger.exception("metrics of artifact %s unreadable", artifact.code)
            continue
        if table is not None and len(table):
            out.append((artifact, table))
    return out


def incident_metrics_table(*, incident: Incident) -> Any | None:
    """Every metrics artifact of the incident as one table (None without metrics)."""
    tables = [t for _, t in incident_metrics_tables(incident=incident)]
    if not tables:
        return None
    return MetricsTable.concat(tables)


SUMMARY_METRICS = {
    "step_time": "mean",
    "throughput": "mean",
    "mem_allocated": "max",
    "mem_reserved": "max",
    "mem_peak": "max",
    "comm_time": "mean",
}


def metrics_trial_summary(*, table: Any) -> dict[str, float]:
    """One trial's numbers from a metrics file: mean step time/throughput, peak memory."""
    import numpy as np

    out = {}
    for name, how in SUMMARY_METRICS.items():
        if not table.has(name):
            continue
        vals = np.asarray(table.numpy(name), dtype=float)
        vals = vals[np.isfinite(vals)]
        if len(vals):
            out[name] = float(vals.max() if how == "max" else vals.mean())
    return out
