"""The odd one out: in every cross-rank comparison, name the minority that differs.

Compared per process:

- the collective each rank is in — ``Detected mismatch between collectives`` fingerprints
  (op, sequence number, shapes, dtypes; ``TORCH_DISTRIBUTED_DEBUG=DETAIL``) and, for
  the ranks whose watchdog fired on the same process group and sequence number, the op
  and ``NumelIn``/``NumelOut`` of that work;
- start-up banners (``parsers/banners.py``): NCCL version, CUDA driver, torch and
  DeepSpeed versions, every ``NCCL_*`` / ``TORCH_NCCL_*`` setting.

Rule: with at least three processes reporting an attribute, the most common value is the
job's when more than half report it; the processes with any other value are the odd
ones. A tie, or no majority, names nobody ("the ranks disagree" is reported without a
culprit). A setting only some processes print is not a difference (NCCL prints most
``set by environment`` lines on every rank, but not all on all versions).

Writes ``ctx.facts.odd_one_out`` (a list of ``{attribute, ranks, procs, value,
majority, majority_count, reporting}``), which becomes ``localization.odd_one_out``.
For the watchdog's work, the majority must also be more than half of the job's ranks
(``job.world_size``, at least the highest rank seen + 1) when the work is the default
group's: an excerpt where 2 of 8 ranks printed one op and 1 another does not show which
op the ranks that stayed silent were in.
A collective that differs on a minority narrows the ``collective_mismatch`` causes to
those ranks (``cause["ranks"]``, read by the verdict) or, without such a message, adds
a SOFTWARE cause on them. A different NCCL version is a SOFTWARE cause (0.6).

Fingerprints of the same op and dtype whose tensors (of two or more dimensions) differ
only in the leading dimension are ranks holding batches of different sizes: the mismatch
causes become DATA (an uneven split of the data, not a rank-dependent code path).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from .._lazy import lazy_compile
from ..model import Event
from . import Context, register_analyzer

_NUMEL = lazy_compile(r"NumelIn=(?P<i>\d+), NumelOut=(?P<o>\d+)")
_FP_KEEP = lazy_compile(r"(SequenceNumber|OpType|TensorShape|TensorDtypes)=(\[[^\]]*\]|[^,)]+)")
VERSION_ATTRS = ("nccl_version", "cuda_driver", "torch_version", "deepspeed_version")


def _fingerprint(fp: str) -> str:
    parts = _FP_KEEP.findall(fp)
    return ", ".join(f"{k}={v}" for k, v in parts) if parts else fp.strip()[:200]


_OP = lazy_compile(r"OpType=(?P<op>\w+)")
_SHAPE = lazy_compile(r"TensorShape=\[(?P<dims>[\d, ]*)\]")
_DTYPES = lazy_compile(r"TensorDtypes=(?P<dt>[^,)]+)")


def _batch_dims(fp: str) -> tuple[tuple[str | None, str | None, tuple[int, ...]], int] | None:
    """(op, dtypes, trailing dims) and the leading dimension of a fingerprint's first tensor,
    or None without a shape of at least two dimensions."""
    m = _SHAPE.search(fp)
    if m is None:
        return None
    dims = tuple(int(d) for d in m.group("dims").replace(" ", "").split(",") if d)
    if len(dims) < 2:
        return None  # a flat buffer (a gradient bucket): its size says nothing of a batch
    op, dt = _OP.search(fp), _DTYPES.search(fp)
    key = (op.group("op") if op else None, dt.group("dt") if dt else None, dims[1:])
    return key, dims[0]


def _uneven_batches(ctx: Context, fingerprints: dict[int, str]) -> None:
    """Ranks in the same collective (op, dtype, every dimension but the first) whose tensors
    differ only in the leading, batch dimension hold batches of different sizes: the data
    was split unevenly (a last partial batch, a collate that drops samples, uneven shards),
    not a rank-dependent code path. The mismatch causes become DATA."""
    read = [_batch_dims(fp) for fp in fingerprints.values()]
    if len(read) < 2 or any(x is None for x in read):
        return
    keys = {x[0] for x in read if x is not None}
    sizes = sorted({x[1] for x in read if x is not None})
    if len(keys) != 1 or len(sizes) < 2:
        return
    for c in ctx.facts.causes:
        if c["event"].kind == "collective_mismatch":
            c["category"] = "DATA"
            c["strength"] = min(c["strength"], 0.8)
            c["label"] = (
                "ranks entered the same collective with batches of different sizes (leading "
                f"dimension {', '.join(map(str, sizes[:6]))}): the data was split unevenly"
            )


def minority(values: dict[Any, Any]) -> tuple[Any, int, list[Any]] | None:
    """(majority value, its count, the keys with another value) or None without a majority."""
    if len(values) < 3:
        return None
    counts = Counter(values.values())
    if len(counts) < 2:
        return None
    (top, n), *rest = counts.most_common()
    if n * 2 <= len(values) or (rest and rest[0][1] == n):
        return None
    return top, n, sorted((k for k, v in values.items() if v != top), key=str)


class OddOneOutAnalyzer:
    name = "odd_one_out"
    phase = "localization"
    order = 34
    reads = ("results", "events", "facts.nccl", "facts.rank_host", "facts.causes")
    writes = ("facts.odd_one_out", "facts.causes", "findings")

    def run(self, ctx: Context) -> None:
        out: list[dict[str, Any]] = []
        self._collectives(ctx, out)
        self._banners(ctx, out)
        if out:
            ctx.facts.odd_one_out = out

    # -- collectives -----------------------------------------------------------------
    def _collectives(self, ctx: Context, out: list[dict[str, Any]]) -> None:
        fps: dict[int, str] = {}
        raw: dict[int, str] = {}
        ev_of: dict[int, Event] = {}
        for e in ctx.by_kind.get("collective_mismatch", []):
            f = e.fields
            for r, fp in (
                (f.get("rank_a"), f.get("fingerprint_a")),
                (f.get("rank_b"), f.get("fingerprint_b")),
                (f.get("rank_self"), f.get("fingerprint")),
            ):
                if r is not None and fp:
                    fps.setdefault(int(r), _fingerprint(fp))
                    raw.setdefault(int(r), str(fp))
                    ev_of.setdefault(int(r), e)
        _uneven_batches(ctx, raw)
        got = minority(fps)
        if got is not None:
            top, n, odd = got
            self._blame(ctx, out, "collective", odd, fps, top, n, ev_of, "collective_mismatch")
            return
        # the watchdog's work of each rank in the same group and sequence number
        rows = ctx.facts.nccl.get("rows") or []
        by_seq: dict[tuple[Any, Any], dict[int, tuple[Any, ...]]] = {}
        evs: dict[int, Event] = {}
        for row in rows:
            ev: Event | None = row.get("_ev")
            if ev is None or row.get("seq") is None or not row.get("op"):
                continue
            m = _NUMEL.search(ev.text)
            key = (row["op"], *(m.groups() if m else (None, None)))
            by_seq.setdefault((row["pg"], row["seq"]), {})[row["rank"]] = key
            evs[row["rank"]] = ev
        world = (ctx.doc.get("job") or {}).get("world_size") or 0
        for (pg, seq), vals in sorted(by_seq.items(), key=lambda kv: str(kv[0])):
            got = minority(vals)
            if got is None:
                continue
            top, n, odd = got
            if pg in (None, "?", 0, "0") and n * 2 <= world:
                continue  # the job's ranks that did not report may be on the minority's op
            shown = {
                r: f"{v[0]} NumelIn={v[1]} NumelOut={v[2]}" if v[1] else v[0]
                for r, v in vals.items()
            }
            self._blame(
                ctx,
                out,
                f"collective (process group {pg}, seq {seq})",
                odd,
                shown,
                shown[next(r for r, v in vals.items() if v == top)],
                n,
                evs,
                None,
            )
            return

    def _blame(
        self,
        ctx: Context,
        out: list[dict[str, Any]],
        what: str,
        odd: list[int],
        values: dict[int, str],
        top: str,
        n: int,
        ev_of: dict[int, Event],
        cause_kind: str | None,
    ) -> None:
        rank_host = ctx.facts.rank_host
        item = {
            "attribute": what,
            "ranks": odd,
            "hosts": sorted({rank_host[r] for r in odd if r in rank_host}),
            "value": {str(r): values[r] for r in odd[:16]},
            "majority": top,
            "majority_count": n,
            "reporting": len(values),
        }
        out.append(item)
        majority_rank = next(r for r, v in values.items() if v == top)
        evidence = [ev_of[r] for r in odd[:3] if r in ev_of] + [ev_of[majority_rank]]
        ctx.add_finding(
            phase="localization",
            kind="odd_one_out",
            title=f"Rank{'s' if len(odd) > 1 else ''} {', '.join(map(str, odd[:8]))} "
            f"{'are' if len(odd) > 1 else 'is'} in a different {what} than the other {n}: "
            f"{values[odd[0]]} vs {top}",
            detail="The ranks that differ from the majority issued a different collective (op, "
            "size, dtype or order): a rank-dependent code path. Fix the branch on those ranks.",
            confidence=0.85,
            ranks=odd,
            hosts=item["hosts"],
            evidence_events=evidence,
            category="SOFTWARE",
        )
        causes = ctx.facts.causes
        narrowed = False
        for c in causes:
            if cause_kind and c["event"].kind == cause_kind:
                c["ranks"] = odd  # the verdict names these, not everyone who printed the message
                narrowed = True
        if not narrowed:
            ev = ev_of.get(odd[0])
            if ev is not None:
                causes.append(
                    {
                        "category": "SOFTWARE",
                        "strength": 0.85,
                        "event": ev,
                        "label": f"a different collective on rank{'s' if len(odd) > 1 else ''} "
                        f"{', '.join(map(str, odd[:8]))} ({values[odd[0]]}) than on the other {n} ({top})",
                        "ranks": odd,
                        # every rank waited in the collective until its watchdog fired
                        "shape": "hang"
                        if ev.kind in ("watchdog_timeout", "watchdog_failure")
                        else None,
                    }
                )

    # -- banners -----------------------------------------------------------------------
    def _banners(self, ctx: Context, out: list[dict[str, Any]]) -> None:
        banners = _Banners.of(ctx)
        if len(banners.procs) < 3:
            return
        every = {a for v in banners.procs.values() for a in v}  # then filtered: once a name
        attrs = sorted(a for a in every if not a.startswith("_"))
        for attr in attrs:
            vals = {p: v[attr][0] for p, v in banners.procs.items() if attr in v}
            got = minority(vals)
            if got is not None:
                self._odd_banner(ctx, out, banners, attr, vals, got)

    def _odd_banner(
        self,
        ctx: Context,
        out: list[dict[str, Any]],
        banners: _Banners,
        attr: str,
        vals: dict[str, Any],
        got: tuple[Any, int, list[str]],
    ) -> None:
        """A banner attribute a few processes print differently: listed, a finding, and a
        cause when it is the NCCL version of a job whose collectives failed."""
        top, n, odd = got
        procs = banners.procs
        rank_host = ctx.facts.rank_host
        ranks = sorted(int(p) for p in odd if p.isdigit())
        hosts = sorted(
            {rank_host[int(p)] for p in odd if p.isdigit() and int(p) in rank_host}
            | {procs[p]["_host"][0] for p in odd if "_host" in procs[p]}
        )
        majority_proc = next(p for p, v in vals.items() if v == top)
        name = attr.removeprefix("env.")
        out.append(
            {
                "attribute": name,
                "ranks": ranks,
                "procs": odd[:64],
                "hosts": hosts,
                "value": {p: vals[p] for p in odd[:16]},
                "majority": top,
                "majority_count": n,
                "reporting": len(vals),
            }
        )
        is_version = attr in VERSION_ATTRS
        who = (
            f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks[:8]))}"
            if ranks
            else ", ".join(odd[:4])
        )
        evidence = [banners.event(p, attr) for p in [*odd[:3], majority_proc]]
        ctx.add_finding(
            phase="localization",
            kind="odd_one_out",
            title=f"{who}{' on ' + ', '.join(hosts[:4]) if hosts else ''}: {name} "
            f"{vals[odd[0]]} where the other {n} have {top}",
            detail=(
                "Every rank must run the same library versions: a mixed NCCL or driver version "
                "breaks or slows collectives. Fix the image or module load on those nodes."
                if is_version
                else "A setting that differs on a few ranks changes how their transport behaves "
                "(timeouts, interfaces, protocols) and is a common cause of a few slow or failing "
                "ranks. Make the environment the same on every node."
            ),
            confidence=0.8 if is_version else 0.6,
            ranks=ranks,
            hosts=hosts,
            evidence_events=evidence,
            category="SOFTWARE",
        )
        failed = any(
            ctx.by_kind.get(k)
            for k in ("watchdog_timeout", "watchdog_failure", "nccl_error", "async_exception")
        )
        if attr == "nccl_version" and failed:
            ctx.facts.causes.append(
                {
                    "category": "SOFTWARE",
                    "strength": 0.6,
                    "event": evidence[0],
                    "label": f"NCCL version {vals[odd[0]]} on {who} differs from the job's {top}",
                    "ranks": ranks,
                }
            )


class _Banners:
    """Each process's banner attributes (the first file that prints them), and the file."""

    def __init__(self, procs: dict[str, dict[str, list[Any]]], files: dict[str, str]) -> None:
        self.procs = procs
        self.files = files

    @classmethod
    def of(cls, ctx: Context) -> _Banners:
        procs: dict[str, dict[str, list[Any]]] = {}
        files: dict[str, str] = {}
        for r in ctx.results:
            for proc, attrs in (r.facts.get("banners") or {}).items():
                if proc not in procs:
                    procs[proc] = attrs
                    files[proc] = r.name
        return cls(procs, files)

    def event(self, p: str, a: str) -> Event:
        value, line, text = self.procs[p][a]
        return Event(
            kind="banner",
            line=line,
            text=text,
            rank=int(p) if p.isdigit() else None,
            host=self.procs[p]["_host"][0] if "_host" in self.procs[p] else None,
            file=self.files[p],
            fields={"attribute": a, "value": value},
        )


register_analyzer(OddOneOutAnalyzer())
