"""Per-rank NCCL state and roles, from every watchdog / heartbeat / flight-recorder message.

Roles (one per rank and process group):
- ``straggler``: last enqueued == last completed, below the sequence number the
  others wait on — the rank never entered the collective (stuck outside NCCL);
- ``ahead``: completed the collective the others wait on (e.g. the broadcast root);
- ``initiator``: its own watchdog fired and it is inside the collective;
- ``notified``: it only observed another rank's dump signal;
- ``waiting``: inside the collective (pending work) without its own timeout.
The initiator is usually a victim; the culprit often never logs a timeout.
Only PG 0's heartbeat prints dump-signal lines, with PG 0's counters.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..model import Event
from . import Context, register_analyzer

OWN = {
    "watchdog_timeout",
    "watchdog_failure",
    "dump_first",
    "async_exception",
    "blocking_wait_timeout",
}
STATE = OWN | {"dump_observed", "dump_received", "fr_status", "comm_aborted", "watchdog_exit"}


def _row(rank: int, pg: str, ev: Event) -> dict[str, Any]:
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
        rows: dict[tuple[int, str], dict[str, Any]] = {}
        own: set[int] = set()
        notified_from: dict[int, int | None] = {}
        for rank, kinds in per_rank.items():
            if any(k in kinds for k in OWN):
                own.add(rank)
            for ev in kinds.get("watchdog_failure", []):
                pg = ev.fields.get("pg", "?")
                if (rank, pg) in rows or "seq" not in ev.fields:
                    continue
                r = rows[(rank, pg)] = _row(rank, pg, ev)
                r.update(
                    seq=ev.fields["seq"],
                    last_enqueued=ev.fields["last_enqueued"],
                    last_completed=ev.fields["last_completed"],
                )
            for ev in kinds.get("fr_status", []):
                pg = ev.fields.get("pg", "?")
                if (rank, pg) in rows:
                    continue
                r = rows[(rank, pg)] = _row(rank, pg, ev)
                r.update(
                    seq=ev.fields.get("seq"),
                    op=ev.fields.get("op"),
                    timeout_ms=ev.fields.get("timeout_ms"),
                    last_enqueued=ev.fields.get("last_enqueued"),
                    last_completed=ev.fields.get("last_completed"),
                )
            for ev in (
                kinds.get("watchdog_timeout", [])
                + kinds.get("async_exception", [])
                + kinds.get("blocking_wait_timeout", [])
            ):
                seq = ev.fields.get("seq")
                if seq is None:
                    continue
                match = [r for (rk, _pg), r in rows.items() if rk == rank and r["seq"] == seq]
                if not match:
                    pg = ev.fields.get("pg", "?")
                    if (rank, pg) in rows:
                        continue
                    r = rows[(rank, pg)] = _row(rank, pg, ev)
                    r["seq"] = seq
                    match = [r]
                for r in match:
                    r["op"] = r["op"] or ev.fields.get("op")
                    r["timeout_ms"] = r["timeout_ms"] or ev.fields.get("timeout_ms")
            for ev in kinds.get("dump_received", []):
                if ev.fields.get("from_rank") is not None:
                    notified_from.setdefault(rank, ev.fields["from_rank"])
                elif ev.fields.get("from_self"):
                    own.add(rank)
                if (
                    (rank, "0") not in rows
                    and (rank, "?") not in rows
                    and "last_enqueued" in ev.fields
                ):
                    r = rows[(rank, "0")] = _row(rank, "0", ev)
                    r.update(
                        last_enqueued=ev.fields["last_enqueued"],
                        last_completed=ev.fields["last_completed"],
                    )
            if kinds.get("dump_observed") and rank not in notified_from:
                notified_from[rank] = None
        notified = {r for r in notified_from if r not in own}

        # the sequence number each process group is stuck on
        targets: dict[str, int | None] = {}
        for pg in {pg for (_r, pg) in rows}:
            seqs = [
                r["seq"]
                for (_rk, p), r in rows.items()
                if p == pg and r["seq"] is not None and r["rank"] in own
            ]
            if seqs:
                targets[pg] = Counter(seqs).most_common(1)[0][0]
            else:
                enq = [
                    r["last_enqueued"]
                    for (_rk, p), r in rows.items()
                    if p == pg and r["last_enqueued"] is not None
                ]
                pending = any(
                    r["last_enqueued"] > r["last_completed"]
                    for (_rk, p), r in rows.items()
                    if p == pg
                    and r["last_enqueued"] is not None
                    and r["last_completed"] is not None
                )
                # nothing pending on any rank of the group: nobody waits, nothing is stuck there
                targets[pg] = max(enq) if enq and pending else None
        if "0" in targets and "?" in targets and targets["0"] is None:
            targets["0"] = targets["?"]
        for r in rows.values():
            e, c, tgt = r["last_enqueued"], r["last_completed"], targets.get(r["pg"])
            if tgt is None and r["pg"] == "0":
                tgt = targets.get("?")
            if e is not None and c is not None and e == c and tgt is not None and c < tgt:
                r["role"] = "straggler"
            elif (c is not None and tgt is not None and c >= tgt and r["rank"] not in own) or (
                c is not None
                and tgt is not None
                and c >= tgt
                and r["rank"] in own
                and r["seq"] not in (None, tgt)
            ):
                r["role"] = "ahead"
            elif r["rank"] in own:
                r["role"] = "initiator"
            elif r["rank"] in notified:
                r["role"] = "notified"
            else:
                r["role"] = "waiting"
            r["seq"] = r["seq"] if r["seq"] is not None else tgt
        # a straggler never logged the op it failed to join: take it from the ranks waiting in it
        ops = Counter(
            (r["pg"], r["seq"], r["op"])
            for r in rows.values()
            if r["op"] and r["role"] == "initiator"
        )
        for r in rows.values():
            if r["role"] == "straggler" and not r["op"]:
                same = [
                    (n, op)
                    for (pg, seq, op), n in ops.items()
                    if seq == r["seq"] and pg in (r["pg"], "?", "0")
                ]
                if same:
                    r["op"] = max(same)[1]
        stragglers = sorted({r["rank"] for r in rows.values() if r["role"] == "straggler"})
        ahead = sorted({r["rank"] for r in rows.values() if r["role"] == "ahead"})
        for rank in notified:
            if not any(rk == rank for (rk, _pg) in rows):
                ev = per_rank[rank].get(
                    "dump_observed", per_rank[rank].get("dump_received", [None])
                )[0]
                if ev is not None:
                    r = rows[(rank, "0")] = _row(rank, "0", ev)
                    r["role"] = "notified"

        ordered = sorted(rows.values(), key=lambda r: (r["rank"], r["pg"]))
        seen = ctx.facts.seen
        with_state = {r["rank"] for r in ordered}
        in_coll = [
            r
            for r in ordered
            if r["role"] == "initiator"
            and r["last_enqueued"] is not None
            and r["last_completed"] is not None
            and r["last_enqueued"] > r["last_completed"]
        ]
        world = ctx.doc["job"].get("world_size") or len(seen)
        silent = (
            sorted(seen - with_state)
            if with_state and len(with_state) >= 0.5 * max(1, len(seen))
            else []
        )
        # "Every rank entered" is only said when no rank whose log we have is silent: a
        # rank that crashed (OOM, segfault) before the collective never entered it, and
        # calling the hang a fabric problem would contradict that rank's own error.
        all_in = (
            bool(ordered)
            and not stragglers
            and not ahead
            and not silent
            and len({r["rank"] for r in in_coll}) >= max(2, int(0.9 * world))
        )
        ctx.facts.nccl = {
            "rows": ordered,
            "groups": _groups(ordered),
            "targets": targets,
            "own": own,
            "notified": notified,
            "stragglers": stragglers,
            "ahead": ahead,
            "all_in_collective": all_in,
            "silent": silent,
            "notified_from": notified_from,
        }
        self._findings(ctx, per_rank, ordered, targets, stragglers, ahead, notified, all_in, silent)

    def _findings(
        self,
        ctx: Context,
        per_rank: dict[int, dict[str, list[Event]]],
        rows: list[dict[str, Any]],
        targets: dict[str, int | None],
        stragglers: list[int],
        ahead: list[int],
        notified: set[int],
        all_in: bool,
        silent: list[int],
    ) -> None:
        timeouts = ctx.kinds("watchdog_timeout", "watchdog_failure")
        if timeouts:
            rks = sorted({e.rank for e in timeouts if e.rank is not None})
            first = timeouts[0]
            pg = first.fields.get("pg") or "0"
            r0 = next((r for r in rows if r["role"] == "initiator" and r["op"]), None)
            ff = first.fields
            if r0:
                what = f"{r0['op']} seq {r0['seq']}"
                tms = r0.get("timeout_ms")
            else:  # no global rank known (e.g. a `what():` line without [rankN]:)
                seq = ff.get("seq") if ff.get("seq") is not None else targets.get(pg)
                what = f"{ff.get('op') or 'the collective'} seq {seq if seq is not None else '?'}"
                tms = ff.get("timeout_ms")
            to = f" after {tms / 60000:.0f} min" if tms else ""
            if rks:
                who = f"{len(rks)} rank(s)"
            else:
                gr = {(e.fields.get("pg"), e.fields.get("group_rank")) for e in timeouts}
                gr.discard((None, None))
                who = (
                    ", ".join(
                        f"group rank {g} of PG {p or '?'}" for p, g in sorted(gr, key=str)[:4]
                    )
                    if gr
                    else "a rank"
                ) + " (global rank not in the log)"
            ctx.add_finding(
                phase="localization",
                kind="nccl_watchdog_timeout",
                title=f"{who} timed out in {what}{to}",
                detail="The ranks whose own watchdog fired were waiting inside the collective; they are usually victims of a rank that never joined.",
                confidence=0.95,
                ranks=rks,
                evidence_events=[first] + [e for e in timeouts[1:3]],
            )
        for rank in stragglers[:16]:
            r = next(x for x in rows if x["rank"] == rank and x["role"] == "straggler")
            ev = r["_ev"]
            ctx.add_finding(
                phase="localization",
                kind="straggler",
                title=f"Rank {rank} never entered collective {targets.get(r['pg']) or r['seq']} (last enqueued = last completed = {r['last_completed']})",
                detail="No NCCL work was pending on this rank: it was stuck outside NCCL (training loop, data loading, host code) while the others waited.",
                confidence=0.9,
                ranks=[rank],
                hosts=[h for h in [ctx.facts.rank_host.get(rank)] if h],
                evidence_events=[ev],
            )
        firsts = ctx.kinds("dump_first")
        if firsts:
            e = firsts[0]
            ctx.add_finding(
                phase="localization",
                kind="nccl_initiator",
                title=f"Rank {e.rank} was the first to signal the flight-recorder dump ({len({x.rank for x in firsts})} rank(s) signalled)",
                detail="The initiator is the first rank whose watchdog fired; it is usually a victim waiting on the culprit.",
                confidence=0.8,
                ranks=sorted({x.rank for x in firsts if x.rank is not None}),
                evidence_events=[e],
            )
        if notified:
            evs = [
                per_rank[r].get("dump_received", per_rank[r].get("dump_observed", []))[0]
                for r in sorted(notified)
            ]
            ctx.add_finding(
                phase="localization",
                kind="nccl_notified",
                title=f"{len(notified)} rank(s) only observed another rank's dump signal",
                detail="These ranks did not detect the failure themselves.",
                confidence=0.8,
                ranks=sorted(notified),
                evidence_events=evs[:3],
            )
        if ahead:
            ev = next(r["_ev"] for r in rows if r["rank"] == ahead[0] and r["role"] == "ahead")
            ctx.add_finding(
                phase="localization",
                kind="nccl_ahead",
                title=f"Rank(s) {', '.join(map(str, ahead[:8]))} completed the collective the others wait on",
                detail="Typical of a broadcast root, which can complete its send before the receivers join.",
                confidence=0.7,
                ranks=ahead,
                evidence_events=[ev],
            )
        if all_in:
            evs = [r["_ev"] for r in rows if r["role"] == "initiator"][:3]
            ctx.add_finding(
                phase="localization",
                kind="all_ranks_in_collective",
                title="Every rank entered the stuck collective and none completed it",
                detail="No rank is missing from the collective: the collective itself did not complete (fabric, NCCL), not a straggler.",
                confidence=0.8,
                ranks=sorted({r["rank"] for r in rows}),
                evidence_events=evs,
            )
        if silent and len(silent) <= 32:
            evs = [e for e in ctx.events if e.rank in set(silent)][:3]
            ctx.add_finding(
                phase="localization",
                kind="ranks_without_nccl_state",
                title=f"Rank(s) {', '.join(map(str, silent[:16]))} printed no watchdog or dump message",
                detail="A rank that crashed or hung before the others timed out often prints nothing from the watchdog.",
                confidence=0.6,
                ranks=silent,
                evidence_events=evs,
            )


def _groups(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows grouped by identical state (for a compact display of thousands of ranks)."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for r in rows:
        key = (r["role"], r["pg"], r["seq"], r["op"], r["last_enqueued"], r["last_completed"])
        groups.setdefault(key, []).append(r["rank"])
    out = [
        {
            "role": k[0],
            "pg": k[1],
            "seq": k[2],
            "op": k[3],
            "last_enqueued": k[4],
            "last_completed": k[5],
            "ranks": v,
        }
        for k, v in groups.items()
    ]
    order = {"straggler": 0, "ahead": 1, "initiator": 2, "waiting": 3, "notified": 4}
    out.sort(key=lambda g: (order.get(g["role"], 9), -len(g["ranks"])))
    return out


register_analyzer(NcclAnalyzer())
