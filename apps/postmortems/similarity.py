# ruff: noqa: RUF002, RUF003 — × and − are the symbols people read in a formula
"""Failure signatures and how alike two of them are: pure functions over plain data.

A signature is what an incident's failure looked like in its triage document: category,
shape, error kinds (finding kinds), collective ops (NCCL ops in flight), Xid codes and
hosts implicated. Similarity is a weighted Jaccard: each feature contributes its weight ×
|A ∩ B| / |A ∪ B| (1 or 0 for the single-valued category and shape), divided by the total
weight of the features either side has. Every contributing feature becomes a reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rankscope.document import read_document

WEIGHTS: dict[str, float] = {
    "category": 3.0,
    "shape": 1.5,
    "error_kinds": 3.0,
    "collective_ops": 1.0,
    "xid_codes": 2.5,
    "hosts": 2.0,
}
# Finding kinds too generic to say two failures are alike.
_NOISE_KINDS = {"", "info", "note", "summary", "noise", "retry_noise"}
_XID_RE = re.compile(r"\bXid\b[^0-9]{0,40}?(?:\d+:\s*)?(\d{1,3})\b", re.IGNORECASE)
_XID_STRICT_RE = re.compile(r"\bXid \([^)]*\):\s*(\d{1,3})\b", re.IGNORECASE)


@dataclass(frozen=True)
class Signature:
    category: str = ""
    shape: str = ""
    error_kinds: frozenset[str] = field(default_factory=frozenset)
    collective_ops: frozenset[str] = field(default_factory=frozenset)
    xid_codes: frozenset[str] = field(default_factory=frozenset)
    hosts: frozenset[str] = field(default_factory=frozenset)

    def is_empty(self) -> bool:
        return not (
            self.category
            or self.shape
            or self.error_kinds
            or self.collective_ops
            or self.xid_codes
            or self.hosts
        )


@dataclass(frozen=True)
class Match:
    score: float  # 0..1
    reasons: list[str]


def _xids_in(text: str) -> set[str]:
    found = set(_XID_STRICT_RE.findall(text))
    if not found:
        found = set(_XID_RE.findall(text))
    return found


def signature_from_document(doc: dict[str, Any] | None) -> Signature:
    """The signature of one triage document (``rankscope.triage/v1``); empty for None."""
    if not doc:
        return Signature()
    view = read_document(doc)
    triage, root, loc = view.triage, view.root_cause, view.localization
    category = str(root.get("category") or triage.get("category") or "").upper()
    if category == "UNKNOWN":
        category = ""
    shape = str(triage.get("shape") or "")
    if shape == "none":
        shape = ""
    kinds: set[str] = set()
    xids: set[str] = set()
    hosts: set[str] = {str(h) for h in loc.get("culprit_hosts") or []}
    for finding in view.findings:
        kind = str(finding.get("kind") or "")
        if kind not in _NOISE_KINDS:
            kinds.add(kind)
        if "xid" in kind.lower():
            texts = [str(finding.get("title") or ""), str(finding.get("detail") or "")]
            texts += [str(ref.get("text") or "") for ref in finding.get("evidence") or []]
            for text in texts:
                xids |= _xids_in(text)
            # Hardware findings name the host that failed; that host is part of the story.
            hosts |= {str(h) for h in finding.get("hosts") or []}
    ops = {
        str(entry.get("op")).upper()
        for entry in loc.get("nccl") or []
        if entry.get("op") and entry.get("role") in {"straggler", "initiator", None}
    }
    return Signature(
        category=category,
        shape=shape,
        error_kinds=frozenset(kinds),
        collective_ops=frozenset(ops),
        xid_codes=frozenset(xids),
        hosts=frozenset(hosts),
    )


def _fmt(values: set[str] | frozenset[str]) -> str:
    return ", ".join(sorted(values))


def signature_similarity(a: Signature, b: Signature) -> Match:
    """How alike two signatures are (0..1), and why."""
    gained = 0.0
    possible = 0.0
    reasons: list[str] = []
    for name in ("category", "shape"):
        left, right = getattr(a, name), getattr(b, name)
        if not (left or right):
            continue
        possible += WEIGHTS[name]
        if left and left == right:
            gained += WEIGHTS[name]
            reasons.append(f"same {name}: {left}")
    labels = {
        "error_kinds": "same errors",
        "collective_ops": "same collective",
        "xid_codes": "same Xid",
        "hosts": "same host",
    }
    for name, label in labels.items():
        left, right = getattr(a, name), getattr(b, name)
        union = left | right
        if not union:
            continue
        possible += WEIGHTS[name]
        common = left & right
        if common:
            gained += WEIGHTS[name] * len(common) / len(union)
            reasons.append(f"{label}: {_fmt(common)}")
    score = gained / possible if possible else 0.0
    return Match(score=round(score, 4), reasons=reasons)


def signature_to_json(sig: Signature) -> dict[str, Any]:
    return {
        "category": sig.category,
        "shape": sig.shape,
        "error_kinds": sorted(sig.error_kinds),
        "collective_ops": sorted(sig.collective_ops),
        "xid_codes": sorted(sig.xid_codes),
        "hosts": sorted(sig.hosts),
    }


def signature_from_json(data: dict[str, Any]) -> Signature:
    return Signature(
        category=data.get("category") or "",
        shape=data.get("shape") or "",
        error_kinds=frozenset(data.get("error_kinds") or []),
        collective_ops=frozenset(data.get("collective_ops") or []),
        xid_codes=frozenset(str(x) for x in data.get("xid_codes") or []),
        hosts=frozenset(data.get("hosts") or []),
    )
