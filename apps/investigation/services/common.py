"""What every investigation write shares: its errors, the actor, evidence references."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser


class InvestigationError(Exception):
    """A write that cannot be done; the message is shown to the person."""


class ConflictError(InvestigationError):
    """Someone else changed the record first (a compare-and-set lost); the view answers 409."""


CONFLICT_MESSAGE = "Someone else changed this first; reload and try again."


def _actor(actor: AbstractBaseUser | None) -> AbstractBaseUser | None:
    return actor if actor is not None and actor.is_authenticated else None


_REF = re.compile(r"^\s*(?P<file>[^\s:][^:]*?):(?P<line>\d+)\b\s*(?P<text>.*)$")


def evidence_parse(text: str) -> list[dict[str, Any]]:
    """``file:line [note]`` one a line → evidence refs. Lines without ``:line`` are notes."""
    refs = []
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        m = _REF.match(line)
        if m:
            refs.append(
                {"file": m["file"].strip()[:500], "line": int(m["line"]), "text": m["text"][:2000]}
            )
        else:
            refs.append({"file": "", "line": None, "text": line[:2000]})
    return refs[:50]


def _clean_refs(refs: Iterable[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    out = []
    for r in refs or []:
        if not isinstance(r, Mapping):
            continue
        line = r.get("line")
        out.append(
            {
                "file": str(r.get("file") or "")[:500],
                "line": int(line) if isinstance(line, int | float) else None,
                "text": str(r.get("text") or "")[:2000],
            }
        )
    return out[:50]
