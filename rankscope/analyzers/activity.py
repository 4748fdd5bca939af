"""What the job was doing when a collective stalled, when no rank logged a fault.

A collective timeout with no error of its own on any rank leaves one reading of the
logs: the last activity a process announced before the timeout, and whether it ever
said it finished. A checkpoint save that began as the others entered the collective
and printed no completion before they timed out is where the job was stuck.

The activities are data (``ACTIVITIES``): the event that announces one, the events
that say it finished, and the category it points at. Evaluation is deliberately not
there: the public threads end in a code-path mismatch as often as in a data problem,
so "evaluating" does not name a category. Dataset preprocessing has its own, stricter
rule in the verdict (the first collectives, the main process's progress bar).

The verdict consults ``activity_hang`` only for a hang nothing stronger explains, and
says so (``decided_by``, lower confidence).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from ..model import Event
from . import Context
from ._rc import to_dt
from .nccl import quotable


@dataclass(frozen=True)
class Activity:
    kind: str  # the event kind that announces it began
    done: tuple[str, ...]  # event kinds that say it finished
    category: str
    label: str


ACTIVITIES: tuple[Activity, ...] = (
    Activity(
        "checkpoint_save",
        ("checkpoint_saved",),
        "STORAGE_IO",
        "a checkpoint save",
    ),
)
BY_KIND = {a.kind: a for a in ACTIVITIES}
# events that may sit between the activity and the timeout without meaning "moved on"
_QUIET = {
    "watchdog_timeout",
    "watchdog_failure",
    "dump_first",
    "dump_observed",
    "dump_received",
    "nccl_progress",
    "teardown",
    "fatal_terminate",
    "watchdog_exit",
}
CONFIDENCE = 0.4


def _before(a: Event, b: Event) -> bool:
    ta, tb = to_dt(a.time), to_dt(b.time)
    if ta is not None and tb is not None and a.time[:4] == b.time[:4]:  # type: ignore[index]
        return ta <= tb
    return a.file == b.file and a.line < b.line


def _last_activity(ctx: Context, fire: Event) -> Event | None:
    acts = [e for k in BY_KIND for e in ctx.kinds(k) if _before(e, fire)]
    if not acts:
        return None
    return max(acts, key=lambda e: (e.time or "", e.line))


def _moved_on(ctx: Context, act: Event, fire: Event) -> bool:
    """A completion of the activity, or the same file going on with other work, before the
    timeout (untimed lines: by line order in the activity's file)."""
    spec = BY_KIND[act.kind]
    for e in ctx.events:
        if e is act or e is fire or not _before(act, e) or not _before(e, fire):
            continue
        if e.kind in spec.done:
            return True
        if e.file == act.file and e.kind not in _QUIET and e.kind not in BY_KIND:
            return True
    return False


def _in_window(act: Event, fire: Event) -> bool:
    """With both times: the activity began no earlier than one timeout before the stalled
    collective started (an older save without a completion line proves nothing)."""
    ta, tf = to_dt(act.time), to_dt(fire.time)
    ms = fire.fields.get("ran_ms") or fire.fields.get("timeout_ms")
    if ta is None or tf is None or not ms or (act.time or "")[:4] != (fire.time or "")[:4]:
        return True
    return ta >= tf - timedelta(milliseconds=2 * ms)


def activity_hang(ctx: Context) -> dict[str, Any] | None:
    """Verdict fields when the last announced activity never finished before the timeout."""
    fires = quotable(ctx.kinds("watchdog_timeout", "watchdog_failure"))
    if not fires:
        return None
    fire = min(fires, key=lambda e: (e.time or "9999", e.line))
    act = _last_activity(ctx, fire)
    if act is None or _moved_on(ctx, act, fire) or not _in_window(act, fire):
        return None
    spec = BY_KIND[act.kind]
    return {
        "shape": "hang",
        "category": spec.category,
        "confidence": CONFIDENCE,
        "root": act,
        "root_label": f"{spec.label} was still running when the collective timed out (no "
        "completion line before it); the ranks waiting in the collective timed out",
        "culprit_ranks": [act.rank] if act.rank is not None else [],
        "culprit_hosts": [act.host] if act.rank is not None and act.host else [],
        "extra": {
            "decided_by": f"rule: last activity before the collective timeout was {spec.label}, "
            "never finished (activity table, analyzers/activity.py)"
        },
    }
