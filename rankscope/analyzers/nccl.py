"""Per-rank NCCL state and roles, from every watchdog / heartbeat / flight-recorder message.

Roles (one per rank and process group):
- ``straggler``: last enqueued == last completed, below the sequence number the
  others wait on — the rank never entered the collective (stuck outside NCCL);
- ``ahead``: completed the collective the others wait on (e.g. the broadcast root);
- ``initiator``: its own watchdog fired and it is inside the collective;
- ``notified``: it only observed another rank's dump signal;
- ``waiting``: inside the collective (pending work) without its own timeout.

``initiator_ranks`` (the document's contract) are the ranks whose own watchdog fired:
ranks that printed a timeout / failure / async error / dump-signal line of their own
watchdog, plus every rank that a notified rank names in "Received a dump signal due to
a collective timeout from  rank N" (N's watchdog broadcast the signal, even when N's
own log is not in the upload). Not an initiator: a rank whose heartbeat monitor found
the watchdog stuck (``watchdog_hang``: the thread hung, it caught nothing).
``first_initiator`` is the one that fired first, only where the logs can order them
(timestamps, or one file's print order).
The initiator is usually a victim; the culprit often never logs a timeout.
Only PG 0's heartbeat prints dump-signal lines, with PG 0's counters.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..model import Event
from . import Context, register_analyzer

# events that mean the rank's own watchdog fired (a timeout or an error it detected)
OWN = {
    "watchdog_timeout",
    "watchdog_failure",
    "dump_first",
    "async_exception",
    "blocking_wait_timeout",
    "watchdog_exit",
}
STATE = OWN | {"dump_observed", "dump_received", "fr_status", "comm_aborted"}
# events carrying the failed work (sequence number, op, timeout)
WORK_KINDS = ("watchdog_timeout", "async_exception", "blocking_wait_timeout")

Row = dict[str, Any]


def quotable(events: list[Event]) -> list[Event]:
    """``events`` (already in time order) with those printed on a line of their own first:
    a timeout glued behind a progress bar proves the same thing but quotes badly."""
    return sorted(events, key=lambda e: bool(e.fields.get("glued")))


def _row(rank: int, pg: str, ev: Event) -> Row:
    return {
        "rank": rank,
        "pg": pg,
        "pg_desc": ev.fields.get("pg_desc"),
        "seq": None,
        "op": None,
        "last_enqueued": None,
        "last_completed": None,
        "timeout_ms": None,
        "role": "waiting",
        "_ev": ev,
    }


@dataclass
class _State:
    """What the steps below build, in order."""

    per_rank: dict[int, dict[str, list[Event]]]
    rows: dict[tuple[int, str], Row] = field(default_factory=dict)
    by_rank: dict[int, list[Row]] = field(default_factory=dict)  # rows of each rank, in order
    own: set[int] = field(default_factory=set)  # own watchdog fired, seen in their logs
    named: set[int] = field(default_factory=set)  # named by a notified rank's dump line
    notified_from: dict[int, int | None] = field(default_factory=dict)
    notified: set[int] = field(default_factory=set)
    targets: dict[str, int | None] = field(default_factory=dict)
    stragglers: list[int] = field(default_factory=list)
    ahead: list[int] = field(default_factory=list)
    ordered: list[Row] = field(default_factory=list)
    all_in: bool = False
    silent: list[int] = field(default_factory=list)

    @property
    def initiators(self) -> set[int]:
        return self.own | self.named

    def add_row(self, rank: int, pg: str, ev: Event) -> Row:
        """A new row for (rank, process group), indexed by rank as well: a rank's rows are
        looked up without going through every rank's (8,192 ranks: 67 M comparisons)."""
        r = self.rows[(rank, pg)] = _row(rank, pg, ev)
        self.by_rank.setdefault(rank, []).append(r)
        return r


# --- step 1: one row per (rank, process group) from each kind of state message -------------


def _from_failures(st: _State, rank: int, kinds: dict[str, list[Event]]) -> None:
    for ev in kinds.get("watchdog_failure", []):
        pg = ev.fields.get("pg", "?")
        if (rank, pg) in st.rows or "seq" not in ev.fields:
            continue
        r = st.add_row(rank, pg, ev)
        r.update(
            seq=ev.fields["seq"],
            last_enqueued=ev.fields["last_enqueued"],
            last_completed=ev.fields["last_completed"],
        )


def _from_flight_recorder(st: _State, rank: int, kinds: dict[str, list[Event]]) -> None:
    for ev in kinds.get("fr_status", []):
        pg = ev.fields.get("pg", "?")
        if (rank, pg) in st.rows:
            continue
        r = st.add_row(rank, pg, ev)
        r.update({k: ev.fields.get(k) for k in ("seq", "op", "timeout_ms")})
        r.update({k: ev.fields.get(k) for k in ("last_enqueued", "last_completed")})


def _from_work(st: _State, rank: int, kinds: dict[str, list[Event]]) -> None:
    """Timeouts / async errors name the work: its op and timeout complete the row."""
    for ev in [e for k in WORK_KINDS for e in kinds.get(k, [])]:
        seq = ev.fields.get("seq")
        if seq is None:
            continue
        match = [r for r in st.by_rank.get(rank, ()) if r["seq"] == seq]
        if not match:
            pg = ev.fields.get("pg", "?")
            if (rank, pg) in st.rows:
                continue
            r = st.add_row(rank, pg, ev)
            r["seq"] = seq
            match = [r]
        for r in match:
            r["op"] = r["op"] or ev.fields.get("op")
            r["timeout_ms"] = r["timeout_ms"] or ev.fields.get("timeout_ms")


def _from_dump_signal(st: _State, rank: int, kinds: dict[str, list[Event]]) -> None:
    """PG 0's heartbeat: "from this local rank" is its own watchdog, "from  rank N" names N."""
    for ev in kinds.get("dump_received", []) + kinds.get("dump_observed", []):
        src = ev.fields.get("from_rank")
        if src is not None:
            st.notified_from.setdefault(rank, src)
            if src >= 0:  # -1: the store could not tell which rank signalled
                st.named.add(src)
        elif ev.fields.get("from_self"):
            st.own.add(rank)
        if (
            (rank, "0") not in st.rows
            and (rank, "?") not in st.rows
            and "last_enqueued" in ev.fields
        ):
            r = st.add_row(rank, "0", ev)
            r.update(
                last_enqueued=ev.fields["last_enqueued"],
                last_completed=ev.fields["last_completed"],
            )
    if kinds.get("dump_observed") and rank not in st.notified_from:
        st.notified_from[rank] = None


ROW_STEPS: tuple[Callable[[_State, int, dict[str, list[Event]]], None], ...] = (
    _from_failures,
    _from_flight_recorder,
    _from_work,
    _from_dump_signal,
)


def _build_rows(st: _State) -> None:
    for rank, kinds in st.per_rank.items():
        if not OWN.isdisjoint(kinds):
            st.own.add(rank)
        for step in ROW_STEPS:
            step(st, rank, kinds)
    st.notified = {r for r in st.notified_from if r not in st.own}


# --- step 2: the sequence number each process group is stuck on ----------------------------


def _target(st: _State, pg: str) -> int | None:
    in_pg = [r for (_rk, p), r in st.rows.items() if p == pg]
    seqs = [r["seq"] for r in in_pg if r["seq"] is not None and r["rank"] in st.own]
    if seqs:
        return Counter(seqs).most_common(1)[0][0]
    enq = [r["last_enqueued"] for r in in_pg if r["last_enqueued"] is not None]
    pending = any(
        r["last_enqueued"] > r["last_completed"]
        for r in in_pg
        if r["last_enqueued"] is not None and r["last_completed"] is not None
    )
    # nothing pending on any rank of the group: nobody waits, nothing is stuck there
    return max(enq) if enq and pending else None


def _targets(st: _State) -> None:
    st.targets = {pg: _target(st, pg) for pg in {pg for (_r, pg) in st.rows}}
    if "0" in st.targets and "?" in st.targets and st.targets["0"] is None:
        st.targets["0"] = st.targets["?"]


# --- step 3: roles -------------------------------------------------------------------------


def _role(st: _State, r: Row) -> str:
    e, c = r["last_enqueued"], r["last_completed"]
    tgt = st.targets.get(r["pg"])
    if tgt is None and r["pg"] == "0":
        tgt = st.targets.get("?")
    own = r["rank"] in st.own
    if e is not None and c is not None and e == c and tgt is not None and c < tgt:
        return "straggler"
    if c is not None and tgt is not None and c >= tgt and (not own or r["seq"] not in (None, tgt)):
        return "ahead"
    if own:
        return "initiator"
    return "notified" if r["rank"] in st.notified else "waiting"


def _roles(st: _State) -> None:
    for r in st.rows.values():
        tgt = st.targets.get(r["pg"])
        if tgt is None and r["pg"] == "0":
            tgt = st.targets.get("?")
        r["role"] = _role(st, r)
        r["seq"] = r["seq"] if r["seq"] is not None else tgt
    _straggler_ops(st)
    st.stragglers = sorted({r["rank"] for r in st.rows.values() if r["role"] == "straggler"})
    st.ahead = sorted({r["rank"] for r in st.rows.values() if r["role"] == "ahead"})
    for rank in st.notified:
        if rank in st.by_rank:
            continue
        kinds = st.per_rank[rank]
        ev = kinds.get("dump_observed", kinds.get("dump_received", [None]))[0]
        if ev is not None:
            st.add_row(rank, "0", ev)["role"] = "notified"
    st.ordered = sorted(st.rows.values(), key=lambda r: (r["rank"], r["pg"]))


def _straggler_ops(st: _State) -> None:
    """A straggler never logged the op it failed to join: take it from the ranks waiting in it."""
    ops = Counter(
        (r["pg"], r["seq"], r["op"])
        for r in st.rows.values()
        if r["op"] and r["role"] == "initiator"
    )
    for r in st.rows.values():
        if r["role"] != "straggler" or r["op"]:
            continue
        same = [
            (n, op)
            for (pg, seq, op), n in ops.items()
            if seq == r["seq"] and pg in (r["pg"], "?", "0")
        ]
        if same:
            r["op"] = max(same)[1]


# --- step 4: job-wide conclusions ----------------------------------------------------------


def _coverage(st: _State, ctx: Context) -> None:
    seen = ctx.facts.seen
    with_state = {r["rank"] for r in st.ordered}
    in_coll = {
        r["rank"]
        for r in st.ordered
        if r["role"] == "initiator"
        and r["last_enqueued"] is not None
        and r["last_completed"] is not None
        and r["last_enqueued"] > r["last_completed"]
    }
    # ranks of one group waiting at different sequence numbers are not in one collective
    # (a desync: each waits on a collective the others never issue)
    apart = any(
        r["seq"] is not None and st.targets.get(r["pg"]) not in (None, r["seq"])
        for r in st.ordered
        if r["rank"] in in_coll and r["role"] == "initiator"
    )
    world = ctx.doc["job"].get("world_size") or len(seen)
    # a rank whose heartbeat monitor reports its watchdog stuck printed a watchdog message:
    # it was alive inside NCCL's machinery, not silent (nor an initiator: it caught nothing)
    stuck = {e.rank for e in ctx.by_kind.get("watchdog_hang", []) if e.rank is not None}
    if with_state and len(with_state) >= 0.5 * max(1, len(seen)):
        st.silent = sorted(seen - with_state - stuck | _rank0_absent(st, seen))
    # "Every rank entered" is only said when no rank whose log we have is silent: a
    # rank that crashed (OOM, segfault) before the collective never entered it, and
    # calling the hang a fabric problem would contradict that rank's own error.
    st.all_in = (
        bool(st.ordered)
        and not st.stragglers
        and not st.ahead
        and not st.silent
        and not apart
        and len(in_coll) >= max(2, int(0.9 * world))
    )


def _rank0_absent(st: _State, seen: set[int]) -> set[int]:
    """Rank 0 when it printed nothing at all while every rank from 1 up to the highest
    reports the timeout: ranks are numbered from 0, so rank 0 is in the job, and it is the
    rank that does extra work alone (evaluation, logging, checkpoints) and never reached the
    collective. A gap among the other ranks is not read so: pasted excerpts often keep only
    some ranks' lines. Only the default group's rows count (a sub-group's own numbering
    names no global rank)."""
    timed = {r["rank"] for r in st.ordered if r["role"] == "initiator" and r["pg"] in ("0", "?")}
    if len(timed) < 2 or 0 in seen or timed != set(range(1, max(timed) + 1)):
        return set()
    return {0}


def _first_initiator(ctx: Context, st: _State) -> dict[str, Any] | None:
    """The rank whose own watchdog fired first, where the logs order the firings: by
    timestamp when every firing has one, else by print order when they share one file."""
    # unsorted: min() gives the first of equal keys in this order, as ctx.kinds' stable
    # sort by the same (time, file, line) would
    fired = [
        e
        for k in sorted(OWN)
        for e in ctx.by_kind.get(k, ())
        if e.rank is not None and e.rank in st.own
    ]
    if not fired:
        return None
    if all(e.time for e in fired):
        e = min(fired, key=lambda x: (x.time or "", x.file, x.line))
        how = "timestamp"
    elif len({e.file for e in fired}) == 1:
        fired = [e for e in ctx.kinds(*sorted(OWN)) if e.rank is not None and e.rank in st.own]
        e = min(fired, key=lambda x: x.line)
        how = "print order in one file"
    else:
        return None
    return {"rank": e.rank, "time": e.time, "file": e.file, "line": e.line, "by": how}


def _publish(ctx: Context, st: _State) -> None:
    """The NCCL facts; the localization analyzer puts them into the document."""
    ctx.facts.nccl = {
        "rows": st.ordered,
        "groups": _groups(st.ordered),
        "targets": st.targets,
        "own": st.own,
        "initiators": st.initiators,
        "first_initiator": _first_initiator(ctx, st),
        "notified": st.notified,
        "stragglers": st.stragglers,
        "ahead": st.ahead,
        "all_in_collective": st.all_in,
        "silent": st.silent,
        "notified_from": st.notified_from,
    }


class NcclAnalyzer:
    name = "nccl"
    phase = "localization"
    order = 20
    reads = ("events", "doc.job", "facts.seen", "facts.rank_host")
    writes = ("facts.nccl", "findings")

    def run(self, ctx: Context) -> None:
        per_rank: dict[int, dict[str, list[Event]]] = {}
        for e in ctx.events:
            if e.kind in STATE and e.rank is not None:
                per_rank.setdefault(e.rank, {}).setdefault(e.kind, []).append(e)
        st = _State(per_rank)
        _build_rows(st)
        _targets(st)
        _roles(st)
        _coverage(st, ctx)
        _publish(ctx, st)
        for finding in FINDINGS:
            finding(ctx, st)


# --- findings: one function per finding kind ----------------------------------------------


def _timeout_what(st: _State, first: Event) -> tuple[str, int | None]:
    r0 = next((r for r in st.ordered if r["role"] == "initiator" and r["op"]), None)
    if r0:
        return f"{r0['op']} seq {r0['seq']}", r0.get("timeout_ms")
    # no global rank known (e.g. a `what():` line without [rankN]:)
    ff = first.fields
    seq = ff.get("seq") if ff.get("seq") is not None else st.targets.get(ff.get("pg") or "0")
    what = f"{ff.get('op') or 'the collective'} seq {seq if seq is not None else '?'}"
    return what, ff.get("timeout_ms")


def _timeout_who(timeouts: list[Event], rks: list[int]) -> str:
    if rks:
        return f"{len(rks)} rank(s)"
    gr = {(e.fields.get("pg"), e.fields.get("group_rank")) for e in timeouts}
    gr.discard((None, None))
    named = ", ".join(f"group rank {g} of PG {p or '?'}" for p, g in sorted(gr, key=str)[:4])
    return (named or "a rank") + " (global rank not in the log)"


def _finding_timeout(ctx: Context, st: _State) -> None:
    timeouts = quotable(ctx.kinds("watchdog_timeout", "watchdog_failure"))
    if not timeouts:
        return
    rks = sorted({e.rank for e in timeouts if e.rank is not None})
    what, tms = _timeout_what(st, timeouts[0])
    to = f" after {tms / 60000:.0f} min" if tms else ""
    ctx.add_finding(
        phase="localization",
        kind="nccl_watchdog_timeout",
        title=f"{_timeout_who(timeouts, rks)} timed out in {what}{to}",
        detail="The ranks whose own watchdog fired were waiting inside the collective; they are usually victims of a rank that never joined.",
        confidence=0.95,
        ranks=rks,
        evidence_events=timeouts[:3],
    )


def _finding_stragglers(ctx: Context, st: _State) -> None:
    rows = st.ordered
    for rank in st.stragglers[:16]:
        r = next(x for x in rows if x["rank"] == rank and x["role"] == "straggler")
        ctx.add_finding(
            phase="localization",
            kind="straggler",
            title=f"Rank {rank} never entered collective {st.targets.get(r['pg']) or r['seq']} (last enqueued = last completed = {r['last_completed']})",
            detail="No NCCL work was pending on this rank: it was stuck outside NCCL (training loop, data loading, host code) while the others waited.",
            confidence=0.9,
            ranks=[rank],
            hosts=[h for h in [ctx.facts.rank_host.get(rank)] if h],
            evidence_events=[r["_ev"]],
        )


def _finding_first_signal(ctx: Context, st: _State) -> None:
    firsts = ctx.kinds("dump_first")
    if not firsts:
        return
    e = firsts[0]
    ctx.add_finding(
        phase="localization",
        kind="nccl_initiator",
        title=f"Rank {e.rank} was the first to signal the flight-recorder dump ({len({x.rank for x in firsts})} rank(s) signalled)",
        detail="An initiator is a rank whose own watchdog fired; it is usually a victim waiting on the culprit.",
        confidence=0.8,
        ranks=sorted({x.rank for x in firsts if x.rank is not None}),
        evidence_events=[e],
    )


def _finding_named(ctx: Context, st: _State) -> None:
    """Initiators known only because notified ranks name them (their own log is absent)."""
    absent = sorted(st.named - st.own)
    if not absent:
        return
    evs = [
        e
        for e in ctx.kinds("dump_received")
        if e.fields.get("from_rank") in set(absent) and e.rank is not None
    ]
    if not evs:
        return
    ctx.add_finding(
        phase="localization",
        kind="nccl_initiator_named",
        title=f"Rank(s) {', '.join(map(str, absent[:8]))} signalled a collective timeout (named by the notified ranks; no watchdog line of their own is here)",
        detail="A notified rank's heartbeat names the global rank that broadcast the dump signal: that rank's own watchdog fired. Its log would show which collective it waited on.",
        confidence=0.85,
        ranks=absent,
        evidence_events=evs[:3],
    )


def _finding_notified(ctx: Context, st: _State) -> None:
    if not st.notified:
        return
    evs = [
        st.per_rank[r].get("dump_received", st.per_rank[r].get("dump_observed", []))[0]
        for r in sorted(st.notified)
    ]
    ctx.add_finding(
        phase="localization",
        kind="nccl_notified",
        title=f"{len(st.notified)} rank(s) only observed another rank's dump signal",
        detail="These ranks did not detect the failure themselves.",
        confidence=0.8,
        ranks=sorted(st.notified),
        evidence_events=evs[:3],
    )


def _finding_ahead(ctx: Context, st: _State) -> None:
    if not st.ahead:
        return
    ev = next(r["_ev"] for r in st.ordered if r["rank"] == st.ahead[0] and r["role"] == "ahead")
    ctx.add_finding(
        phase="localization",
        kind="nccl_ahead",
        title=f"Rank(s) {', '.join(map(str, st.ahead[:8]))} completed the collective the others wait on",
        detail="Typical of a broadcast root, which can complete its send before the receivers join.",
        confidence=0.7,
        ranks=st.ahead,
        evidence_events=[ev],
    )


def _finding_all_in(ctx: Context, st: _State) -> None:
    if not st.all_in:
        return
    ctx.add_finding(
        phase="localization",
        kind="all_ranks_in_collective",
        title="Every rank entered the stuck collective and none completed it",
        detail="No rank is missing from the collective: the collective itself did not complete (fabric, NCCL), not a straggler.",
        confidence=0.8,
        ranks=sorted({r["rank"] for r in st.ordered}),
        evidence_events=[r["_ev"] for r in st.ordered if r["role"] == "initiator"][:3],
    )


def _finding_silent(ctx: Context, st: _State) -> None:
    if not st.silent or len(st.silent) > 32:
        return
    silent = set(st.silent)
    ctx.add_finding(
        phase="localization",
        kind="ranks_without_nccl_state",
        title=f"Rank(s) {', '.join(map(str, st.silent[:16]))} printed no watchdog or dump message",
        detail="A rank that crashed or hung before the others timed out often prints nothing from the watchdog.",
        confidence=0.6,
        ranks=st.silent,
        evidence_events=[e for e in ctx.events if e.rank in silent][:3],
    )


FINDINGS: tuple[Callable[[Context, _State], None], ...] = (
    _finding_timeout,
    _finding_stragglers,
    _finding_first_signal,
    _finding_named,
    _finding_notified,
    _finding_ahead,
    _finding_all_in,
    _finding_silent,
)


def _groups(rows: list[Row]) -> list[dict[str, Any]]:
    """Rows grouped by identical state (for a compact display of thousands of ranks)."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for r in rows:
        key = (r["role"], r["pg"], r["seq"], r["op"], r["last_enqueued"], r["last_completed"])
        groups.setdefault(key, []).append(r["rank"])
    keys = ("role", "pg", "seq", "op", "last_enqueued", "last_completed")
    out = [{**dict(zip(keys, k, strict=True)), "ranks": v} for k, v in groups.items()]
    order = {"straggler": 0, "ahead": 1, "initiator": 2, "waiting": 3, "notified": 4}
    out.sort(key=lambda g: (order.get(g["role"], 9), -len(g["ranks"])))
    return out


register_analyzer(NcclAnalyzer())
