"""Cross-rank flight-recorder comparison: the first collective where the ranks' dumps diverge.

Per process group (``pg_config`` names its global ranks), every dump's kept
entries are lined up by ``collective_seq_id`` (p2p entries are not compared).
Ring-buffer wrap is aligned first: only sequence numbers at or above the
latest first sequence number held by any rank are compared (the per-group
form of "drop record_ids below the max first record_id").

Outcomes at the first diverging sequence number ``S``:
- ``not_joined``: some ranks never enqueued ``S`` (their ``last_enqueued`` is
  below it) while others did. With a rank waiting in ``S`` (not completed),
  the ranks that never joined are the stragglers — the culprits.
- ``type`` / ``size`` / ``dtype``: ranks enqueued different ops, sizes or
  dtypes. The odd ranks (a strict minority) are named; a tie names nobody.
  all_gather/reduce_scatter are checked against ``numel * group size``,
  all_reduce in == out, all_to_all only on the group-wide in/out totals (not
  at all for dumps ≤ 2.3), scatter/gather not across ranks.
- ``undecided``: every rank with a dump agrees but some ranks have no dump or
  no record of ``S``: the analysis is partial and blames nobody (unlike
  fr_trace, the first rank is never assumed innocent or guilty).
A ``completed`` vs ``scheduled`` state difference is reported (``state``) but
blames nobody: a broadcast root or a dump taken mid-flight shows it too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..model import Event, ParseResult
from ..parsers.flight_recorder import describe_entry
from ..render import rank_list as _short
from . import Context, register_analyzer
from .nccl import _groups

ALL_GATHER = {
    "all_gather",
    "_allgather_base",
    "allgather_into_tensor_coalesced",
    "all_gather_into_tensor",
}
REDUCE_SCATTER = {
    "reduce_scatter",
    "_reduce_scatter_base",
    "reduce_scatter_tensor_coalesced",
    "reduce_scatter_tensor",
}
ALL_TO_ALL = {"all_to_all", "alltoall", "alltoall_base", "all_to_all_single"}
NO_CROSS_SIZE = {"scatter", "gather", "coalesced"}
MAX_SPAN = 4000  # sequence numbers compared per group at most
MAX_LISTED = 64


def _members(ranges: list[list[int]] | None) -> set[int] | None:
    if not ranges:
        return None
    out: set[int] = set()
    for a, b in ranges:
        out.update(range(a, b + 1))
    return out


def _version_le_2_3(v: str) -> bool:
    try:
        major, minor = (int(x) for x in v.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) <= (2, 3)


def _sig(e: dict[str, Any]) -> tuple[Any, ...]:
    return (
        e["op"],
        repr(e["input_sizes"]),
        repr(e["output_sizes"]),
        e["input_numel"],
        e["output_numel"],
        tuple(e["input_dtypes"]),
        tuple(e["output_dtypes"]),
        e["state"] == "completed",
    )


def _minority(values: dict[int, Any]) -> tuple[list[int], Any]:
    """Ranks whose value differs from a strict-majority value (none when there is no majority)."""
    counts = Counter(values.values())
    value, n = counts.most_common(1)[0]
    if n * 2 <= len(values):
        return [], None
    return sorted(r for r, v in values.items() if v != value), value


class _Dump:
    def __init__(self, result: ParseResult, fr: dict[str, Any]) -> None:
        self.result = result
        self.fr = fr
        self.rank: int = fr["rank"]

    def event(self, pg: str, e: dict[str, Any]) -> Event:
        return Event(
            kind="fr_entry",
            line=e.get("line") or 1,
            text=e.get("text") or describe_entry(pg, e),
            rank=self.rank,
            fields={
                "pg": pg,
                "seq": e["seq"],
                "op": e["op"],
                "described": bool(e.get("described")),
            },
            file=self.result.name,
        )

    def status_event(self, pg: str) -> Event:
        st = self.fr["pg_status"].get(pg, {})
        return Event(
            kind="fr_entry",
            line=1,
            text=(
                f"pg_status[{pg}]: last_enqueued_collective={st.get('last_enqueued')}, "
                f"last_completed_collective={st.get('last_completed')}"
            ),
            rank=self.rank,
            fields={"pg": pg, "described": True},
            file=self.result.name,
        )


def _records(
    g: dict[str, Any], dumps: dict[int, _Dump], with_dump: list[int]
) -> tuple[dict[int, dict[int, dict[str, Any]]], dict[int, int | None]]:
    """Each rank's collective records of the group by seq, and the last seq it enqueued."""
    seqs: dict[int, dict[int, dict[str, Any]]] = {}
    enq: dict[int, int | None] = {}
    for r in with_dump:
        pg_id = g["pg_id"].get(r)
        fr = dumps[r].fr
        by_seq = {
            e["seq"]: e
            for e in fr.get("entries", {}).get(pg_id, [])
            if not e["is_p2p"] and e["seq"] is not None
        }
        seqs[r] = by_seq
        st = fr.get("pg_status", {}).get(pg_id) or {}
        last = st.get("last_enqueued")
        top = max(by_seq) if by_seq else None
        enq[r] = (
            max(x for x in (last, top) if x is not None) if (last, top) != (None, None) else None
        )
    return seqs, enq


def _undecided_without_dumps(
    res: dict[str, Any],
    g: dict[str, Any],
    hi: int,
    with_dump: list[int],
    without: list[int],
    seqs: dict[int, dict[int, dict[str, Any]]],
    dumps: dict[int, _Dump],
) -> None:
    """No divergence among the dumps there are, but some ranks have none: undecided."""
    waiting = sorted(r for r in with_dump if (e := seqs[r].get(hi)) and e["state"] != "completed")
    res["outcome"] = "undecided"
    res["seq"] = hi
    res["waiting_ranks"] = waiting[:MAX_LISTED]
    res["_evidence"] = [dumps[r].event(g["pg_id"][r], seqs[r][hi]) for r in waiting[:1]]
    res["detail"] = (
        f"no divergence among the {len(with_dump)} dump(s)"
        + (f"; {len(waiting)} wait in seq {hi}" if waiting else "")
        + f"; rank(s) {_short(without)} have no dump"
    )


@dataclass
class _SeqRecords:
    """The records of one seq of one group, as the classification rules read them."""

    name: str
    g: dict[str, Any]
    s: int
    present: dict[int, dict[str, Any]]
    missing: list[int]
    unknown: list[int]
    op: Any
    waiting: list[int]
    ref_rank: int
    base: dict[str, Any]
    seqs: dict[int, dict[int, dict[str, Any]]]
    dumps: dict[int, _Dump]
    without: list[int]

    @classmethod
    def of(
        cls,
        name: str,
        g: dict[str, Any],
        s: int,
        at: dict[int, Any],
        present: dict[int, dict[str, Any]],
        seqs: dict[int, dict[int, dict[str, Any]]],
        dumps: dict[int, _Dump],
        without: list[int],
    ) -> _SeqRecords:
        missing = sorted(r for r, v in at.items() if v == "missing")
        op = Counter(e["op"] for e in present.values()).most_common(1)[0][0]
        waiting = sorted(r for r, e in present.items() if e["state"] != "completed")
        return cls(
            name=name,
            g=g,
            s=s,
            present=present,
            missing=missing,
            unknown=sorted(r for r, v in at.items() if v == "unknown"),
            op=op,
            waiting=waiting,
            ref_rank=waiting[0] if waiting else min(present),
            base={
                "seq": s,
                "op": op,
                "waiting_ranks": waiting[:MAX_LISTED],
                "missing_ranks": missing[:MAX_LISTED],
            },
            seqs=seqs,
            dumps=dumps,
            without=without,
        )

    def pg(self, r: int) -> Any:
        return self.g["pg_id"].get(r, self.name)


def _not_joined_finding(
    ctx: Context, g: dict[str, Any], where: str, evid: list[Event], blame: bool
) -> None:
    rank_host = ctx.facts.rank_host
    ctx.add_finding(
        phase="localization",
        kind="fr_not_joined",
        title=f"Rank(s) {_short(g['missing_ranks'])} never joined {where} (flight recorder)",
        detail="Not all ranks joined the collective: " + g["detail"] + ".",
        confidence=0.9 if blame else 0.5,
        ranks=g["culprit_ranks"] if blame else g["missing_ranks"],
        hosts=[rank_host[r] for r in g["culprit_ranks"] if r in rank_host],
        evidence_events=evid,
    )


def _mismatch_finding(
    ctx: Context, g: dict[str, Any], where: str, evid: list[Event], blame: bool
) -> None:
    """A collective that differs across ranks: a finding, and a SOFTWARE cause per line."""
    o = g["outcome"]
    label = {"type": "op type", "size": "size", "dtype": "dtype"}[o]
    who = f" on rank(s) {_short(g['culprit_ranks'])}" if g["culprit_ranks"] else ""
    f = ctx.add_finding(
        phase="localization",
        kind="fr_mismatch",
        title=f"Collective {label} mismatch{who} in {where} (flight recorder)",
        detail=g["detail"] + ("" if blame else " — no majority, no rank named") + ".",
        confidence=0.9 if blame else 0.6,
        ranks=g["culprit_ranks"],
        evidence_events=evid,
        category="SOFTWARE",
    )
    if f is None:
        return
    for ev in evid:
        if ev.rank in set(g["culprit_ranks"]) or not g["culprit_ranks"]:
            ctx.facts.causes.append(
                {
                    "category": "SOFTWARE",
                    "strength": 0.9 if blame else 0.6,
                    "event": Event(
                        kind="fr_mismatch",
                        line=ev.line,
                        text=ev.text,
                        rank=ev.rank,
                        fields=dict(ev.fields, mismatch=o),
                        file=ev.file,
                    ),
                    "label": f"collective {label} mismatch across ranks (flight recorder)",
                }
            )


def _partial_finding(
    ctx: Context,
    dumps: dict[int, _Dump],
    without: list[int],
    undecided: list[tuple[dict[str, Any], list[Event]]],
) -> None:
    d = next(iter(dumps.values()))
    evs = [e for _g, ev in undecided for e in ev[:1]]
    evs = evs or [d.status_event(next(iter(d.fr["pg_status"]), "0"))]
    what = (
        f"no dump from rank(s) {_short(without, 16)}"
        if without
        else "some ranks hold no record of the collective compared"
    )
    ctx.add_finding(
        phase="localization",
        kind="fr_partial",
        title=f"Flight-recorder comparison is partial: {what}",
        detail=" ".join(f"PG {g['pg']}: {g['detail']}." for g, _ev in undecided[:4])
        + " Ranks without a dump are not blamed, and neither is any rank by default:"
        " a divergence involving them would go unseen.",
        confidence=0.5,
        ranks=[],
        evidence_events=evs[:3],
    )


class FlightRecorderAnalyzer:
    name = "flight_recorder"
    phase = "localization"
    order = 32  # after nccl (20) and failures (30): it amends their conclusions
    reads = ("results", "doc.job", "facts.rank_host", "facts.nccl")
    writes = ("facts.flight_recorder", "facts.nccl", "facts.causes", "findings")

    def run(self, ctx: Context) -> None:
        dumps: dict[int, _Dump] = {}
        for r in ctx.results:
            fr = r.flight_recorder
            if r.error is None and fr and fr.get("rank") is not None and fr["rank"] not in dumps:
                dumps[fr["rank"]] = _Dump(r, fr)
        if len(dumps) < 2:
            return
        groups = self._groups(ctx, dumps)
        out: list[dict[str, Any]] = []
        without_dump: set[int] = set()
        for name, g in sorted(groups.items(), key=lambda kv: (len(kv[1]["members"]) * -1, kv[0])):
            res = self._compare(ctx, name, g, dumps)
            if res is None:
                continue
            without_dump.update(res.pop("_without_dump"))
            out.append(res)
        if not out:
            return
        versions = sorted({d.fr.get("version", "") for d in dumps.values()})
        ctx.facts.flight_recorder = {
            "dumps": len(dumps),
            "versions": versions,
            "ranks_without_dump": sorted(without_dump)[:4096],
            "partial": bool(without_dump) or any(g["outcome"] == "undecided" for g in out),
            "groups": [{k: v for k, v in g.items() if not k.startswith("_")} for g in out][:256],
        }
        if len(versions) > 1:
            ev = [next(d for d in dumps.values() if d.fr.get("version", "") == v) for v in versions]
            ctx.add_finding(
                phase="localization",
                kind="fr_version_mix",
                title=f"Flight-recorder dumps of different versions: {', '.join(versions)}",
                detail="Ranks ran different PyTorch builds, or the dumps come from different runs.",
                confidence=0.6,
                evidence_events=[d.status_event(next(iter(d.fr["pg_status"]), "0")) for d in ev],
            )
        self._report(ctx, out, dumps, sorted(without_dump))

    # -- grouping -----------------------------------------------------------
    def _groups(self, ctx: Context, dumps: dict[int, _Dump]) -> dict[str, dict[str, Any]]:
        name_of: dict[str, Counter[str]] = {}
        for d in dumps.values():
            for pg_id, (gname, _desc) in d.fr.get("pg_names", {}).items():
                name_of.setdefault(pg_id, Counter())[gname or pg_id] += 1
        groups: dict[str, dict[str, Any]] = {}
        world = ctx.doc["job"].get("world_size") or (max(dumps) + 1)
        for d in dumps.values():
            pg_ids = set(d.fr.get("entries", {})) | set(d.fr.get("pg_status", {}))
            for pg_id in pg_ids:
                own = d.fr.get("pg_names", {}).get(pg_id)
                if own and own[0]:
                    gname = own[0]  # group names are global; pg ids are per process
                elif pg_id in name_of:
                    gname = name_of[pg_id].most_common(1)[0][0]
                else:
                    gname = pg_id
                g = groups.setdefault(gname, {"desc": "", "members": None, "pg_id": {}})
                g["pg_id"][d.rank] = pg_id
                cfg = d.fr.get("pg_config", {}).get(gname)
                if cfg:
                    g["desc"] = g["desc"] or cfg.get("desc", "")
                    if g["members"] is None:
                        g["members"] = _members(cfg.get("ranks"))
        for gname, g in groups.items():
            if g["members"] is None:
                if g["desc"] == "default_pg" or gname == "0":
                    g["members"] = set(range(world))
                else:
                    g["members"] = set(g["pg_id"])
            g["members"] |= set(g["pg_id"])
        return groups

    # -- comparison ---------------------------------------------------------
    def _compare(
        self, ctx: Context, name: str, g: dict[str, Any], dumps: dict[int, _Dump]
    ) -> dict[str, Any] | None:
        """One process group's dumps compared seq by seq, from the first seq every dump
        still holds: the first divergence decides."""
        members: set[int] = g["members"]
        with_dump = sorted(r for r in members if r in dumps)
        without = sorted(members - set(dumps))
        seqs, enq = _records(g, dumps, with_dump)
        firsts = [min(s) for s in seqs.values() if s]
        if not firsts:
            return None
        lo = max(firsts)
        hi = max(e for e in enq.values() if e is not None)
        hi = min(hi, lo + MAX_SPAN)
        if hi < lo:
            return None

        def value(r: int, s: int) -> Any:
            e = seqs[r].get(s)
            if e is not None:
                return _sig(e)
            if enq[r] is not None and s > enq[r]:
                return "missing"
            return "unknown"

        lists: dict[tuple[Any, ...], list[int]] = {}
        for r in with_dump:
            lists.setdefault(tuple(value(r, s) for s in range(lo, hi + 1)), []).append(r)
        res: dict[str, Any] = {
            "pg": name,
            "pg_desc": g["desc"],
            "ranks": len(members),
            "ranks_with_dump": len(with_dump),
            "compared_seqs": [lo, hi],
            "outcome": "matched",
            "seq": None,
            "op": None,
            "culprit_ranks": [],
            "missing_ranks": [],
            "waiting_ranks": [],
            "detail": "",
            "_without_dump": without,
            "_evidence": [],
        }
        decided = self._first_divergence(name, g, lo, hi, lists, seqs, dumps, without, res)
        if not decided and without:
            _undecided_without_dumps(res, g, hi, with_dump, without, seqs, dumps)
        return res

    def _first_divergence(
        self,
        name: str,
        g: dict[str, Any],
        lo: int,
        hi: int,
        lists: dict[tuple[Any, ...], list[int]],
        seqs: dict[int, dict[int, dict[str, Any]]],
        dumps: dict[int, _Dump],
        without: list[int],
        res: dict[str, Any],
    ) -> bool:
        """The first seq whose records differ and decide something, into ``res`` (a split
        of completed/waiting is only noted); False when none decides."""
        keys = list(lists)
        state_noted = False
        for i in range(hi - lo + 1):
            vals = {k[i] for k in keys}
            if len(vals) == 1 and "unknown" not in vals and "missing" not in vals:
                continue
            s = lo + i
            at = {r: k[i] for k in keys for r in lists[k]}
            verdict = self._classify(name, g, s, at, seqs, dumps, without)
            if verdict is None:
                continue
            if verdict["outcome"] == "state":
                if not state_noted:
                    res["state"] = {k: v for k, v in verdict.items() if not k.startswith("_")}
                    res["_state_evidence"] = verdict["_evidence"]
                    state_noted = True
                continue
            res.update(verdict)
            return True
        return False

    def _classify(
        self,
        name: str,
        g: dict[str, Any],
        s: int,
        at: dict[int, Any],
        seqs: dict[int, dict[int, dict[str, Any]]],
        dumps: dict[int, _Dump],
        without: list[int],
    ) -> dict[str, Any] | None:
        """What differs at seq ``s``: the first of ``_SEQ_RULES`` that applies."""
        present = {r: seqs[r][s] for r, v in at.items() if isinstance(v, tuple)}
        if not present:
            return None
        x = _SeqRecords.of(name, g, s, at, present, seqs, dumps, without)
        for _name, rule in _SEQ_RULES:
            got = rule(self, x)
            if got is not None:
                return got
        return None

    def _rule_not_joined(self, x: _SeqRecords) -> dict[str, Any] | None:
        if not x.missing:
            return None
        present, seqs, dumps, pg = x.present, x.seqs, x.dumps, x.pg
        evid = [dumps[x.ref_rank].event(pg(x.ref_rank), present[x.ref_rank])]
        for r in x.missing[:3]:
            last = max(seqs[r]) if seqs[r] else None
            evid.append(
                dumps[r].event(pg(r), seqs[r][last])
                if last is not None
                else dumps[r].status_event(pg(r))
            )
        blame = bool(x.waiting)
        return {
            **x.base,
            "outcome": "not_joined",
            "culprit_ranks": x.missing[:MAX_LISTED] if blame else [],
            "detail": (
                f"{len(present)} rank(s) enqueued {x.op} seq {x.s}"
                + (f" ({len(x.waiting)} still waiting in it)" if x.waiting else " and completed it")
                + f"; rank(s) {_short(x.missing)} never recorded it"
                + ("" if blame else ": their dumps may be older than the others'")
            ),
            "_evidence": evid,
            "_blame": blame,
        }

    def _rule_op_type(self, x: _SeqRecords) -> dict[str, Any] | None:
        ops = {r: e["op"] for r, e in x.present.items()}
        if len(set(ops.values())) <= 1:
            return None
        odd, exp = _minority(ops)
        return self._mismatch(x.base, "type", odd, exp, x.present, x.dumps, x.pg, ops)

    def _rule_sizes(self, x: _SeqRecords) -> dict[str, Any] | None:
        present, op = x.present, x.op
        if op in ALL_TO_ALL:
            if any(_version_le_2_3(x.dumps[r].fr.get("version", "")) for r in present):
                return None
            tin = sum(e["input_numel"] for e in present.values())
            tout = sum(e["output_numel"] for e in present.values())
            if tin == tout or x.unknown or x.without:
                return None
            return {
                **x.base,
                "outcome": "size",
                "culprit_ranks": [],
                "detail": f"all_to_all seq {x.s}: total input numel {tin} != total output numel {tout}",
                "_evidence": [x.dumps[r].event(x.pg(r), e) for r, e in list(present.items())[:2]],
                "_blame": False,
            }
        bad: set[int] = set()
        detail = ""
        n = len(x.g["members"])
        for r, e in present.items():
            i_n, o_n = e["input_numel"], e["output_numel"]
            if (
                (op in ALL_GATHER and o_n != i_n * n)
                or (op in REDUCE_SCATTER and i_n != o_n * n)
                or (op == "all_reduce" and i_n != o_n)
            ):
                bad.add(r)
        if op not in NO_CROSS_SIZE:
            shp = {
                r: (repr(e["input_sizes"]), e["input_numel"], e["output_numel"])
                for r, e in present.items()
            }
            if len(set(shp.values())) > 1:
                odd, _exp = _minority(shp)
                bad.update(odd)
                if not odd:
                    detail = "no majority size: "
        if not (bad or detail):
            return None
        shown = {r: f"{e['input_sizes']}->{e['output_sizes']}" for r, e in present.items()}
        return self._mismatch(
            x.base, "size", sorted(bad), None, present, x.dumps, x.pg, shown, detail
        )

    def _rule_dtypes(self, x: _SeqRecords) -> dict[str, Any] | None:
        dts = {
            r: (tuple(e["input_dtypes"]), tuple(e["output_dtypes"])) for r, e in x.present.items()
        }
        if len(set(dts.values())) <= 1:
            return None
        odd, _exp = _minority(dts)
        shown = {r: "/".join(",".join(v) for v in d) for r, d in dts.items()}
        return self._mismatch(x.base, "dtype", odd, None, x.present, x.dumps, x.pg, shown)

    def _rule_state(self, x: _SeqRecords) -> dict[str, Any] | None:
        present, pg = x.present, x.pg
        if len({e["state"] == "completed" for e in present.values()}) <= 1:
            return None
        done = sorted(r for r, e in present.items() if e["state"] == "completed")
        return {
            **x.base,
            "outcome": "state",
            "completed_ranks": done[:MAX_LISTED],
            "detail": f"{x.op} seq {x.s} completed on {len(done)} rank(s), not on {len(x.waiting)}",
            "_evidence": [
                x.dumps[done[0]].event(pg(done[0]), present[done[0]]),
                x.dumps[x.waiting[0]].event(pg(x.waiting[0]), present[x.waiting[0]]),
            ],
        }

    def _rule_records_lost(self, x: _SeqRecords) -> dict[str, Any] | None:
        if not x.unknown:
            return None
        return {
            **x.base,
            "outcome": "undecided",
            "culprit_ranks": [],
            "detail": f"{len(x.unknown)} rank(s) hold no record of seq {x.s} (ring buffer)",
            "_evidence": [x.dumps[x.ref_rank].event(x.pg(x.ref_rank), x.present[x.ref_rank])],
            "_blame": False,
        }

    def _mismatch(
        self,
        base: dict[str, Any],
        what: str,
        odd: list[int],
        expected: Any,
        present: dict[int, dict[str, Any]],
        dumps: dict[int, _Dump],
        pg: Any,
        shown: dict[int, Any],
        prefix: str = "",
    ) -> dict[str, Any]:
        groups: dict[Any, list[int]] = {}
        for r, v in shown.items():
            groups.setdefault(v, []).append(r)
        parts = [
            f"{v} on rank(s) {_short(sorted(rs))}"
            for v, rs in sorted(groups.items(), key=lambda kv: -len(kv[1]))
        ]
        ev_ranks = odd[:3] or sorted(present)[:2]
        normal = next((r for r in sorted(present) if r not in odd), None)
        if normal is not None and normal not in ev_ranks:
            ev_ranks.append(normal)
        return {
            **base,
            "outcome": what,
            "culprit_ranks": odd[:MAX_LISTED],
            "detail": f"{prefix}{what} mismatch in {base['op']} seq {base['seq']}: "
            + "; ".join(parts[:4]),
            "_evidence": [dumps[r].event(pg(r), present[r]) for r in ev_ranks],
            "_blame": bool(odd),
        }

    # -- findings and merging -------------------------------------------------
    def _report(
        self,
        ctx: Context,
        out: list[dict[str, Any]],
        dumps: dict[int, _Dump],
        without: list[int],
    ) -> None:
        stragglers: list[tuple[dict[str, Any], int]] = []
        undecided: list[tuple[dict[str, Any], list[Event]]] = []
        for g in out:
            evid = g.pop("_evidence", [])
            st_ev = g.pop("_state_evidence", [])
            blame = g.pop("_blame", False)
            o = g["outcome"]
            where = f"{g['op']} seq {g['seq']} of PG {g['pg']}" + (
                f" ({g['pg_desc']})" if g["pg_desc"] else ""
            )
            if o == "not_joined":
                _not_joined_finding(ctx, g, where, evid, blame)
                if blame:
                    stragglers.extend((g, r) for r in g["culprit_ranks"])
            elif o in ("type", "size", "dtype"):
                _mismatch_finding(ctx, g, where, evid, blame)
            elif o == "undecided":
                undecided.append((g, evid))
            if "state" in g and st_ev and o == "matched":
                st = g["state"]
                ctx.add_finding(
                    phase="localization",
                    kind="fr_state_mismatch",
                    title=f"{st['op']} seq {st['seq']} of PG {g['pg']} completed on some ranks, not on {_short(st['waiting_ranks'])}",
                    detail="Ranks are inside the same collective; a broadcast root or a dump taken mid-flight shows this too, so no rank is blamed.",
                    confidence=0.5,
                    ranks=st["waiting_ranks"],
                    evidence_events=st_ev,
                )
        if without or undecided:
            _partial_finding(ctx, dumps, without, undecided)
        if stragglers:
            self._merge_stragglers(ctx, stragglers, dumps)

    def _merge_stragglers(
        self, ctx: Context, found: list[tuple[dict[str, Any], int]], dumps: dict[int, _Dump]
    ) -> None:
        """Ranks that never recorded the collective the others wait in are stragglers (nccl roles)."""
        nccl = ctx.facts.nccl
        rows: list[dict[str, Any]] = nccl.setdefault("rows", [])
        for g, rank in found:
            d = dumps.get(rank)
            fr = d.fr if d else {}
            pg_ids = {pid for pid, names in fr.get("pg_names", {}).items() if names[0] == g["pg"]}
            pg_id = next(iter(pg_ids), g["pg"])
            st = fr.get("pg_status", {}).get(pg_id, {})
            row = next((r for r in rows if r["rank"] == rank and r["pg"] in (pg_id, "?")), None)
            if row is None:
                ev = d.status_event(pg_id) if d else None
                if ev is None:
                    continue
                row = {
                    "rank": rank,
                    "pg": pg_id,
                    "pg_desc": g["pg_desc"] or None,
                    "seq": None,
                    "op": None,
                    "last_enqueued": st.get("last_enqueued"),
                    "last_completed": st.get("last_completed"),
                    "timeout_ms": None,
                    "role": "waiting",
                    "_ev": ev,
                }
                rows.append(row)
            row["role"] = "straggler"
            row["seq"] = g["seq"]
            row["op"] = row["op"] or (g["op"] or "").upper() or None
        rows.sort(key=lambda r: (r["rank"], r["pg"]))
        strag = sorted({r["rank"] for r in rows if r["role"] == "straggler"})
        nccl["stragglers"] = strag
        nccl["all_in_collective"] = False
        nccl["groups"] = _groups(rows)


# what can differ at one seq, in the order it is asked; the first rule that answers decides
_SEQ_RULES: tuple[tuple[str, Callable[..., dict[str, Any] | None]], ...] = (
    ("some ranks never recorded it", FlightRecorderAnalyzer._rule_not_joined),
    ("another op type", FlightRecorderAnalyzer._rule_op_type),
    ("sizes that do not fit", FlightRecorderAnalyzer._rule_sizes),
    ("another dtype", FlightRecorderAnalyzer._rule_dtypes),
    ("completed on some ranks only", FlightRecorderAnalyzer._rule_state),
    ("records lost from the ring buffer", FlightRecorderAnalyzer._rule_records_lost),
)


register_analyzer(FlightRecorderAnalyzer())
