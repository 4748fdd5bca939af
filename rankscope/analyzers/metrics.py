"""Per-step metrics: straggler ranks, compute vs communication per node group, throughput drop, NaN loss.

- Straggler: score = median step time of all ranks ÷ the rank's own median;
  below ``Options.straggler_score`` (0.75) → straggler. The robust z-score
  (median/MAD) is reported beside it.
- Network on a subset of nodes: over the recent third of the run, hosts whose
  median communication time is ``Options.comm_ratio`` times the hosts' median while
  compute time is equal across hosts.
- Throughput drop: the run's recent median step time against its own baseline
  (after warm-up), more than ``Options.throughput_drop`` slower.
"""

from __future__ import annotations

from typing import Any

from .._lazy import lazy_module
from ..model import Event, MetricsFacts
from . import Context, register_analyzer

np = lazy_module("numpy")

SHORT_SERIES = 4  # fewest steps a drop is judged on (iterations.MIN_ROWS)


def _samples(ctx: Context) -> dict[int, tuple[str, dict[str, Any]]]:
    out: dict[int, tuple[str, dict[str, Any]]] = {}
    for r in ctx.results:
        for key, s in (r.facts.get("metrics_samples") or {}).items():
            rank = -1 if key == "all" else int(key)
            out.setdefault(rank, (r.name, s))
    return out


def _ev(samples: dict[int, tuple[str, dict[str, Any]]], rank: int, which: str) -> list[Event]:
    got = samples.get(rank)
    if not got:
        return []
    name, s = got
    row = s.get(which) or s.get("last")
    if not row:
        return []
    return [
        Event(
            kind="metrics_row",
            line=row["line"],
            text=row["text"],
            rank=None if rank < 0 else rank,
            file=name,
            fields={"step": row.get("step")},
        )
    ]


def _median_by(keys: np.ndarray, values: np.ndarray) -> dict[Any, float]:
    """``{key: np.median(its values)}`` over the values that are not NaN, for all keys at once
    (one ``np.median`` a key cost ~25 µs); the same arithmetic, so the same floats."""
    out: dict[Any, float] = {}
    ok = ~np.isnan(values)
    keys, values = keys[ok], values[ok]
    if keys.size == 0:
        return out
    order = np.argsort(keys, kind="stable")
    keys, values = keys[order], values[order]
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    n = np.diff(np.append(starts, keys.size))
    v = values[np.lexsort((values, np.repeat(np.arange(starts.size), n)))]
    mid = starts + n // 2
    # an odd count: the middle value; an even one: the mean of the two middle values
    med = np.where(n % 2 == 1, v[mid], (v[mid - 1] + v[mid]) / 2)
    for k, m in zip(keys[starts], med.tolist(), strict=True):
        out[k.item() if hasattr(k, "item") else k] = m
    return out


class MetricsAnalyzer:
    name = "metrics"
    phase = "localization"
    order = 50
    reads = ("metrics", "facts.rank_host")
    writes = ("facts.metrics", "facts.metric_stragglers", "findings")

    def run(self, ctx: Context) -> None:
        m = ctx.metrics
        if m is None or not m.has("step"):
            return
        samples = _samples(ctx)
        facts: MetricsFacts = {}
        ctx.facts.metrics = facts
        steps = m.numpy("step").astype(float)
        if m.has("loss"):
            self._nan(ctx, m, samples)
        if m.has("rank", "step_time"):
            self._stragglers(ctx, m, samples, facts)
        if m.has("comm_time", "compute_time"):
            self._network(ctx, m, samples, facts, steps)
        if m.has("step_time") or m.has("throughput"):
            self._drop(ctx, m, samples, facts, steps)

    def _nan(self, ctx: Context, m: Any, samples: dict[int, tuple[str, dict[str, Any]]]) -> None:
        loss = m.numpy("loss").astype(float)
        valid = m.valid("loss")
        bad = np.isinf(loss) | (np.isnan(loss) & valid)
        if not bad.any():
            return
        ranks = sorted({int(r) for r in m.numpy("rank")[bad] if r == r}) if m.has("rank") else []
        first_step = int(np.nanmin(m.numpy("step").astype(float)[bad]))
        evs = [e for r in (ranks or [-1]) for e in _ev(samples, r, "first_nan")][:3]
        ctx.facts.metrics["nan_step"] = first_step
        ctx.add_finding(
            phase="triage",
            kind="nan_loss",
            title=f"Loss is NaN/Inf in the metrics from step {first_step}",
            detail="Restart from the last checkpoint before this step; look at the learning rate, loss scaling and the data of that step.",
            confidence=0.85,
            ranks=ranks,
            evidence_events=evs,
            category="NUMERICAL",
        )

    def _stragglers(
        self,
        ctx: Context,
        m: Any,
        samples: dict[int, tuple[str, dict[str, Any]]],
        facts: dict[str, Any],
    ) -> None:
        per = _median_by(m.numpy("rank"), m.numpy("step_time").astype(float))
        if len(per) < 4:
            return
        vals = np.array(list(per.values()))
        med = float(np.median(vals))
        mad = float(np.median(np.abs(vals - med))) or 1e-12
        out = []
        for rank, v in sorted(per.items()):
            score = med / v if v > 0 else 1.0
            if score < ctx.options.straggler_score:
                out.append(
                    {
                        "rank": int(rank),
                        "median_step_time": v,
                        "score": round(score, 3),
                        "robust_z": round(0.6745 * (v - med) / mad, 1),
                    }
                )
        facts["stragglers"] = out
        facts["median_step_time"] = med
        if not out or len(out) > 0.5 * len(per):
            return
        ranks = [s["rank"] for s in out]
        rank_host = ctx.facts.rank_host
        ctx.facts.metric_stragglers.update(ranks)
        for s in out[:16]:
            ctx.add_finding(
                phase="localization",
                kind="straggler",
                title=f"Rank {s['rank']} is a straggler: median step {s['median_step_time']:.3g}s vs {med:.3g}s (score {s['score']})",
                detail=f"Score = job median ÷ rank median, threshold {ctx.options.straggler_score}; robust z = {s['robust_z']}.",
                confidence=0.8,
                ranks=[s["rank"]],
                hosts=[rank_host[s["rank"]]] if s["rank"] in rank_host else [],
                evidence_events=_ev(samples, s["rank"], "median"),
                source="metrics",
            )

    def _network(
        self,
        ctx: Context,
        m: Any,
        samples: dict[int, tuple[str, dict[str, Any]]],
        facts: dict[str, Any],
        steps: np.ndarray,
    ) -> None:
        hosts = self._hosts(ctx, m)
        if hosts is None:
            return
        lo = np.nanpercentile(steps, 67)
        recent = steps >= lo
        comm = _median_by(hosts[recent], m.numpy("comm_time").astype(float)[recent])
        comp = _median_by(hosts[recent], m.numpy("compute_time").astype(float)[recent])
        if len(comm) < 2:
            return
        cmed = float(np.median(list(comm.values())))
        base = float(np.median([v for v in comm.values() if v <= cmed])) or 1e-12
        slow = sorted(h for h, v in comm.items() if v > ctx.options.comm_ratio * base)
        comp_vals = [v for v in comp.values() if v > 0]
        equal_compute = bool(comp_vals) and max(comp_vals) <= 1.15 * min(comp_vals)
        facts["comm_by_host"] = comm
        facts["compute_by_host"] = comp
        if not slow or len(slow) == len(comm):
            return
        facts["slow_hosts"] = slow
        facts["equal_compute"] = equal_compute
        ranks = _ranks_on(m, hosts, set(slow), on=True)
        fast_ranks = _ranks_on(m, hosts, set(slow), on=False)[:1]
        evs = [e for r in ranks[:2] + fast_ranks for e in _ev(samples, r, "last")]
        ctx.add_finding(
            phase="localization",
            kind="slow_network_hosts",
            title=f"Communication is slow on {len(slow)} of {len(comm)} nodes ({', '.join(slow[:8])}) while compute is {'equal' if equal_compute else 'not equal'}",
            detail=(
                f"Recent median comm time {max(comm[h] for h in slow):.3g}s on the slow nodes vs {base:.3g}s elsewhere; "
                f"compute {min(comp_vals):.3g}-{max(comp_vals):.3g}s. Equal compute with slow AllReduce on a subset of nodes points at their network path (NIC, cable, switch)."
            ),
            confidence=0.85 if equal_compute else 0.55,
            ranks=ranks,
            hosts=slow,
            evidence_events=evs,
            category="NETWORK",
        )

    def _hosts(self, ctx: Context, m: Any) -> np.ndarray | None:
        if m.has("host"):
            return np.array([h or "?" for h in m.column("host")], dtype=object)
        rank_host = ctx.facts.rank_host
        if m.has("rank") and rank_host:
            return np.array(
                [rank_host.get(int(r), "?") if r == r else "?" for r in m.numpy("rank")],
                dtype=object,
            )
        return None

    def _drop(
        self,
        ctx: Context,
        m: Any,
        samples: dict[int, tuple[str, dict[str, Any]]],
        facts: dict[str, Any],
        steps: np.ndarray,
    ) -> None:
        use_time = m.has("step_time")
        vals = m.numpy("step_time" if use_time else "throughput").astype(float)
        per_step = _median_by(steps, vals)
        if len(per_step) < SHORT_SERIES:
            return
        ks = np.array(sorted(per_step))
        vs = np.array([per_step[k] for k in ks])
        if len(ks) >= 20:
            start = max(1, int(0.05 * len(ks)))  # warm-up
            ks, vs = ks[start:], vs[start:]
            q = max(3, len(vs) // 4)
        else:
            # A short excerpt (a few iteration lines pasted into a report): its first and
            # last thirds, and only a change that holds on every point of the last third
            # against every point of the first (no single spike makes a slowdown).
            q = max(1, len(vs) // 3)
            first, last = vs[:q], vs[-q:]
            if not (last.min() > first.max() if use_time else last.max() < first.min()):
                return
        baseline, recent = float(np.median(vs[:q])), float(np.median(vs[-q:]))
        if baseline <= 0 or recent <= 0:
            return
        drop = 1 - baseline / recent if use_time else 1 - recent / baseline
        facts["throughput_drop"] = round(drop, 3)
        if drop < ctx.options.throughput_drop:
            return
        mid = (baseline + recent) / 2
        crossed = np.flatnonzero(vs > mid if use_time else vs < mid)
        at = int(ks[crossed[0]]) if crossed.size else None
        facts["drop_step"] = at
        any_rank = next(iter(sorted(samples)), -1)
        evs = _ev(samples, any_rank, "first") + _ev(samples, any_rank, "last")
        ctx.add_finding(
            phase="triage",
            kind="throughput_drop",
            title=f"Throughput dropped {drop:.0%} against the run's own baseline"
            + (f" from step {at}" if at is not None else ""),
            detail=f"Median {'step time' if use_time else 'throughput'} {baseline:.3g} at the start vs {recent:.3g} recently.",
            confidence=0.8,
            evidence_events=evs,
        )


def _ranks_on(m: Any, hosts: np.ndarray, chosen: set[str], *, on: bool) -> list[int]:
    """The ranks whose rows sit on (``on``) or off the ``chosen`` hosts."""
    if not m.has("rank"):
        return []
    return sorted(
        {
            int(r)
            for r, h in zip(m.numpy("rank"), hosts, strict=True)
            if (h in chosen) == on and r == r
        }
    )


register_analyzer(MetricsAnalyzer())
