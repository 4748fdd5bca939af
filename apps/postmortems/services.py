# ruff: noqa: RUF001, RUF003 — × and − are the symbols people read in a formula
"""Writes for post-mortems. Each is one transaction that also appends to the incident timeline.

Access (is this user in the team?) is checked by the selectors the views call first; the
rules about *which* member may do what (only leads approve and publish) live here, so
every caller (page, API) gets them.
"""

from __future__ import annotations

import hashlib
import json
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.contrib.postgres.search import SearchVector
from django.db import connection, transaction
from django.db.models import F, Value
from django.utils import timezone

from apps.accounts.selectors import user_is_team_lead
from apps.incidents.models import Incident
from apps.incidents.services import incident_event_add
from apps.ingest.selectors import evidence_url
from apps.postmortems import markdown, similarity
from apps.postmortems.cost import CostInputError, CostInputs, CostResult, cost_compute
from apps.postmortems.formatting import fmt_usd
from apps.postmortems.models import (
    EDITABLE_FIELDS,
    LEAD_ONLY_TARGETS,
    SECTIONS,
    STATUS_TRANSITIONS,
    Approval,
    IncidentSignature,
    PostMortem,
    PostMortemRevision,
    ReviewComment,
    Status,
)
from apps.postmortems.selectors import similar_incidents
from apps.postmortems.snapshot import analysis_latest, snapshot_build, snapshot_text

MAX_TEXT = 50_000


class ReviewError(Exception):
    """The requested change is not allowed now, or not by this person."""


def _actor(actor: AbstractBaseUser | None) -> AbstractBaseUser | None:
    return actor if actor is not None and actor.is_authenticated else None


def _money(value: float | None) -> Decimal | None:
    if value is None:
        return None
    return Decimal(str(value)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def postmortem_cost(*, postmortem: PostMortem) -> tuple[CostResult | None, str]:
    """The cost computed from the stored inputs, or (None, why not)."""
    try:
        return cost_compute(CostInputs.from_json(postmortem.cost_inputs)), ""
    except (CostInputError, TypeError, ValueError) as exc:
        return None, str(exc)


def _content(pm: PostMortem) -> dict[str, Any]:
    """What a revision keeps: every editable field, the cost inputs and the snapshot."""
    data: dict[str, Any] = {name: getattr(pm, name) for name, _ in EDITABLE_FIELDS}
    data["phase_key_actions"] = pm.phase_key_actions
    data["cost_inputs"] = pm.cost_inputs
    data["snapshot"] = pm.snapshot
    return data


def _store_revision(*, pm: PostMortem, actor: AbstractBaseUser | None, note: str) -> None:
    # Every content change bumps the revision number, so one row per number is the
    # content of that revision; keeping it (e.g. "Published") is enough.
    PostMortemRevision.objects.get_or_create(
        postmortem=pm,
        number=pm.revision,
        defaults={
            "status": pm.status,
            "content": _content(pm),
            "note": note[:200],
            "created_by": _actor(actor),
        },
    )


def postmortem_reindex(*, postmortem: PostMortem) -> None:
    """Refresh the stored search document (and, on PostgreSQL, its tsvector)."""
    text = "\n".join(
        [
            postmortem.title,
            postmortem.summary,
            postmortem.root_cause,
            postmortem.impact,
            postmortem.lessons,
            postmortem.went_wrong,
            snapshot_text(postmortem.snapshot),
        ]
    )
    PostMortem.objects.filter(pk=postmortem.pk).update(search_text=text)
    if connection.vendor == "postgresql":
        PostMortem.objects.filter(pk=postmortem.pk).update(
            search_vector=SearchVector(Value(postmortem.title), weight="A", config="english")
            + SearchVector(Value(postmortem.summary), weight="B", config="english")
            + SearchVector(Value(postmortem.root_cause), weight="B", config="english")
            + SearchVector(F("search_text"), weight="C", config="english")
        )


def _apply_cost(pm: PostMortem) -> None:
    result, _ = postmortem_cost(postmortem=pm)
    pm.gpu_hours_lost = round(result.gpu_hours_lost, 4) if result else None
    pm.cost_usd = _money(result.cost_usd) if result else None
    pm.undetected_cost_usd = _money(result.undetected_cost_usd) if result else None


def _default_narrative(snap: dict[str, Any]) -> dict[str, str]:
    """First words of each section, from what the investigation recorded; people rewrite them."""
    inc = snap["incident"]
    triage = snap["triage"]
    rca = snap["root_cause_analysis"]
    chosen = next((c for c in snap["five_whys"] if c["is_chosen"]), None) or (
        snap["five_whys"][0] if snap["five_whys"] else None
    )
    root = rca.get("summary") or ""
    if chosen and chosen["steps"]:
        root = root or chosen["steps"][-1]["answer"]
    supported = [h["title"] for h in snap["hypotheses"] if h["status"] == "supported"]
    if not root and supported:
        root = "Supported hypothesis: " + "; ".join(supported)
    gpus = f"{inc['gpu_count']} × {inc['gpu_type'] or 'GPU'}" if inc["gpu_count"] else "the job"
    impact = f"Job {inc['job_id'] or inc['code']} on {inc['cluster'] or 'the cluster'} ({gpus})."
    if triage.get("shape"):
        impact += f" Failure shape: {triage['shape']}, scope: {triage.get('scope') or 'unknown'}."
    verified = [f"{f['title']}: {v['verdict']}" for f in snap["fixes"] for v in f["verifications"]]
    return {
        "summary": triage.get("summary") or inc["title"],
        "impact": impact,
        "root_cause": root,
        "trigger": (rca.get("chain") or [{}])[0].get("event", "") if rca.get("chain") else "",
        "detection": "",
        "response": "; ".join(f"{f['title']} ({f['status']})" for f in snap["fixes"]),
        "went_well": "",
        "went_wrong": "",
        "got_lucky": "",
        "lessons": "Fix verification: " + "; ".join(verified) if verified else "",
    }


@transaction.atomic
def postmortem_draft_create(*, incident: Incident, actor: AbstractBaseUser | None) -> PostMortem:
    """Draft a post-mortem from the incident as it is now (a frozen snapshot).

    One click, safe to click twice: while the incident has a post-mortem that is not
    published yet, that one is returned instead of a second draft.
    """
    Incident.objects.select_for_update().filter(pk=incident.pk).first()
    existing = (
        PostMortem.objects.filter(incident=incident)
        .exclude(status=Status.PUBLISHED)
        .order_by("-created_at")
        .first()
    )
    if existing is not None:
        return existing
    now = timezone.now()
    snap = snapshot_build(incident=incident, now=now)
    narrative = _default_narrative(snap)
    pm = PostMortem(
        incident=incident,
        team=incident.team,
        owner=_actor(actor),
        created_by=_actor(actor),
        snapshot=snap,
        snapshot_taken_at=now,
        title=f"Post-mortem: {incident.title}"[:200],
        phase_key_actions={p["phase"]: p["key_action"] for p in snap["phases"]},
        cost_inputs=CostInputs.from_json(snap["cost_prefill"]).to_json(),
        category=snap["root_cause_analysis"]["category"] or snap["triage"]["category"],
        severity=incident.severity,
        cluster=incident.cluster,
        **narrative,
    )
    if pm.category == "UNKNOWN":
        pm.category = ""
    _apply_cost(pm)
    pm.save()
    postmortem_reindex(postmortem=pm)
    incident_signature_refresh(incident=incident)
    incident_event_add(
        incident=incident,
        kind="postmortem.drafted",
        message=f"Post-mortem drafted ({pm.code})",
        actor=actor,
        data={"postmortem": pm.code},
        at=now,
    )
    return pm


@transaction.atomic
def postmortem_snapshot_refresh(
    *, postmortem: PostMortem, actor: AbstractBaseUser | None
) -> PostMortem:
    """Take the incident's snapshot again (before publishing only); the narrative written
    in the post-mortem is kept, and the previous content is stored as a revision."""
    if postmortem.status == Status.PUBLISHED:
        raise ReviewError("A published post-mortem keeps its snapshot.")
    _store_revision(pm=postmortem, actor=actor, note="Before the snapshot was refreshed")
    now = timezone.now()
    postmortem.snapshot = snapshot_build(incident=postmortem.incident, now=now)
    postmortem.snapshot_taken_at = now
    postmortem.revision += 1
    # Cost inputs nobody has entered yet are taken from the new snapshot too.
    inputs = dict(postmortem.cost_inputs or {})
    for name, value in (postmortem.snapshot.get("cost_prefill") or {}).items():
        if inputs.get(name) is None:
            inputs[name] = value
    postmortem.cost_inputs = CostInputs.from_json(inputs).to_json()
    _apply_cost(postmortem)
    postmortem.save()
    postmortem_reindex(postmortem=postmortem)
    incident_event_add(
        incident=postmortem.incident,
        kind="postmortem.snapshot",
        message=f"Post-mortem {postmortem.code}: snapshot refreshed from the incident",
        actor=actor,
        data={"postmortem": postmortem.code},
        at=now,
    )
    return postmortem


@transaction.atomic
def postmortem_update(
    *,
    postmortem: PostMortem,
    actor: AbstractBaseUser | None,
    expected_revision: int | None = None,
    phase_key_actions: dict[str, str] | None = None,
    **fields: str,
) -> PostMortem:
    """Edit the narrative. The previous content becomes a revision; revision numbers
    are compare-and-set, so two people saving the same revision cannot overwrite each other.
    Editing an approved post-mortem sends it back to review (the approval was for other text).
    """
    allowed = {name for name, _ in EDITABLE_FIELDS}
    unknown = set(fields) - allowed
    if unknown:
        raise ReviewError(f"Not editable: {', '.join(sorted(unknown))}")
    pm = PostMortem.objects.select_for_update().get(pk=postmortem.pk)
    if expected_revision is not None and pm.revision != expected_revision:
        raise ReviewError("Someone else saved this post-mortem first; reload to see their changes.")
    changed = [name for name, value in fields.items() if getattr(pm, name) != value]
    if phase_key_actions is not None and phase_key_actions != pm.phase_key_actions:
        changed.append("phase_key_actions")
    if not changed:
        return pm
    if "title" in fields and not fields["title"].strip():
        raise ReviewError("The title cannot be empty.")
    _store_revision(pm=pm, actor=actor, note="Before edit of " + ", ".join(changed))
    for name in changed:
        if name == "phase_key_actions":
            pm.phase_key_actions = {k: str(v)[:500] for k, v in (phase_key_actions or {}).items()}
        else:
            setattr(pm, name, fields[name][: 200 if name == "title" else MAX_TEXT])
    pm.revision += 1
    previous_status = pm.status
    if pm.status == Status.APPROVED:
        pm.status = Status.IN_REVIEW
    pm.save()
    postmortem_reindex(postmortem=pm)
    message = f"Post-mortem {pm.code} edited (revision {pm.revision}): {', '.join(changed)}"
    if previous_status != pm.status:
        message += "; back to review because it changed after approval"
    incident_event_add(
        incident=pm.incident,
        kind="postmortem.edited",
        message=message,
        actor=actor,
        data={"postmortem": pm.code, "fields": changed, "revision": pm.revision},
    )
    return pm


@transaction.atomic
def postmortem_cost_update(
    *, postmortem: PostMortem, actor: AbstractBaseUser | None, inputs: CostInputs
) -> PostMortem:
    """Replace the cost inputs; the results are recomputed from them, never entered."""
    cost_compute(inputs)  # raises CostInputError before anything is stored
    pm = PostMortem.objects.select_for_update().get(pk=postmortem.pk)
    new_inputs = inputs.to_json()
    if new_inputs == pm.cost_inputs:
        return pm
    _store_revision(pm=pm, actor=actor, note="Before cost input change")
    pm.cost_inputs = new_inputs
    pm.revision += 1
    if pm.status == Status.APPROVED:
        pm.status = Status.IN_REVIEW
    _apply_cost(pm)
    pm.save()
    incident_event_add(
        incident=pm.incident,
        kind="postmortem.cost",
        message=(
            f"Post-mortem {pm.code} cost inputs changed: "
            f"{pm.gpu_hours_lost or 0:,.2f} GPU-hours, {fmt_usd(pm.cost_usd)}"
        ),
        actor=actor,
        data={"postmortem": pm.code, "inputs": new_inputs},
    )
    return pm


_TRANSITION_WORDS = {
    (Status.DRAFT, Status.IN_REVIEW): "submitted for review",
    (Status.IN_REVIEW, Status.DRAFT): "sent back to draft",
    (Status.IN_REVIEW, Status.APPROVED): "approved",
    (Status.APPROVED, Status.PUBLISHED): "published",
    (Status.APPROVED, Status.IN_REVIEW): "reopened for review",
}


# Sections a published post-mortem cannot leave empty (the markdown would say "Not written").
REQUIRED_SECTIONS = (
    ("summary", "Summary"),
    ("impact", "Impact"),
    ("trigger", "Trigger and leadup"),
    ("detection", "Detection"),
    ("response", "Response and recovery"),
    ("root_cause", "Root cause"),
)
DRAFT_MARK = "(draft: confirm or edit)"


def postmortem_missing(*, postmortem: PostMortem) -> list[str]:
    """What stops this post-mortem from being published, one line per problem."""
    missing = [
        f"{label} is empty"
        for name, label in REQUIRED_SECTIONS
        if not str(getattr(postmortem, name, "") or "").strip()
    ]
    snap = postmortem.snapshot or {}
    for chain in snap.get("five_whys") or []:
        for i, step in enumerate(chain.get("steps") or chain.get("levels") or [], 1):
            text = f"{step.get('why', '')} {step.get('answer', '')}"
            if DRAFT_MARK in text or step.get("confirmed") is False:
                missing.append(
                    f"Five Whys “{chain.get('title') or 'chain'}”, level {i}, is a draft "
                    "of the analysis: confirm or edit it in Root cause, then refresh the snapshot"
                )
    for f in snap.get("contributing_factors") or []:
        if DRAFT_MARK in str(f):
            missing.append(f"Contributing factor “{str(f)[:80]}” is an unconfirmed draft")
    return missing


@transaction.atomic
def postmortem_transition(
    *, postmortem: PostMortem, to_status: str, actor: AbstractBaseUser | None, note: str = ""
) -> PostMortem:
    """Move through draft → in review → approved → published (compare-and-set on status).

    Only a lead of the post-mortem's team approves or publishes.
    """
    current = postmortem.status
    if to_status not in STATUS_TRANSITIONS.get(current, set()):
        label = Status(to_status).label if to_status in Status.values else repr(to_status)
        raise ReviewError(f"A post-mortem cannot go from {Status(current).label} to {label}.")
    if to_status in LEAD_ONLY_TARGETS and not user_is_team_lead(user=actor, team=postmortem.team):
        raise ReviewError("Only a team lead can approve or publish a post-mortem.")
    if to_status == Status.PUBLISHED:
        missing = postmortem_missing(postmortem=postmortem)
        if missing:
            raise ReviewError("Not published yet — first: " + "; ".join(missing) + ".")
    now = timezone.now()
    changes: dict[str, Any] = {"status": to_status, "updated_at": now}
    if to_status == Status.PUBLISHED:
        changes["published_at"] = now
    updated = PostMortem.objects.filter(pk=postmortem.pk, status=current).update(**changes)
    if updated != 1:
        raise ReviewError("Someone else changed this post-mortem first; reload and try again.")
    postmortem.refresh_from_db()
    if to_status == Status.APPROVED:
        Approval.objects.create(
            postmortem=postmortem,
            approver=_actor(actor),
            revision=postmortem.revision,
            note=note[:2000],
        )
    if to_status == Status.PUBLISHED:
        # The published text is kept whatever happens to it later.
        _store_revision(pm=postmortem, actor=actor, note="Published")
    words = _TRANSITION_WORDS.get((current, to_status), to_status)
    incident_event_add(
        incident=postmortem.incident,
        kind="postmortem.status",
        message=f"Post-mortem {postmortem.code} {words}" + (f": {note[:200]}" if note else ""),
        actor=actor,
        data={"postmortem": postmortem.code, "from": current, "to": to_status},
        at=now,
    )
    return postmortem


@transaction.atomic
def postmortem_comment_add(
    *, postmortem: PostMortem, actor: AbstractBaseUser | None, section: str, body: str
) -> ReviewComment:
    body = body.strip()
    if not body:
        raise ReviewError("A comment needs some text.")
    if section not in {slug for slug, _ in SECTIONS}:
        raise ReviewError(f"Unknown section {section!r}.")
    comment = ReviewComment.objects.create(
        postmortem=postmortem,
        section=section,
        body=body[:MAX_TEXT],
        author=_actor(actor),
        revision=postmortem.revision,
    )
    label = dict(SECTIONS)[section]
    incident_event_add(
        incident=postmortem.incident,
        kind="postmortem.comment",
        message=f"Review comment on post-mortem {postmortem.code} ({label})",
        actor=actor,
        data={"postmortem": postmortem.code, "section": section, "comment": comment.pk},
    )
    return comment


def incident_signature_refresh(*, incident: Incident) -> IncidentSignature | None:
    """Store the failure signature of the incident's latest triage document.

    Idempotent: keyed by the analysis run the signature came from, so it is recomputed
    only when a newer analysis exists. None while the incident has no analysis.
    """
    run_code, doc = analysis_latest(incident)
    if doc is None:
        return None
    key = run_code or hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
    current = IncidentSignature.objects.filter(incident=incident).first()
    if current is not None and current.source_key == key:
        return current
    sig = similarity.signature_to_json(similarity.signature_from_document(doc))
    signature, _ = IncidentSignature.objects.update_or_create(
        incident=incident, defaults={"team_id": incident.team_id, "source_key": key, **sig}
    )
    return signature


# Cost inputs the draft takes from the incident's own fields, not from the logs.
_INCIDENT_INPUTS = {"gpu_hour_usd", "remaining_run_hours"}


def cost_sources(*, postmortem: PostMortem) -> dict[str, str]:
    """Per cost input: "from the logs" or "from the incident" (still the drafted value),
    or "entered" (someone typed it)."""
    prefill = (postmortem.snapshot or {}).get("cost_prefill") or {}
    out = {}
    for name, value in (postmortem.cost_inputs or {}).items():
        if value is None:
            continue
        same = name in prefill and prefill[name] == value
        if not same:
            out[name] = "entered"
        elif name in _INCIDENT_INPUTS or (name == "gpu_count" and postmortem.incident.gpu_count):
            out[name] = "from the incident"
        else:
            out[name] = "from the logs"
    return out


def cost_shows_undetected(*, postmortem: PostMortem) -> bool:
    """Cost if undetected only means something for a job that kept running degraded."""
    shape = str(((postmortem.snapshot or {}).get("triage") or {}).get("shape") or "")
    return shape in {"slow", "diverge", ""}


def postmortem_context(*, postmortem: PostMortem) -> dict[str, Any]:
    """Everything the page and the markdown show beyond the model's own fields."""
    cost, cost_error = postmortem_cost(postmortem=postmortem)
    snap = postmortem.snapshot or {}
    phases = [
        {**p, "key_action": postmortem.phase_key_actions.get(p["phase"], p.get("key_action", ""))}
        for p in snap.get("phases") or []
    ]
    approvals = [
        {
            "approver": a.approver.get_username() if a.approver else "",
            "at": a.at.isoformat(),
            "revision": a.revision,
        }
        for a in postmortem.approvals.select_related("approver")
    ]
    revisions = [
        {
            "number": r.number,
            "status": r.status,
            "note": r.note,
            "by": r.created_by.get_username() if r.created_by else "",
            "at": r.created_at.isoformat(),
        }
        for r in postmortem.revisions.select_related("created_by").order_by("number")
    ]
    return {
        "postmortem": postmortem,
        "cost": cost,
        "cost_error": cost_error,
        "cost_sources": cost_sources(postmortem=postmortem),
        "show_undetected": cost_shows_undetected(postmortem=postmortem),
        "phases": phases,
        "approvals": approvals,
        "revisions": revisions,
        "owner": postmortem.owner.get_username() if postmortem.owner else "",
        "similar": similar_incidents(incident=postmortem.incident),
    }


def postmortem_render_markdown(*, postmortem: PostMortem, base_url: str = "") -> str:
    """The post-mortem as GitHub-flavoured markdown with front matter (download and API).

    ``base_url`` ("https://rankscope.example/"): evidence references become links to the
    viewer at their line, so the pasted text still leads to the log.
    """
    ctx = postmortem_context(postmortem=postmortem)
    incident = postmortem.incident

    def link(file: str, line: Any) -> str:
        path = evidence_url(incident, file, line)
        return f"{base_url.rstrip('/')}{path}" if path else ""

    ctx["evidence_url"] = link
    return markdown.render(ctx)
