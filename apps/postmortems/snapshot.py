"""The post-mortem snapshot: everything known about an incident, frozen as plain JSON.

The draft is built from this dict and the markdown is rendered from it, so editing the
incident (or its hypotheses, fixes, …) later does not rewrite a post-mortem. Sources that
another app has not installed yet (investigation models, analysis runs) are simply absent.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils import timezone

from apps.analysis.models import AnalysisRun
from apps.analysis.selectors import analysis_document_for_incident
from apps.incidents.models import Incident, Phase
from apps.incidents.selectors import incident_phase_durations
from rankscope.document import read_document

SCHEMA = "rankscope.postmortem/v1"
MAX_EVENTS = 300
MAX_LOG_TIMELINE = 60
MAX_FINDINGS = 40

MARKERS = {
    "detection": "Detection",
    "diagnosis": "Diagnosis",
    "repair": "Repair",
    "key_moment": "Key moment",
}


def _iso(value: dt.datetime | dt.date | None) -> str | None:
    return value.isoformat() if value is not None else None


def _user(user: Any) -> str:
    return user.get_username() if user is not None else ""


def analysis_latest(incident: Incident) -> tuple[str, dict[str, Any] | None]:
    """(run code, triage document) of the incident's latest successful analysis, or ("", None)."""
    run = (
        AnalysisRun.objects.filter(incident=incident, status__in=("succeeded", "failed"))
        .exclude(document__isnull=True)
        .order_by("-finished_at", "-pk")
        .only("code", "document")
        .first()
    )
    return (run.code, run.document) if run is not None else ("", None)


def analysis_document(incident: Incident) -> dict[str, Any] | None:
    """The incident's latest triage document, or None (no analysis yet)."""
    return analysis_document_for_incident(incident=incident)


def _related(incident: Incident, name: str) -> list[Any]:
    """Rows of a reverse relation the investigation app defines on Incident (hypotheses,
    why_chains, fixes, action_items, contributing_factors): it is always installed."""
    return list(getattr(incident, name).all())


def _marker_for_event(kind: str, data: dict[str, Any], message: str) -> str:
    text = f"{kind} {message}".lower()
    if kind == "incident.phase":
        to = data.get("to")
        if to in {Phase.ISOLATION, Phase.ROOT_CAUSE}:
            return "diagnosis"
        if to == Phase.RESOLUTION:
            return "repair"
        return ""
    if kind == "incident.status":
        return "repair" if data.get("to") in {"mitigated", "resolved"} else ""
    if "verif" in text:
        return "key_moment"
    if "fix" in text and ("appl" in text or "verified" in text):
        return "repair"
    if "hypothes" in text and ("supported" in text or "refuted" in text):
        return "diagnosis"
    if kind.startswith("analysis") and ("succeeded" in text or "finished" in text):
        return "diagnosis"
    return ""


def _timeline(incident: Incident) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    if incident.problem_started_at:
        entries.append(
            {
                "at": _iso(incident.problem_started_at),
                "marker": "key_moment",
                "kind": "impact.started",
                "message": "Impact started",
                "actor": "",
                "count": 1,
            }
        )
    if incident.detected_at:
        entries.append(
            {
                "at": _iso(incident.detected_at),
                "marker": "detection",
                "kind": "impact.detected",
                "message": "Problem detected",
                "actor": "",
                "count": 1,
            }
        )
    events = (
        incident.events.exclude(kind__startswith="postmortem.")
        .select_related("actor")
        .order_by("at", "pk")
    )
    previous: dict[str, Any] | None = None
    for event in events[: MAX_EVENTS * 4]:
        # Runs of the same kind (1,024 uploads) collapse into one line with a count.
        if previous is not None and previous["kind"] == event.kind and not previous["marker"]:
            marker = _marker_for_event(event.kind, event.data or {}, event.message)
            if not marker:
                previous["count"] += 1
                previous["last"] = event.message
                continue
        entry = {
            "at": _iso(event.at),
            "marker": _marker_for_event(event.kind, event.data or {}, event.message),
            "kind": event.kind,
            "message": event.message,
            "actor": _user(event.actor),
            "count": 1,
        }
        entries.append(entry)
        previous = entry
        if len(entries) >= MAX_EVENTS:
            break
    for entry in entries:
        # a collapsed run says its first and last message (two different files were
        # uploaded, not the first one twice)
        last = entry.pop("last", None)
        if last is not None and last != entry["message"]:
            entry["message"] = f"{entry['message']} … {last}"
    entries.sort(key=lambda e: e["at"] or "")
    return entries


def _log_time(value: Any) -> dt.datetime | None:
    """A time from the logs as an aware datetime (log clocks without a zone are taken as
    UTC, the convention of cluster logs); None when it cannot be read."""
    try:
        when = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def impact_start_from_logs(doc: dict[str, Any] | None) -> dt.datetime | None:
    """First failure (the causal chain's trigger) or first degradation in the logs."""
    view = read_document(doc)
    for link in view.root_cause.get("chain") or []:
        when = _log_time(link.get("time")) if link.get("time") else None
        if when is not None:
            return when
    noise = {"retry", "connection_error"}
    times = [
        t
        for e in view.timeline
        if e.get("time") and e.get("event") not in noise
        for t in [_log_time(e["time"])]
        if t is not None
    ]
    return min(times) if times else None


def detection_from_logs(doc: dict[str, Any] | None) -> dt.datetime | None:
    """When the failure became visible in the logs: the last link of the causal chain
    (the symptom everyone saw, e.g. the watchdog timeout), if it has a time."""
    chain = read_document(doc).root_cause.get("chain") or []
    times = [t for link in chain if link.get("time") for t in [_log_time(link["time"])] if t]
    return max(times) if times else None


def _durations(
    incident: Incident, fix_verified_at: str | None, doc: dict[str, Any] | None = None
) -> dict[str, Any]:
    def seconds(start: dt.datetime | None, end: dt.datetime | None) -> float | None:
        if start is None or end is None:
            return None
        return max(0.0, (end - start).total_seconds())

    verified = dt.datetime.fromisoformat(fix_verified_at) if fix_verified_at else None
    started, started_source = incident.problem_started_at, "entered"
    if started is None:
        started, started_source = impact_start_from_logs(doc), "from the logs"
    detected, detected_source = incident.detected_at, ""
    seen = detection_from_logs(doc)
    opened = incident.created_at
    defaulted = detected is None or (opened and abs((detected - opened).total_seconds()) < 60)
    if seen is not None and defaulted and (detected is None or seen < detected):
        # "Detected" defaulted to when the incident was opened (maybe days after the
        # logs): the logs say when the failure became visible (the watchdog fired).
        detected, detected_source = seen, "from the logs"
    return {
        "milestones": [
            {
                "key": "started",
                "label": "Impact started",
                "at": _iso(started),
                "source": started_source if started else "",
            },
            {
                "key": "detected",
                "label": "Detected",
                "at": _iso(detected),
                "source": detected_source,
            },
            {"key": "mitigated", "label": "Mitigated", "at": _iso(incident.mitigated_at)},
            {"key": "resolved", "label": "Resolved", "at": _iso(incident.resolved_at)},
            {"key": "verified", "label": "Fix verified", "at": fix_verified_at},
        ],
        "time_to_detect_s": seconds(started, detected),
        "time_to_mitigate_s": seconds(detected, incident.mitigated_at),
        "time_to_resolve_s": seconds(detected, incident.resolved_at),
        "time_to_verify_s": seconds(detected, verified),
    }


def _phases(incident: Incident, now: dt.datetime) -> list[dict[str, Any]]:
    leaving_notes: dict[str, list[str]] = {}
    for transition in incident.transitions.order_by("at", "pk"):
        if transition.from_phase and transition.note:
            leaving_notes.setdefault(transition.from_phase, []).append(transition.note)
    stop = None
    if incident.status in {"resolved", "closed"}:
        stop = incident.resolved_at or incident.closed_at
    return [
        {
            "phase": span.phase,
            "label": span.label,
            "seconds": round(span.seconds, 1),
            "entered_at": _iso(span.entered_at),
            "key_action": "; ".join(leaving_notes.get(span.phase, [])),
        }
        # A finished investigation stops the clock of its last phase when it was resolved.
        for span in incident_phase_durations(incident=incident, now=stop or now)
    ]


def _hypotheses(incident: Incident) -> list[dict[str, Any]]:
    return [
        {
            "code": getattr(h, "code", ""),
            "title": h.title,
            "description": getattr(h, "description", ""),
            "expected_if_true": getattr(h, "expected_if_true", ""),
            "test_plan": getattr(h, "test_plan", ""),
            "test_result": getattr(h, "test_result", ""),
            "status": getattr(h, "status", ""),
            "source": getattr(h, "source", ""),
            "evidence": list(getattr(h, "evidence", None) or []),
        }
        for h in _related(incident, "hypotheses")
    ]


def _why_chains(incident: Incident) -> list[dict[str, Any]]:
    chains = []
    for chain in _related(incident, "why_chains"):
        steps = sorted(_related(chain, "steps"), key=lambda s: getattr(s, "order", 0))
        chains.append(
            {
                "title": chain.title,
                "is_chosen": bool(getattr(chain, "is_chosen", False)),
                "steps": [
                    {
                        "why": s.why,
                        "answer": s.answer,
                        "evidence": list(getattr(s, "evidence", None) or []),
                    }
                    for s in steps
                ],
            }
        )
    chains.sort(key=lambda c: not c["is_chosen"])
    return chains


def _fixes(incident: Incident) -> tuple[list[dict[str, Any]], str | None]:
    fixes = []
    verified_at: list[str] = []
    for fix in _related(incident, "fixes"):
        verifications = []
        for v in _related(fix, "verifications"):
            at = _iso(getattr(v, "created_at", None))
            verifications.append(
                {
                    "verdict": v.verdict,
                    "tolerance": getattr(v, "tolerance", None),
                    "baseline": getattr(v, "baseline", None) or {},
                    "post_fix": getattr(v, "post_fix", None) or {},
                    "details": getattr(v, "details", None) or {},
                    "at": at,
                }
            )
            if v.verdict == "FIXED" and at:
                verified_at.append(at)
        fixes.append(
            {
                "code": getattr(fix, "code", ""),
                "kind": getattr(fix, "kind", ""),
                "title": fix.title,
                "detail": getattr(fix, "detail", ""),
                "status": getattr(fix, "status", ""),
                "applied_at": _iso(getattr(fix, "applied_at", None)),
                "applied_by": _user(getattr(fix, "applied_by", None)),
                "verifications": verifications,
            }
        )
    return fixes, (min(verified_at) if verified_at else None)


def _action_items(incident: Incident) -> list[dict[str, Any]]:
    return [
        {
            "code": getattr(item, "code", ""),
            "text": item.text,
            "kind": getattr(item, "kind", ""),
            "checklist": getattr(item, "checklist", ""),
            "owner": _user(getattr(item, "owner", None)),
            "priority": getattr(item, "priority", ""),
            "due_date": _iso(getattr(item, "due_date", None)),
            "status": getattr(item, "status", ""),
        }
        for item in _related(incident, "action_items")
    ]


def _num(value: Any) -> float | None:
    try:
        return float(value) if value is not None and value != "" else None
    except (TypeError, ValueError):
        return None


def _cost_prefill(
    incident: Incident, doc: dict[str, Any] | None, shape: str, now: dt.datetime
) -> dict[str, Any]:
    """Cost-model inputs known from the incident and the triage document."""
    view = read_document(doc)
    job = view.job
    inputs: dict[str, Any] = {
        # one GPU per rank when the incident does not say
        "gpu_count": incident.gpu_count
        or (int(job["world_size"]) if job.get("world_size") else None),
        "gpu_hour_usd": _num(incident.gpu_hour_usd),
        "remaining_run_hours": incident.remaining_run_hours,
    }
    start = incident.problem_started_at or impact_start_from_logs(doc) or incident.detected_at
    end = incident.mitigated_at or incident.resolved_at
    if start and end:
        hours = max(0.0, (end - start).total_seconds() / 3600)
        # A slow job burns GPUs at a fraction; a crashed or hung one at all of them.
        if shape == "slow" or shape == "diverge":
            inputs["degraded_hours"] = round(hours, 4)
        else:
            inputs["downtime_hours"] = round(hours, 4)
    if shape in {"crash", "hang"}:
        inputs["waste_fraction"] = 1.0
    metrics = view.metrics
    baseline = _num(metrics.get("baseline_throughput"))
    degraded = _num(metrics.get("degraded_throughput"))
    if baseline and degraded is not None:
        inputs["baseline_throughput"] = baseline
        inputs["degraded_throughput"] = degraded
        inputs.pop("waste_fraction", None)
    step_time = _num(metrics.get("baseline_step_time") or metrics.get("step_time"))
    if step_time:
        inputs["step_time_seconds"] = step_time
    last_step = _num(job.get("last_step"))
    checkpoint = _num(job.get("last_checkpoint_step"))
    if last_step is not None and checkpoint is not None and last_step >= checkpoint:
        inputs["steps_since_checkpoint"] = int(last_step - checkpoint)
    return {k: v for k, v in inputs.items() if v is not None}


def snapshot_build(*, incident: Incident, now: dt.datetime | None = None) -> dict[str, Any]:
    """Everything the post-mortem shows about ``incident``, as JSON-safe data."""
    now = now or timezone.now()
    doc = analysis_document(incident)
    view = read_document(doc)
    triage, loc, root = dict(view.triage), dict(view.localization), dict(view.root_cause)
    proposals = view.proposals
    findings = list(view.findings)[:MAX_FINDINGS]
    fixes, fix_verified_at = _fixes(incident)
    factors = [getattr(f, "text", str(f)) for f in _related(incident, "contributing_factors")]
    if not factors:
        for chain in proposals.get("five_whys") or []:
            factors.extend(str(x) for x in chain.get("contributing_factors") or [])
    nccl = list(loc.get("nccl") or [])
    loc_summary = {
        "culprit_ranks": list(loc.get("culprit_ranks") or []),
        "culprit_hosts": list(loc.get("culprit_hosts") or []),
        "initiator_ranks": list(loc.get("initiator_ranks") or [])[:64],
        "straggler_ranks": list(loc.get("straggler_ranks") or []),
        "ranks_reporting": len(nccl),
        # The per-rank table scales with the job; keep only the ranks that explain it.
        "nccl": [e for e in nccl if e.get("role") in {"straggler", "initiator"}][:32],
    }
    shape = str(triage.get("shape") or "")
    return {
        "schema": SCHEMA,
        "taken_at": _iso(now),
        "incident": _incident_fields(incident),
        "analysis": {
            "available": doc is not None,
            "engine_version": view.raw.get("engine_version", ""),
            "world_size": view.job.get("world_size"),
        },
        "triage": {
            "shape": shape,
            "category": str(triage.get("category") or ""),
            "severity": str(triage.get("severity") or ""),
            "scope": str(triage.get("scope") or ""),
            "when": str(triage.get("when") or ""),
            "confidence": triage.get("confidence"),
            "summary": str(triage.get("summary") or ""),
        },
        "localization": loc_summary,
        "findings": [
            {
                "phase": f.get("phase", ""),
                "kind": f.get("kind", ""),
                "title": f.get("title", ""),
                "detail": f.get("detail", ""),
                "confidence": f.get("confidence"),
                "ranks": list(f.get("ranks") or [])[:16],
                "hosts": list(f.get("hosts") or [])[:16],
                "evidence": list(f.get("evidence") or [])[:3],
            }
            for f in findings
        ],
        "root_cause_analysis": {
            "category": str(root.get("category") or ""),
            "summary": str(root.get("summary") or ""),
            "chain": list(root.get("chain") or [])[:20],
        },
        "log_timeline": list(view.timeline)[:MAX_LOG_TIMELINE],
        "timeline": _timeline(incident),
        "durations": _durations(incident, fix_verified_at, doc),
        "phases": _phases(incident, now),
        "hypotheses": _hypotheses(incident),
        "proposed_hypotheses": list(proposals.get("hypotheses") or [])[:10],
        "five_whys": _why_chains(incident),
        "proposed_five_whys": list(proposals.get("five_whys") or [])[:3],
        "contributing_factors": factors,
        "fixes": fixes,
        "action_items": _action_items(incident),
        "recommendations": list(view.recommendations)[:20],
        "cost_prefill": _cost_prefill(incident, doc, shape, now),
    }


def _incident_fields(incident: Incident) -> dict[str, Any]:
    """The incident as it stood when the snapshot was taken."""
    return {
        "code": incident.code,
        "title": incident.title,
        "team": incident.team.name,
        "cluster": incident.cluster,
        "job_id": incident.job_id,
        "run_key": incident.run_key,
        "framework": incident.framework,
        "gpu_count": incident.gpu_count,
        "gpu_type": incident.gpu_type,
        "gpu_hour_usd": _num(incident.gpu_hour_usd),
        "remaining_run_hours": incident.remaining_run_hours,
        "severity": incident.severity,
        "status": incident.status,
        "created_at": _iso(incident.created_at),
        "created_by": _user(incident.created_by),
    }


def snapshot_text(snapshot: dict[str, Any]) -> str:
    """The words of a snapshot, for full-text search."""
    parts: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            if value and not value[:4].isdigit():  # skip timestamps
                parts.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(snapshot)
    return "\n".join(parts)[:200_000]
