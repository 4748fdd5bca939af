"""The verdict: triage (shape, category, severity, scope, when, confidence, summary),
culprit ranks/hosts, the root-cause chain, the timeline and recommendations.

Category names the root cause, not the loudest symptom: the earliest causal
event wins; a specific local cause (OOM, Xid, NaN, mismatch, data, storage,
scheduler) beats NCCL network errors unless those are clearly earlier (they
are usually the echo of a peer that died). With no error at all, the NCCL
state decides: a straggler (DATA when its own lines show a data-loading
symptom, else UNKNOWN) or every rank inside the collective (NETWORK).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..model import Event, evidence
from . import Context, register_analyzer
from .advice import recommendations, summary
from .failures import etime

NON_FATAL = {"data_error", "storage_error", "retry_exhausted", "connection_error", "retry"}
DATA_SYMPTOMS = {"data_error", "retry", "connection_error", "retry_exhausted", "storage_error"}
FATAL = {
    "torchrun_failure",
    "teardown",
    "fatal_terminate",
    "watchdog_timeout",
    "watchdog_failure",
    "slurm_time_limit",
    "torchrun_failed",
    "worker_group_failed",
}


@dataclass
class Verdict:
    shape: str = "none"
    category: str = "UNKNOWN"
    confidence: float = 0.0
    root: Event | None = None
    root_label: str = ""
    culprit_ranks: list[int] = field(default_factory=list)
    culprit_hosts: list[str] = field(default_factory=list)
    scope: str = "unknown"
    chain: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


def _earlier(a: str | None, b: str | None, seconds: float = 60.0) -> bool:
    """True when ``a`` is at least ``seconds`` before ``b`` (ISO strings, same year)."""
    if not a or not b or a[:4] != b[:4]:
        return False
    from datetime import datetime

    try:
        ta = datetime.fromisoformat(a.replace("0000-", "2000-", 1))
        tb = datetime.fromisoformat(b.replace("0000-", "2000-", 1))
    except ValueError:
        return False
    return (tb - ta).total_seconds() >= seconds


def _seconds_between(a: str | None, b: str | None) -> float | None:
    if not a or not b or a[:4] != b[:4]:
        return None
    from datetime import datetime

    try:
        ta = datetime.fromisoformat(a.replace("0000-", "2000-", 1))
        tb = datetime.fromisoformat(b.replace("0000-", "2000-", 1))
    except ValueError:
        return None
    return (tb - ta).total_seconds()


class VerdictAnalyzer:
    name = "verdict"
    phase = "root_cause"
    order = 90

    def run(self, ctx: Context) -> None:
        v = self._decide(ctx)
        job = ctx.doc["job"]
        world = job.get("world_size") or len(job.get("ranks_seen", []))
        v.scope = self._scope(ctx, v, world)
        when = self._when(ctx, v)
        severity = {
            "crash": "CRITICAL",
            "hang": "CRITICAL",
            "diverge": "CRITICAL",
            "slow": "WARNING",
        }.get(v.shape, "OK")
        v.chain = self._chain(ctx, v)
        t = ctx.doc["triage"]
        t.update(
            shape=v.shape,
            category=v.category,
            severity=severity,
            scope=v.scope,
            when=when,
            confidence=round(v.confidence, 2),
        )
        t["summary"] = summary(ctx, v)
        loc = ctx.doc["localization"]
        loc["culprit_ranks"] = sorted(set(v.culprit_ranks))
        loc["culprit_hosts"] = sorted(set(v.culprit_hosts))
        ctx.doc["root_cause"] = {
            "category": v.category,
            "summary": t["summary"] if v.shape != "none" else "",
            "chain": v.chain,
            "trigger": v.root_label or None,
        }
        ctx.doc["recommendations"] = recommendations(ctx, v)
        ctx.doc["timeline"] = self._timeline(ctx)
        if v.root is not None and v.shape != "none":
            ctx.add_finding(
                phase="root_cause",
                kind="root_cause",
                title=f"Root cause: {v.root_label}",
                detail=t["summary"],
                confidence=v.confidence,
                ranks=v.culprit_ranks,
                hosts=v.culprit_hosts,
                evidence_events=[v.root],
                category=v.category,
            )

    # -- decision ---------------------------------------------------------
    def _decide(self, ctx: Context) -> Verdict:
        causes = ctx.facts.get("causes", [])
        nccl = ctx.facts.get("nccl", {})
        met = ctx.facts.get("metrics", {})
        succeeded = bool(ctx.by_kind.get("run_succeeded"))
        fatal = any(ctx.by_kind.get(k) for k in FATAL)
        strong = [c for c in causes if c["strength"] >= 0.5]
        specific = [c for c in strong if c["category"] != "NETWORK"]
        network = [c for c in strong if c["category"] == "NETWORK"]
        exhausted = ctx.facts.get("retry_exhausted", [])

        if succeeded and not fatal:
            if (
                met.get("slow_hosts")
                or (met.get("throughput_drop") or 0) >= ctx.options.throughput_drop
            ):
                return self._slow(ctx, met)
            return Verdict(shape="none", category="UNKNOWN", confidence=0.8)

        stragglers = nccl.get("stragglers", [])
        if stragglers and not [
            c
            for c in specific
            if c["category"] not in ("DATA", "STORAGE_IO", "SOFTWARE")
            or c["event"].rank not in stragglers
        ]:
            # every specific cause sits on a straggler: the job hung waiting for it
            return self._straggler(ctx, stragglers)
        pick = None
        if specific:
            best = [c for c in specific if c["strength"] >= 0.75] or specific
            best.sort(key=lambda c: (etime(c["event"]) or "9999", -c["strength"]))
            pick = best[0]
            if network:
                network.sort(key=lambda c: (etime(c["event"]) or "9999", -c["strength"]))
                if _earlier(etime(network[0]["event"]), etime(pick["event"])):
                    pick = network[0]
        elif network:
            network.sort(key=lambda c: (etime(c["event"]) or "9999", -c["strength"]))
            pick = network[0]
        if pick is not None:
            return self._from_cause(ctx, pick, causes)
        if met.get("nan_step") is not None:
            return Verdict(
                shape="diverge",
                category="NUMERICAL",
                confidence=0.8,
                root_label="loss became NaN/Inf in the metrics",
            )
        if exhausted:
            e = exhausted[0]
            return Verdict(
                shape="crash",
                category="STORAGE_IO",
                confidence=0.6,
                root=e,
                root_label="retries exhausted",
                culprit_ranks=[e.rank] if e.rank is not None else [],
            )
        if stragglers:
            return self._straggler(ctx, stragglers)
        if nccl.get("all_in_collective"):
            rows = [r for r in nccl["rows"] if r["role"] == "initiator"]
            return Verdict(
                shape="hang",
                category="NETWORK",
                confidence=0.55,
                root=rows[0]["_ev"] if rows else None,
                root_label="a collective every rank entered never completed",
            )
        if (
            met.get("slow_hosts")
            or (met.get("throughput_drop") or 0) >= ctx.options.throughput_drop
            or met.get("stragglers")
        ):
            return self._slow(ctx, met)
        if ctx.by_kind.get("watchdog_timeout") or ctx.by_kind.get("watchdog_failure"):
            ev = ctx.kinds("watchdog_timeout", "watchdog_failure")[0]
            silent = nccl.get("silent", [])
            return Verdict(
                shape="hang",
                category="UNKNOWN",
                confidence=0.35,
                root=ev,
                root_label="collective timeout with no rank explaining it",
                culprit_ranks=silent[:32],
            )
        if fatal:
            ev = ctx.facts.get("torchrun_first") or ctx.kinds(*FATAL)[0]
            return Verdict(
                shape="crash",
                category="UNKNOWN",
                confidence=0.3,
                root=ev,
                root_label="processes failed without a recognised cause",
            )
        return Verdict(shape="none", category="UNKNOWN", confidence=0.5)

    def _from_cause(
        self, ctx: Context, pick: dict[str, Any], causes: list[dict[str, Any]]
    ) -> Verdict:
        e: Event = pick["event"]
        cat = pick["category"]
        same = [c["event"] for c in causes if c["category"] == cat and c["event"].kind == e.kind]
        ranks = sorted({x.rank for x in same if x.rank is not None})
        hosts = sorted({x.host for x in same if x.host})
        shape = "diverge" if cat == "NUMERICAL" else "crash"
        if e.kind in NON_FATAL and ctx.by_kind.get("watchdog_timeout"):
            shape = "hang"  # the rank blocked (no crash of its own); the others hung on it
        v = Verdict(
            shape=shape, category=cat, confidence=pick["strength"], root=e, root_label=pick["label"]
        )
        if cat == "HARDWARE":
            rank_host = ctx.facts.get("rank_host", {})
            on_host = sorted(r for r, h in rank_host.items() if h in hosts)
            errs = sorted(
                {
                    x.rank
                    for x in ctx.kinds("cuda_error", "ecc_error", "nccl_error")
                    if x.host in hosts and x.rank is not None
                }
            )
            v.culprit_ranks = ranks or errs or on_host
            v.culprit_hosts = hosts
        elif cat == "NETWORK":
            nccl = ctx.facts.get("nccl", {})
            v.culprit_ranks = []
            all_hosts = set(ctx.doc["job"].get("hosts", {}))
            v.culprit_hosts = (
                hosts if hosts and all_hosts and len(set(hosts)) < 0.5 * len(all_hosts) else []
            )
            v.extra["all_in_collective"] = nccl.get("all_in_collective")
            v.confidence = max(v.confidence, 0.8 if nccl.get("all_in_collective") else 0.6)
        elif cat in ("NUMERICAL", "INFRA"):
            v.culprit_ranks = []
            v.culprit_hosts = hosts if cat == "INFRA" and e.kind == "node_fail" else []
        else:
            v.culprit_ranks = ranks[:64]
            v.culprit_hosts = (
                sorted({ctx.facts.get("rank_host", {}).get(r) for r in ranks[:64]} - {None})
                or hosts
            )
        return v

    def _straggler(self, ctx: Context, stragglers: list[int]) -> Verdict:
        rows = [r for r in ctx.facts["nccl"]["rows"] if r["role"] == "straggler"]
        symptoms = [e for e in ctx.events if e.rank in set(stragglers) and e.kind in DATA_SYMPTOMS]
        symptoms += [
            e
            for e in ctx.by_kind.get("python_exception", [])
            if e.rank in set(stragglers) and "DataLoader" in str(e.fields)
        ]
        # only what happened around the stall counts: the collective started timeout_ms before the watchdog fired
        timeouts = [
            e for e in ctx.kinds("watchdog_timeout") if e.time and e.fields.get("timeout_ms")
        ]
        if timeouts:
            t = timeouts[0]
            symptoms = [
                e
                for e in symptoms
                if etime(e) is None
                or (_seconds_between(etime(e), t.time) or 0) <= t.fields["timeout_ms"] / 1000 + 600
            ]
        rank_host = ctx.facts.get("rank_host", {})
        hosts = sorted({rank_host[r] for r in stragglers if r in rank_host})
        if symptoms:
            symptoms.sort(key=lambda e: (etime(e) or "9999", e.line))
            return Verdict(
                shape="hang",
                category="DATA",
                confidence=0.8,
                root=symptoms[0],
                root_label="data loading stalled on the straggler rank",
                culprit_ranks=stragglers,
                culprit_hosts=hosts,
                extra={"straggler_row": rows[0]},
            )
        return Verdict(
            shape="hang",
            category="UNKNOWN",
            confidence=0.45,
            root=rows[0]["_ev"],
            root_label="a rank stuck outside NCCL, for a reason the logs do not show",
            culprit_ranks=stragglers,
            culprit_hosts=hosts,
            extra={"straggler_row": rows[0]},
        )

    def _slow(self, ctx: Context, met: dict[str, Any]) -> Verdict:
        slow = met.get("slow_hosts")
        f = next((f for f in ctx.findings if f["kind"] == "slow_network_hosts"), None)
        if slow and f:
            return Verdict(
                shape="slow",
                category="NETWORK",
                confidence=f["confidence"],
                root_label="slow communication on a subset of nodes",
                culprit_hosts=list(slow),
                extra={"finding": f},
            )
        strag = met.get("stragglers") or []
        f2 = next((f for f in ctx.findings if f["kind"] == "straggler"), None)
        if strag and len(strag) <= 8:
            return Verdict(
                shape="slow",
                category="UNKNOWN",
                confidence=0.5,
                root_label="straggler rank(s) slow every step",
                culprit_ranks=[s["rank"] for s in strag],
                extra={"finding": f2},
            )
        return Verdict(
            shape="slow",
            category="UNKNOWN",
            confidence=0.5,
            root_label="throughput dropped",
            extra={
                "finding": next((f for f in ctx.findings if f["kind"] == "throughput_drop"), None)
            },
        )

    # -- presentation -------------------------------------------------------
    def _scope(self, ctx: Context, v: Verdict, world: int) -> str:
        if v.shape == "none":
            return "unknown"
        if v.category in ("NUMERICAL", "INFRA") and not v.culprit_hosts:
            return "all_ranks"
        if v.category == "NETWORK" and not v.culprit_ranks and not v.culprit_hosts:
            return "all_ranks"
        n = len(v.culprit_ranks)
        if v.culprit_hosts and not n:
            hosts = ctx.doc["job"].get("hosts", {})
            n = sum(len(hosts.get(h, [])) for h in v.culprit_hosts) or 2
        if n == 1:
            return "one_rank"
        if world and n >= 0.9 * world:
            return "all_ranks"
        return "some_ranks" if n else "unknown"

    def _when(self, ctx: Context, v: Verdict) -> str:
        if v.shape == "none":
            return "unknown"
        if v.shape == "slow":
            step = ctx.facts.get("metrics", {}).get("drop_step")
            return "unknown" if step is None else ("immediately" if step <= 5 else "after_warmup")
        start = ctx.facts.get("job_start")
        at = etime(v.root) if v.root is not None else None
        if v.shape == "hang":
            timeouts = ctx.kinds("watchdog_timeout")
            if timeouts and timeouts[0].time:
                at = timeouts[0].time
                ms = timeouts[0].fields.get("timeout_ms")
                if ms and start:
                    gap = _seconds_between(start, at)
                    if gap is not None:
                        return self._bucket(ctx, gap - ms / 1000.0, None)
        if v.root is not None and not v.root.time:
            # an untimed line (a Python traceback): the collective the others waited on started
            # timeout_ms before their watchdog fired, which is when this rank stopped
            timeouts = [
                e for e in ctx.kinds("watchdog_timeout") if e.time and e.fields.get("timeout_ms")
            ]
            if timeouts and start:
                gap = _seconds_between(start, timeouts[0].time)
                if gap is not None:
                    return self._bucket(ctx, gap - timeouts[0].fields["timeout_ms"] / 1000.0, None)
        gap = _seconds_between(start, at)
        step = (v.root.fields.get("step") if v.root is not None else None) or ctx.facts.get(
            "last_step"
        )
        if v.shape == "slow":
            step = ctx.facts.get("metrics", {}).get("drop_step") or step
        return self._bucket(ctx, gap, step)

    def _bucket(self, ctx: Context, gap: float | None, step: int | None) -> str:
        o = ctx.options
        if gap is not None:
            if gap < o.immediate_seconds and (step is None or step <= o.immediate_steps):
                return "immediately"
            return "after_hours" if gap >= o.hours_seconds else "after_warmup"
        if step is not None:
            return "immediately" if step <= o.immediate_steps else "after_warmup"
        return "unknown"

    def _chain(self, ctx: Context, v: Verdict) -> list[dict[str, Any]]:
        if v.shape == "none":
            return []
        chain: list[dict[str, Any]] = []

        def add(e: Event | None, what: str, rank: int | None = None) -> None:
            if e is None:
                return
            if any(
                c["evidence"]
                and c["evidence"][0]["line"] == e.line
                and c["evidence"][0]["file"] == e.file
                for c in chain
            ):
                return
            chain.append(
                {
                    "time": etime(e),
                    "rank": e.rank if rank is None else rank,
                    "event": what,
                    "evidence": [evidence(e)],
                }
            )

        add(v.root, v.root_label)
        row = v.extra.get("straggler_row")
        if row is not None:
            add(
                row["_ev"],
                f"rank {row['rank']} never entered collective {row['seq']} (last enqueued = last completed = {row['last_completed']})",
                row["rank"],
            )
        timeouts = ctx.kinds("watchdog_timeout", "watchdog_failure")
        if timeouts:
            add(
                timeouts[0],
                f"watchdog timeout: {len({e.rank for e in timeouts})} rank(s) gave up waiting in the collective",
            )
        firsts = ctx.kinds("dump_first")
        if firsts:
            add(firsts[0], "first rank to signal the flight-recorder dump (initiator)")
        for kind, what in (
            ("slurm_time_limit", "SLURM cancelled the job at its time limit"),
            ("fatal_terminate", "process aborted after dumping debug info"),
            ("teardown", "watchdog took the process down"),
        ):
            evs = ctx.kinds(kind)
            if evs and (v.root is None or evs[0] is not v.root):
                add(evs[-1] if kind == "teardown" else evs[0], what)
        first = ctx.facts.get("torchrun_first")
        if first is not None:
            add(
                first,
                f"torchrun reports rank {first.rank} failed (exit code {first.fields.get('exitcode')})",
            )
        if v.shape == "slow" and v.extra.get("finding"):
            f = v.extra["finding"]
            chain.append(
                {"time": None, "rank": None, "event": f["title"], "evidence": f["evidence"][:2]}
            )
        rest = chain[1:]
        rest.sort(key=lambda c: c["time"] or "9999")
        return chain[:1] + rest

    def _timeline(self, ctx: Context) -> list[dict[str, Any]]:
        seen: set[tuple[str, Any]] = set()
        per_kind: dict[str, int] = {}
        out = []
        for e in ctx.events:
            if e.kind in ("nccl_progress", "fr_status", "metrics_row"):
                continue
            key = (e.kind, e.rank)
            if key in seen or per_kind.get(e.kind, 0) >= 8:
                continue
            seen.add(key)
            per_kind[e.kind] = per_kind.get(e.kind, 0) + 1
            out.append(
                {
                    "time": etime(e),
                    "rank": e.rank,
                    "file": e.file,
                    "line": e.line,
                    "event": e.kind,
                    "text": e.text[:300],
                }
            )
        out.sort(key=lambda x: (x["time"] or "9999", x["file"], x["line"]))
        return out[: ctx.options.max_timeline]


register_analyzer(VerdictAnalyzer())
