"""The root-cause chain across all ranks and files, on one aligned timeline.

Runs before the verdict (order 85) and writes ``ctx.facts.chain``; the verdict, the
owner of ``root_cause``, ``triage`` and ``timeline``, applies it with ``apply_chain``.
Steps, each with its evidence line:

1. trigger — the earliest causal event (storage failure chain, data-loader error,
   CUDA/host OOM, Xid/ECC, NaN, mismatch, exception, node failure); without one,
   the straggler rank that never entered the collective;
2. the culprit rank leaves the training loop (its exception / exit);
3. the collective hangs (first watchdog timeout; it started ``Timeout(ms)`` earlier);
4. the other ranks' watchdogs fire (initiators);
5. the processes are taken down (teardown, SIGTERM, torchrun summary, SLURM).

Times: every source on the worker clock (AIS times already shifted by the storage
analyzer's offset, ``ctx.facts.clock_offsets``); lines without a time keep
their file order after the last timed line before them. The root category
follows the trigger: a timeout after an OOM is OOM. The chain replaces the verdict's
own when it has two steps or more; the timeline gains the storage/hardware events,
aligned.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from ..model import ChainFacts, Event, evidence
from ..signatures import BY_ID, exception_rule
from ..times import etime, iso_out, to_dt
from . import Context, register_analyzer

CAUSES: dict[str, tuple[str, str]] = {
    "cuda_oom": ("OOM", "CUDA out of memory"),
    "host_oom_kill": ("OOM", "host out of memory: the kernel killed a process"),
    "gpu_off_bus": ("HARDWARE", "GPU fell off the bus"),
    "ecc_error": ("HARDWARE", "uncorrectable ECC error"),
    "nan_loss": ("NUMERICAL", "loss became NaN/Inf"),
    "nan_detected": ("NUMERICAL", "non-finite values detected"),
    "collective_mismatch": ("SOFTWARE", "ranks issued mismatched collectives"),
    "data_error": ("DATA", "data loader error"),
    "storage_error": ("STORAGE_IO", "storage I/O error"),
    "retry_exhausted": ("STORAGE_IO", "retries exhausted"),
    "node_fail": ("INFRA", "node failure"),
    "slurm_preempted": ("INFRA", "job preempted"),
    "segfault": ("SOFTWARE", "segmentation fault"),
    "python_exception": ("SOFTWARE", "exception"),
}
LEAVE = ("python_exception", "traceback", "torchrun_failed", "segfault", "cuda_oom", "data_error")
HANG = ("watchdog_timeout", "blocking_wait_timeout")
FIRE = ("dump_first", "watchdog_failure", "async_exception")
DOWN = (
    "teardown",
    "fatal_terminate",
    "sigterm_sent",
    "torchrun_failure",
    "worker_group_failed",
    "slurm_cancelled",
    "slurm_time_limit",
)
SYMPTOM_EXC = (
    "DistBackendError",
    "NCCL",
    "Watchdog",
    "SignalException",
    "ChildFailedError",
    "timeout",
)


def _key(t: datetime | None) -> datetime:
    return t or datetime.max


class _Steps:
    """The chain's steps; an evidence line is cited once."""

    def __init__(self, t_of: dict[int, datetime | None], inherited: set[int]) -> None:
        self.steps: list[dict[str, Any]] = []
        self.t_of = t_of
        self.inherited = inherited

    def add(
        self,
        stage: str,
        e: Event | None,
        what: str,
        rank: int | None = None,
        extra: list[Event] | None = None,
    ) -> None:
        if e is None or any(
            s["evidence"][0]["file"] == e.file and s["evidence"][0]["line"] == e.line
            for s in self.steps
        ):
            return
        t = self.t_of.get(id(e))
        step = {
            "stage": stage,
            "time": iso_out(t) if t else etime(e),
            "rank": e.rank if rank is None else rank,
            "host": e.host,
            "event": what,
            "evidence": [evidence(x) for x in [e, *(extra or [])]][:4],
        }
        if id(e) in self.inherited:
            step["time_inherited"] = (
                True  # the line has no time: the last time before it in its file
            )
        self.steps.append(step)


def _first_hang(hang: list[Event], t_of: dict[int, datetime | None]) -> Event | None:
    """The first timeout, preferring one whose work could be read (a line that terminal
    wrapping or a pasted overlay did not cut inside ``WorkNCCL(…)`` names its collective and
    timeout), then one printed on a line of its own (quotable)."""
    if not hang:
        return None
    return min(
        hang,
        key=lambda e: ("op" not in e.fields, bool(e.fields.get("glued")), _key(t_of[id(e)])),
    )


def _trigger_steps(
    ctx: Context,
    steps: _Steps,
    ordered: list[tuple[datetime | None, Event]],
    trigger: Event,
    category: str | None,
    label: str,
) -> None:
    """The trigger (with the storage chain that led to it), and the real error a wrapper
    re-raised."""
    storage = ctx.facts.storage_chain
    if storage and trigger is storage[0][1]:
        for lbl, e in storage:
            steps.add("trigger" if e is trigger else "storage", e, lbl)
        return
    steps.add("trigger", trigger, label)
    if "sig" in trigger.fields:
        return
    # a wrapper ("Caught OSError in DataLoader worker") re-raises the real
    # error a few lines below: cite that message too
    for _, e in ordered:
        sg = BY_ID.get(str(e.fields.get("sig"))) if "sig" in e.fields else None
        if (
            sg is not None
            and sg.category == category
            and e.file == trigger.file
            and 0 < e.line - trigger.line <= 60
        ):
            steps.add("trigger", e, sg.meaning.split(":")[0].rstrip("."))
            break


def _collective_hangs(
    steps: _Steps, h0: Event, hang_start: datetime | None, hang: list[Event]
) -> None:
    f = h0.fields
    what = f"collective {f.get('op', '')} seq {f.get('seq', '?')} hung".replace("  ", " ")
    if hang_start:
        what += f" (started {iso_out(hang_start)}, timed out after {(f.get('timeout_ms') or f.get('ran_ms')) / 1000:.0f} s)"
    # the same collective as the other ranks' watchdogs saw it, one line per rank
    seen = {h0.rank}
    same: list[Event] = []
    for e in hang:
        if (
            e.rank not in seen
            and "seq" in f
            and e.fields.get("seq") == f.get("seq")
            and e.fields.get("op") == f.get("op")
        ):
            seen.add(e.rank)
            same.append(e)
    steps.add("collective_hangs", h0, what, extra=same[:3])


def _watchdogs_fire(
    ctx: Context, steps: _Steps, ordered: list[tuple[datetime | None, Event]]
) -> None:
    fire = [e for _, e in ordered if e.kind in FIRE]
    if fire:
        n = len({e.rank for e in fire if e.rank is not None})
        steps.add(
            "watchdogs_fire",
            fire[0],
            f"watchdogs fired on {n or 'the'} rank(s)",
            extra=fire[1:2],
        )
    nccl = ctx.facts.nccl
    named = sorted(set(nccl.get("initiators", ())) - set(nccl.get("own", ())))
    told = [
        e for _, e in ordered if e.kind == "dump_received" and e.fields.get("from_rank") in named
    ]
    if told:
        # an initiator whose own log is absent: the ranks it signalled name it
        src = told[0].fields["from_rank"]
        steps.add(
            "watchdogs_fire",
            told[0],
            f"rank {src}'s watchdog fired and signalled the others (named in their "
            "dump-signal line; no watchdog line of its own is here)",
            src,
        )


def _taken_down(steps: _Steps, ordered: list[tuple[datetime | None, Event]]) -> None:
    down = [(t, e) for t, e in ordered if e.kind in DOWN]
    if not down:
        return
    last = max(down, key=lambda te: (te[0] or datetime.min, te[1].line))[1]
    down0 = down[0][1]
    steps.add(
        "taken_down",
        down0,
        f"processes taken down ({down0.kind.replace('_', ' ')})",
        extra=[last] if last is not down0 else None,
    )


def _precedes(
    t: datetime | None,
    hang_start: datetime | None,
    hang: list[Event],
    t_of: dict[int, datetime | None],
) -> bool:
    """The trigger came before the collective started to hang (or before the first timeout)."""
    return bool(
        hang_start is None
        or (t is not None and t <= hang_start + timedelta(seconds=60))
        or (t is not None and hang and t <= min(t_of[id(e)] or datetime.max for e in hang))
    )


class ChainAnalyzer:
    name = "chain"
    phase = "root_cause"
    order = 85
    reads = ("events", "facts.storage_chain", "facts.clock_offsets", "facts.nccl")
    writes = ("facts.chain",)

    def run(self, ctx: Context) -> None:
        ordered = self._aligned(ctx)
        t_of = {id(e): t for t, e in ordered}
        hang = [e for _, e in ordered if e.kind in HANG]
        h0 = _first_hang(hang, t_of)
        hang_start = None
        if h0 is not None:
            ms = h0.fields.get("timeout_ms") or h0.fields.get("ran_ms")
            if t_of[id(h0)] and ms:
                hang_start = t_of[id(h0)] - timedelta(milliseconds=ms)
        trigger, category, label = self._trigger(ctx, ordered, t_of, hang_start)
        steps = _Steps(t_of, self._inherited)
        # 1. the trigger, 2. the culprit rank leaves the loop
        if trigger is not None:
            _trigger_steps(ctx, steps, ordered, trigger, category, label)
        self._leaves_loop(ctx, steps, ordered, trigger)
        # 3. collective hangs, 4. watchdogs fire, 5. processes taken down
        if h0 is not None:
            _collective_hangs(steps, h0, hang_start, hang)
        _watchdogs_fire(ctx, steps, ordered)
        _taken_down(steps, ordered)
        facts = ctx.facts.chain = ChainFacts(
            steps=steps.steps, clock_offsets=ctx.facts.clock_offsets
        )
        if trigger is not None and category:
            facts.trigger, facts.category, facts.label = trigger, category, label
            facts.precedes = _precedes(t_of.get(id(trigger)), hang_start, hang, t_of)
        facts.timeline = self._timeline(ctx, ordered)

    def _leaves_loop(
        self,
        ctx: Context,
        steps: _Steps,
        ordered: list[tuple[datetime | None, Event]],
        trigger: Event | None,
    ) -> None:
        """The culprit rank (the trigger's, else the NCCL straggler) leaves the training loop."""
        after_t = steps.t_of.get(id(trigger)) if trigger is not None else None
        culprit = trigger.rank if trigger is not None else None
        strag = self._straggler(ctx)
        if culprit is None and strag is not None:
            culprit = strag["rank"]
        if culprit is None:
            return
        leave = [
            e
            for t, e in ordered
            if e.rank == culprit
            and e.kind in LEAVE
            and e is not trigger
            and (after_t is None or (t is not None and t >= after_t))
        ]
        if leave:
            steps.add(
                "leaves_loop",
                leave[0],
                f"rank {culprit} left the training loop ({leave[0].kind.replace('_', ' ')})",
                culprit,
            )
        elif strag is not None:
            steps.add(
                "leaves_loop",
                strag["_ev"],
                f"rank {strag['rank']} never entered collective {strag.get('seq')} "
                f"(last enqueued = last completed = {strag.get('last_completed')}): stuck outside NCCL",
                strag["rank"],
            )

    _inherited: set[int] = set()

    def _aligned(self, ctx: Context) -> list[tuple[datetime | None, Event]]:
        """Every event with its worker-clock time; untimed lines inherit the last time before them
        of the same rank in their file."""
        events = ctx.events
        times = [to_dt(e.time or e.fields.get("approx_time")) for e in events]  # times.etime
        eff = list(times)
        untimed = {e.file for e, t in zip(events, times, strict=True) if t is None}
        if untimed:
            self._inherit(events, times, eff, untimed)
        # ctx.events is in the order of its time texts, which the times mostly keep: the sort
        # has little to do (and equal keys keep that order, as they kept the files' line order)
        keys = [
            (datetime.max if t is None else t, e.file, e.line)
            for e, t in zip(events, eff, strict=True)
        ]
        order = sorted(range(len(events)), key=keys.__getitem__)
        self._inherited = {id(events[i]) for i in order if times[i] is None}
        return [(eff[i], events[i]) for i in order]

    @staticmethod
    def _inherit(
        events: list[Event],
        times: list[datetime | None],
        eff: list[datetime | None],
        files: set[str],
    ) -> None:
        """``eff`` of the untimed lines of ``files``: the last time above them of the same rank
        in their file, else (above the rank's first stamp) that first stamp."""
        per_file: dict[str, list[int]] = {}
        for i, e in enumerate(events):
            if e.file in files:
                per_file.setdefault(e.file, []).append(i)
        for idx in per_file.values():
            idx.sort(key=lambda i: events[i].line)
            # per rank: an unstamped line never takes another rank's time
            last: dict[int | None, datetime | None] = {}
            for i in idx:
                t = times[i]
                if t is not None:
                    last[events[i].rank] = t
                else:
                    eff[i] = last.get(events[i].rank)
            # lines above the first stamp of their rank happened no later than it
            nxt: dict[int | None, datetime | None] = {}
            for i in reversed(idx):
                t, rank = times[i], events[i].rank
                if t is not None:
                    nxt[rank] = t
                elif eff[i] is None and nxt.get(rank) is not None:
                    eff[i] = nxt[rank]

    def _trigger(
        self,
        ctx: Context,
        ordered: list[tuple[datetime | None, Event]],
        t_of: dict[int, Any],
        hang_start: datetime | None,
    ) -> tuple[Event | None, str | None, str]:
        storage = ctx.facts.storage_chain
        cands = []
        if len(storage) >= 2:
            cands.append(
                (to_dt(etime(storage[0][1])), storage[0][1], ("STORAGE_IO", storage[0][0]))
            )
        for t, e in ordered:
            if "sig" not in e.fields and e.kind not in CAUSES and e.kind != "xid":
                continue  # names no cause (most lines: timeouts, teardown)
            if e.kind == "python_exception" and any(s in e.text for s in SYMPTOM_EXC):
                continue  # an NCCL/watchdog exception is a symptom, not a trigger
            c = CAUSES.get(e.kind)
            sig = BY_ID.get(str(e.fields.get("sig"))) if "sig" in e.fields else None
            if sig is not None and sig.category is not None and sig.strength >= 0.5:
                c = (sig.category, sig.meaning.split(":")[0].rstrip("."))
            elif e.kind == "python_exception":
                rule = exception_rule(
                    str(e.fields.get("type", "")), str(e.fields.get("message", ""))
                )
                c = (rule.category, "exception")
            if e.kind == "xid" and e.fields.get("hardware"):
                c = ("HARDWARE", f"Xid {e.fields.get('xid')}")
            if c is None:
                continue
            if e.kind == "nan_loss" and not str(e.fields.get("value", "nan")).lower().startswith(
                ("nan", "inf", "-inf")
            ):
                continue
            cands.append((t, e, c))
        if not cands:
            return None, None, ""
        cands.sort(key=lambda x: (_key(x[0]), x[1].file, x[1].line))
        timed = [x for x in cands if x[0] is not None]
        pool = timed or cands
        # a specific cause beats a generic exception when both come before the hang
        specific = [
            x
            for x in pool
            if x[1].kind != "python_exception"
            and (hang_start is None or x[0] is None or x[0] <= hang_start + timedelta(minutes=5))
        ]
        t, e, (cat, label) = (specific or pool)[0]
        if e.kind == "python_exception":
            label = f"{e.fields.get('type', 'exception')}: {str(e.fields.get('message', ''))[:80]}"
        return e, cat, label

    @staticmethod
    def _straggler(ctx: Context) -> dict[str, Any] | None:
        rows = ctx.facts.nccl.get("rows", [])
        return next(
            (r for r in rows if r.get("role") == "straggler" and r.get("_ev") is not None), None
        )

    def _timeline(
        self, ctx: Context, ordered: list[tuple[datetime | None, Event]]
    ) -> list[dict[str, Any]]:
        """Storage and hardware lines for the timeline, on the aligned clock (``apply_chain``
        keeps the first 8 of a kind that the verdict's timeline does not already have)."""
        tl: list[dict[str, Any]] = []
        offsets = ctx.facts.clock_offsets
        extra_kinds = ("ais_", "xid", "gpu_off_bus", "ecc_error", "host_oom_kill")
        wanted = {k for k in {e.kind for _, e in ordered} if k.startswith(extra_kinds)}
        for t, e in ordered:
            if e.kind not in wanted or t is None:
                continue
            item = {
                "time": iso_out(t),
                "rank": e.rank,
                "host": e.host,
                "file": e.file,
                "line": e.line,
                "event": e.kind,
                "text": e.text[:300],
            }
            if e.file in offsets:
                item["clock_offset_seconds"] = offsets[e.file]
            tl.append(item)
        return tl


def apply_chain(
    ctx: Context,
    triage: dict[str, Any],
    root_cause: dict[str, Any],
    timeline: list[dict[str, Any]],
) -> None:
    """The verdict's sections with the chain applied (called by their writer, the verdict).

    The chain replaces the verdict's own when it has more steps; the root category follows
    the trigger when the verdict only saw the network (or nothing) and the trigger came
    before the hang; the timeline gains the aligned storage/hardware lines.
    """
    facts = ctx.facts.chain
    if facts is None:
        return
    # a run the verdict found healthy has no root cause: lines that would have started a
    # chain (a DNS lookup retried, a storage warning) stay findings, not its category
    failed = triage.get("shape") != "none"
    steps = facts.steps
    if failed and (len(steps) >= 2 or (steps and not root_cause.get("chain"))):
        root_cause["chain"] = steps
    trigger, category = facts.trigger, facts.category
    if failed and trigger is not None and category:
        root_cause["chain_trigger"] = {
            "category": category,
            "event": facts.label,
            **evidence(trigger),
        }
        by_signature = str(root_cause.get("decided_by") or "").startswith("signature")
        if (
            root_cause.get("category", "UNKNOWN") in ("UNKNOWN", "NETWORK")
            and category != "NETWORK"
            and facts.precedes
            and not (by_signature and trigger.kind == "python_exception")
        ):
            root_cause["category"] = category
            root_cause["category_from"] = "chain trigger (the root category follows the trigger)"
            if triage.get("category") in ("UNKNOWN", "NETWORK"):
                triage["category"] = category
    offsets = facts.clock_offsets
    if offsets:
        root_cause["clock_offsets"] = {f: o for f, o in sorted(offsets.items())}
    have = {(x.get("file"), x.get("line")) for x in timeline}
    per_kind: dict[str, int] = {}
    for item in facts.timeline:
        key, kind = (item["file"], item["line"]), item["event"]
        if key in have or per_kind.get(kind, 0) >= 8:
            continue
        per_kind[kind] = per_kind.get(kind, 0) + 1
        timeline.append(item)
        have.add(key)
    for item in timeline:
        if item.get("file") in offsets and "clock_offset_seconds" not in item:
            item["clock_offset_seconds"] = offsets[item["file"]]
    timeline.sort(key=lambda x: (x.get("time") or "9999", x.get("file") or "", x.get("line") or 0))
    del timeline[ctx.options.max_timeline :]


register_analyzer(ChainAnalyzer())
