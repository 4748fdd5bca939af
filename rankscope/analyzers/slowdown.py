"""Decomposition of a slowdown: which ranks and hosts, which part of the step, from when.

Reads every per-step metrics table (uploaded CSV/JSON lines/Parquet, or the iteration
lines of a log) and every GPU telemetry series (DCGM, nvidia-smi, W&B system metrics).

1. **Onset.** The job's step time per step (median across ranks; the inverse of the
   throughput when only that is given) is split at the single change point that best
   separates two levels (the largest |mean difference| x sqrt(n₁n₂/n)); the later level
   must be ``Options.throughput_drop`` (20 %) above the earlier one. Without an onset the
   run is compared rank against rank over its last third.
   Short excerpts, recurring slow stretches, linear growth and data stalls: see
   ``find_onset`` and ``_stall``.
2. **Which part grew.** Per rank, the median of each part of the step (compute, comm,
   data wait) after the onset against before it. A part *rose* on a rank when it grew
   ``Options.comm_ratio`` (1.5x) and by at least 10 % of the job's earlier step time.
3. **Attribution**, in this order (a rank slow in its own work makes every other rank
   wait in the next collective, so compute and data are looked at before communication):
   - compute rose on a minority of ranks → HARDWARE when that GPU's telemetry shows its
     SM clock down (≤ 90 % of its own earlier clock or of its peers'), its temperature at
     the slowdown limit (≥ 85 °C or 10 °C above its peers), power at its limit (≥ 95 %) or a
     thermal/power throttle reason; without telemetry the category stays UNKNOWN and the
     ranks and hosts are still named;
   - data wait rose on a minority of ranks → DATA (STORAGE_IO when those ranks' logs show
     storage errors);
   - communication rose on a minority of hosts while their compute stayed within 15 % →
     NETWORK on those hosts (and the switch or rack they share when a topology map was
     uploaded); on (nearly) every host → NETWORK for the whole job, no host named;
   - data wait rose everywhere → DATA/STORAGE_IO for the job (shared storage).
4. **Straggler scores** (as NVRx computes them): per rank, the peers' median time ÷ the
   rank's own, over the window after the onset (else the last third), on the rank's own
   work (compute + data wait; communication includes waiting for others) or the step time
   when that is all there is. An uploaded NVRx report (``straggler_score`` column) wins.
   1.0 = typical, 0.5 = twice as slow. Written to ``localization.straggler_scores``.

Declared output (``ctx.facts.metrics["slowdown"]``, also ``ctx.facts.slowdown`` → ``localization.slowdown``
without the finding): ``category``, ``part`` (compute|comm|data|step), ``ranks``,
``hosts``, ``gpus`` ([{host, gpu}]), ``switches``, ``factor``, ``onset_step``,
``onset_time``, ``confidence``, ``label``, ``finding`` (the finding dict). The verdict
reads it for a ``slow`` shape.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._lazy import lazy_module
from ..model import Event
from . import Context, register_analyzer
from ._rc import metrics_files, row_event

np = lazy_module("numpy")

PARTS = ("compute_time", "comm_time", "data_time")
PART_NAME = {"compute_time": "compute", "comm_time": "comm", "data_time": "data wait"}
TELEMETRY = ("gpu_temp", "sm_clock", "power", "power_limit", "throttle")
THERMAL_BITS = 0x08 | 0x20 | 0x40
POWER_BITS = 0x04 | 0x80
HOT_C = 85.0
MIN_SHARE = 0.10  # a part must grow by this share of the earlier step time to count
SHORT = 4  # fewest steps a series is judged on (iterations.MIN_ROWS: bug reports paste a few)


@dataclass
class Frame:
    """All metric rows of the job as flat arrays; ``src`` (file index, row) for evidence."""

    files: list[tuple[str, Any]] = field(default_factory=list)
    cols: dict[str, np.ndarray] = field(default_factory=dict)
    # empty until ``build_frame`` finds metrics (no numpy import for a job without any)
    file_idx: np.ndarray | None = None
    row: np.ndarray | None = None

    def has(self, name: str) -> bool:
        v = self.cols.get(name)
        return v is not None and v.dtype.kind == "f" and bool(np.isfinite(v).any())

    def event(self, i: int, kind: str, cols: list[str], **fields: Any) -> Event:
        name, table = self.files[int(self.file_idx[i])]
        return row_event(name, table, int(self.row[i]), kind, cols, **fields)


def build_frame(ctx: Context) -> Frame:
    fr = Frame()
    num = ("step", "rank", "gpu", "step_time", "throughput", *PARTS, *TELEMETRY, "straggler_score")
    acc: dict[str, list[np.ndarray]] = {c: [] for c in (*num, "host", "time")}
    fidx, rows = [], []
    for name, m in metrics_files(ctx):
        t = m.table
        n = t.num_rows
        fr.files.append((name, m))
        for c in num:
            if c in t.column_names:
                acc[c].append(t.column(c).to_numpy(zero_copy_only=False).astype(float))
            else:
                acc[c].append(np.full(n, np.nan))
        for c in ("host", "time"):
            if c in t.column_names:
                acc[c].append(np.array(t.column(c).to_pylist(), dtype=object))
            else:
                acc[c].append(np.full(n, None, dtype=object))
        fidx.append(np.full(n, len(fr.files) - 1, np.int64))
        rows.append(np.arange(n, dtype=np.int64))
    if not fr.files:
        return fr
    fr.cols = {c: np.concatenate(v) for c, v in acc.items()}
    fr.file_idx, fr.row = np.concatenate(fidx), np.concatenate(rows)
    _fill_places(ctx, fr)
    return fr


def _fill_places(ctx: Context, fr: Frame) -> None:
    """Host of a rank from the logs; rank of a (host, GPU) telemetry row from the ranks
    the logs put on that host (local rank = GPU index, the launchers' default binding)."""
    rank_host: dict[int, str] = ctx.facts.rank_host
    host, rank, gpu = fr.cols["host"], fr.cols["rank"], fr.cols["gpu"]
    for i in np.flatnonzero([h is None for h in host]):
        r = rank[i]
        if not math.isnan(r):
            host[i] = rank_host.get(int(r))
    on_host: dict[str, list[int]] = {}
    for r, h in sorted(rank_host.items()):
        on_host.setdefault(h, []).append(r)
    # per-rank metrics that carry host and rank teach the same mapping
    ok = ~np.isnan(rank)
    for r, h in zip(rank[ok].tolist(), host[ok].tolist(), strict=True):  # Python scalars: faster
        if h and int(r) not in rank_host:
            on_host.setdefault(h, []).append(int(r))
            rank_host[int(r)] = h
    for v in on_host.values():
        v.sort()
    # the GPU each rank drives: NCCL's nvmlDev where the logs print it, else the local
    # index in the usual block placement (rank % GPUs per node), else its position on the host
    nvml: dict[int, int] = {}
    for res in ctx.results:
        for proc, attrs in (res.facts.get("banners") or {}).items():
            if proc.isdigit() and "_gpu" in attrs:
                nvml.setdefault(int(proc), int(attrs["_gpu"][0]))
    tele = ~np.isnan(gpu) & np.isnan(rank)
    per_node = int(np.nanmax(gpu[tele])) + 1 if tele.any() else 0
    local: dict[int, tuple[str, int]] = {}
    for h, rs in on_host.items():
        block = per_node and len({r // per_node for r in rs}) == 1
        for i, r in enumerate(rs):
            g = nvml.get(r)
            if g is None:
                g = r % per_node if block else i
            local[r] = (h, g)
    by_place = {(h, g): r for r, (h, g) in local.items()}
    for i in np.flatnonzero(tele):
        r = by_place.get((host[i], int(gpu[i])))
        if r is not None:
            rank[i] = r
    for i in np.flatnonzero(np.isnan(gpu) & ~np.isnan(rank)):
        got = local.get(int(rank[i]))
        if got:
            gpu[i] = got[1]


def _group_median(keys: np.ndarray, values: np.ndarray, q: float = 50) -> dict[int, float]:
    """``{key: np.percentile(values of that key, q)}`` over the finite pairs, computed for all
    keys at once (one ``np.percentile`` a key cost ~25 µs: ~1,000 ranks or steps a call)."""
    ok = np.isfinite(values) & np.isfinite(keys)
    k, v = keys[ok].astype(np.int64), values[ok]
    if k.size == 0:
        return {}
    order = np.lexsort((v, k))  # by key, then each key's values in ascending order
    k, v = k[order], v[order]
    starts = np.flatnonzero(np.concatenate(([True], k[1:] != k[:-1])))
    return dict(zip(k[starts].tolist(), sorted_percentile(v, starts, q).tolist(), strict=True))


def sorted_percentile(v: np.ndarray, starts: np.ndarray, q: float) -> np.ndarray:
    """Per group of ``v`` (groups start at ``starts``, each sorted ascending), the ``q``-th
    percentile with the arithmetic of ``np.percentile``'s default (linear) method: the
    same index, weight and interpolation, so the same float to the last bit."""
    n = np.diff(np.append(starts, v.size))
    virtual = (n - 1) * (q / 100)
    above = virtual >= n - 1
    below = np.floor(virtual).astype(np.int64)
    gamma = virtual - np.where(above, -1, below)  # numpy's index is -1 past the last value
    a = v[starts + np.where(above, n - 1, below)]
    b = v[starts + np.where(above, n - 1, below + 1)]
    diff = b - a
    return np.where(gamma >= 0.5, b - diff * (1 - gamma), a + diff * gamma)


def change_point(y: np.ndarray) -> tuple[int, float, float] | None:
    """(index, level before, level after) of the single best split of ``y``, or None."""
    n = y.size
    if n < 12:
        return None
    lo = max(3, n // 20)
    c = np.cumsum(np.concatenate(([0.0], y)))
    k = np.arange(lo, n - lo + 1)
    if k.size == 0:
        return None
    m1 = c[k] / k
    m2 = (c[n] - c[k]) / (n - k)
    score = np.abs(m2 - m1) * np.sqrt(k * (n - k) / n)
    best = int(k[int(np.argmax(score))])
    before, after = float(np.median(y[:best])), float(np.median(y[best:]))
    # a ramp (a GPU heating up) splits in its middle: the slowdown began where the
    # values first left the earlier level for good
    rising = (
        (y > before + 0.25 * (after - before))
        if after > before
        else (y < before + 0.15 * (after - before))
    )
    start = best
    while start > lo and rising[start - 1]:
        start -= 1
    return start, before, after


def find_onset(ks: np.ndarray, ys: np.ndarray, drop: float) -> dict[str, Any] | None:
    """Where a step-time series (lower is better) slows down, and how:

    - ``recurring``: stretches of at least two rows at ``RECURRING`` (2x) or more the
      run's fast level, the run back at that level between them (the first row is fast);
    - ``shift``: a sustained change — the best single split (``change_point``) on 12 or
      more rows, else, on a short excerpt, a split where every row after it is slower
      than every row before it; the later level ``drop`` (20 %) above the earlier;
      ``growth`` when the step time rises at every row along a straight line (work that
      accumulates with each step);
    - ``stall``: not decided here (it needs the data-wait column, see ``_stall``).

    Returns {step, before, after, factor, pattern[, slow_steps, base_steps]} or None."""
    n = ys.size
    if n < SHORT or not np.all(np.isfinite(ys)) or ys.min() <= 0:
        return None
    rec = _recurring(ks, ys)
    if rec is not None:
        return rec
    start: int | None = None
    if n >= 12:
        cp = change_point(ys)
        if cp is not None:
            i, before, after = cp
            grew = after / before if before > 0 else 1.0
            sustained = np.mean(ys[i:] > (before + after) / 2) >= 0.6
            if grew >= 1 + drop and sustained:
                start = i
    else:
        best = 0.0
        for k in range(1, n - 1):  # at least two rows after the split
            b, a = ys[:k], ys[k:]
            if a.min() <= b.max() or np.median(a) < (1 + drop) * np.median(b):
                continue
            score = (a.mean() - b.mean()) * math.sqrt(k * (n - k) / n)
            if score > best:
                best, start = score, k
        if start is not None:
            before, after = float(np.median(ys[:start])), float(np.median(ys[start:]))
    if start is None:
        return None
    out: dict[str, Any] = {
        "step": int(ks[start]),
        "before": before,
        "after": after,
        "factor": after / before,
        "pattern": "growth" if _grows_linearly(ks, ys) else "shift",
    }
    return out


RECURRING = 2.0  # a row this many times the fast level is a slow row
STALL = 10.0  # one step this many times the median, mostly data wait: the input stalled
LINEAR_R2 = 0.98


def _grows_linearly(ks: np.ndarray, ys: np.ndarray) -> bool:
    """Step time up at every row, on a straight line in the step, ending ≥ 2x where it
    began: each step costs more in proportion to the steps already done."""
    if ys.size < SHORT or not np.all(np.diff(ys) > 0) or ys[-1] < 2 * ys[0]:
        return False
    x = ks.astype(float)
    r = np.corrcoef(x, ys)[0, 1]
    return bool(np.isfinite(r) and r * r >= LINEAR_R2)


def _recurring(ks: np.ndarray, ys: np.ndarray) -> dict[str, Any] | None:
    fast = float(np.percentile(ys, 10))
    slow = ys >= RECURRING * fast
    near = ys <= 1.25 * fast
    if slow[0] or near.sum() < 3 or slow.sum() < 2:
        return None
    # the slow stretches: maximal runs of slow rows
    edges = np.flatnonzero(np.diff(np.concatenate(([0], slow.astype(int), [0]))))
    runs = list(zip(edges[::2], edges[1::2], strict=True))
    if max(b - a for a, b in runs) < 2:
        return None
    first_end = runs[0][1]
    if not near[first_end:].any():
        return None  # never back to the fast level: a shift, not a recurrence
    lost = float(np.sum(ys[slow] - fast))
    if lost < 0.25 * fast * ys.size:
        return None
    before, after = float(np.median(ys[~slow])), float(np.median(ys[slow]))
    return {
        "step": int(ks[runs[0][0]]),
        "before": before,
        "after": after,
        "factor": after / before,
        "pattern": "recurring",
        "slow_steps": ks[slow],
        "base_steps": ks[~slow],
        "stretches": len(runs),
    }


class SlowdownAnalyzer:
    name = "slowdown"
    phase = "localization"
    order = 52
    reads = ("results", "metrics", "facts.rank_host", "facts.causes", "facts.metrics")
    writes = (
        "facts.metrics",
        "facts.metric_stragglers",
        "facts.straggler_scores",
        "facts.straggler_score_source",
        "facts.slowdown",
        "facts.metric_sources",
        "findings",
    )

    def run(self, ctx: Context) -> None:
        self._columns(ctx)
        fr = build_frame(ctx)
        if not fr.files:
            return
        met = ctx.facts.metrics
        step = fr.cols["step"]
        level = self._level(fr)
        onset = None
        if level is not None:
            ks = np.array(sorted(level))
            ys = np.array([level[k] for k in ks])
            if ks[0] <= max(1.0, 0.05 * ks[-1]):  # the series starts with the run: warm-up
                skip = max(1, int(0.05 * ks.size))
                ks, ys = ks[skip:], ys[skip:]
            onset = find_onset(ks, ys, ctx.options.throughput_drop)
            if onset is None and fr.has("data_time"):
                onset = self._stall(fr, ks, ys)
        after = np.zeros(step.size, bool)
        before = np.zeros(step.size, bool)
        if onset is not None and onset.get("slow_steps") is not None:
            # recurring slow stretches (or one stall): the slow steps against the others
            after = np.isin(step, onset["slow_steps"])
            before = np.isin(step, onset["base_steps"])
        elif onset is not None:
            after = step >= onset["step"]
            before = (step < onset["step"]) & np.isfinite(step)
            if np.isfinite(step).any():
                first = np.nanmin(step)
                warm = first + 0.05 * (onset["step"] - first)
                before &= step >= warm
        if onset is not None:
            onset["time"] = self._time_at(fr, onset["step"])
            onset["events"] = self._onset_rows(fr, onset, after)
            met["slowdown_onset"] = {k: onset[k] for k in ("step", "time", "factor", "pattern")}
        elif np.isfinite(step).any():
            after = step >= np.nanquantile(step, 2 / 3)
        self._scores(ctx, fr, after, onset)
        if onset is None:
            self._telemetry_only(ctx, fr)
            return
        verdict = self._attribute(ctx, fr, before, after, onset) or self._whole_step(
            ctx, fr, before, after, onset
        )
        if verdict is not None:
            met["slowdown"] = verdict
            ctx.facts.slowdown = {k: v for k, v in verdict.items() if k != "finding"}

    def _columns(self, ctx: Context) -> None:
        """Per metrics file: which column fed which measure, and the columns nothing placed."""
        files = []
        for r in ctx.results:
            if r.metrics is None:
                continue
            placed = r.facts.get("metrics_placed") or {
                c: r.facts.get("metrics_source", "") for c in r.metrics.columns if c != "line"
            }
            files.append(
                {
                    "file": r.name,
                    "source": r.facts.get("metrics_source") or r.kind,
                    "rows": len(r.metrics),
                    "placed": {k: v for k, v in placed.items() if k != "line"},
                    "unplaced": list(r.facts.get("metrics_unplaced") or []),
                }
            )
        if files:
            ctx.facts.metric_sources = files

    # -- the job's step-time level per step ----------------------------------------
    def _level(self, fr: Frame) -> dict[int, float] | None:
        """The job's step time per step from the source that covers the most steps: the
        step time as logged (median across ranks), the sum of the parts (the slowest rank:
        a synchronous step lasts as long as it), or the inverse of the throughput."""
        step = fr.cols["step"]
        cands: list[dict[int, float]] = []
        if fr.has("step_time"):
            cands.append(_group_median(step, fr.cols["step_time"]))
        if all(fr.has(p) for p in ("compute_time", "comm_time")):
            y = np.nansum([fr.cols[p] for p in PARTS if fr.has(p)], axis=0)
            y[~np.isfinite(fr.cols["compute_time"])] = np.nan
            cands.append(_group_median(step, y, 100.0))
        if fr.has("throughput"):
            tp = fr.cols["throughput"]
            y = np.where(tp > 0, 1.0 / np.where(tp > 0, tp, 1), np.nan)
            cands.append(_group_median(step, y))
        cands = [c for c in cands if len(c) >= SHORT]
        return max(cands, key=len) if cands else None

    def _stall(self, fr: Frame, ks: np.ndarray, ys: np.ndarray) -> dict[str, Any] | None:
        """One step ``STALL`` (10x) or more the run's median whose time is mostly data wait:
        the input pipeline stopped (a retried or failed sample, a slow read). A lone slow
        step without that split is not called a slowdown (a checkpoint, an evaluation or a
        warm-up step look the same)."""
        if ys.size < SHORT:
            return None
        i = int(np.argmax(ys))
        med = float(np.median(ys))
        if med <= 0 or ys[i] < STALL * med:
            return None
        data = _group_median(fr.cols["step"], fr.cols["data_time"]).get(int(ks[i]))
        if data is None or data < 0.5 * ys[i]:
            return None
        return {
            "step": int(ks[i]),
            "before": med,
            "after": float(ys[i]),
            "factor": float(ys[i]) / med,
            "pattern": "stall",
            "slow_steps": ks[i : i + 1],
            "base_steps": np.delete(ks, i),
        }

    def _onset_rows(self, fr: Frame, onset: dict[str, Any], after: np.ndarray) -> list[Event]:
        """The row where the slowdown starts and the slowest row after it, when the series
        is one process's (a single log): the lines a reader checks first."""
        rank = fr.cols["rank"]
        if len({int(r) for r in rank[np.isfinite(rank)]}) > 1:
            return []
        col = next((c for c in ("step_time", "throughput") if fr.has(c)), None)
        if col is None:
            return []
        v = fr.cols[col]
        first = np.flatnonzero((fr.cols["step"] == onset["step"]) & np.isfinite(v))
        out = []
        if first.size:
            out.append(fr.event(int(first[0]), "metrics_row", [col], window="onset"))
        idx = np.flatnonzero(after & np.isfinite(v))
        if idx.size:
            worst = int(idx[np.argmax(v[idx])] if col == "step_time" else idx[np.argmin(v[idx])])
            if not first.size or worst != int(first[0]):
                out.append(fr.event(worst, "metrics_row", [col], window="slowest"))
        return out

    def _time_at(self, fr: Frame, step: int) -> str | None:
        idx = np.flatnonzero(fr.cols["step"] == step)
        times = sorted(t for t in fr.cols["time"][idx] if t)
        return times[len(times) // 2] if times else None

    # -- straggler scores ------------------------------------------------------------
    def _scores(
        self, ctx: Context, fr: Frame, window: np.ndarray, onset: dict[str, Any] | None
    ) -> None:
        rank = fr.cols["rank"]
        source = None
        if fr.has("straggler_score"):
            per = _group_median(
                rank,
                np.where(window | np.isnan(fr.cols["step"]), fr.cols["straggler_score"], np.nan),
            )
            scores = {r: v for r, v in per.items()}
            source = "uploaded straggler report"
        else:
            own = [p for p in ("compute_time", "data_time") if fr.has(p)]
            if own:
                y = np.nansum([fr.cols[p] for p in own], axis=0)
                y[~np.isfinite(fr.cols[own[0]])] = np.nan
                source = " + ".join(PART_NAME[p] for p in own) + " time"
            elif fr.has("step_time"):
                y, source = fr.cols["step_time"], "step time"
            else:
                return
            per = _group_median(rank, np.where(window, y, np.nan))
            if len(per) < 2:
                return
            med = float(np.median(list(per.values())))
            scores = {r: (med / v if v > 0 else 1.0) for r, v in per.items()}
        if not scores:
            return
        ctx.facts.straggler_scores = {
            str(r): round(min(s, 9.99), 3) for r, s in sorted(scores.items())
        }
        ctx.facts.straggler_score_source = source
        ctx.facts.metrics["straggler_scores"] = scores
        slow = sorted(r for r, s in scores.items() if s < ctx.options.straggler_score)
        if slow and len(slow) <= max(1, len(scores) // 4):
            ctx.facts.metric_stragglers.update(slow)

    # -- attribution ------------------------------------------------------------------
    def _attribute(
        self,
        ctx: Context,
        fr: Frame,
        before: np.ndarray,
        after: np.ndarray,
        onset: dict[str, Any],
    ) -> dict[str, Any] | None:
        """Which part of the step rose on which ranks decides: the first of
        ``_ATTRIBUTION_RULES`` that applies."""
        x = _Rises.of(ctx, fr, before, after, onset)
        for _name, rule in _ATTRIBUTION_RULES:
            got = rule(self, ctx, x)
            if got is not None:
                return got
        return None

    def _rule_local_part(self, ctx: Context, x: _Rises) -> dict[str, Any] | None:
        n = x.n
        for p, cat in (("compute_time", "HARDWARE"), ("data_time", "DATA")):
            rs = sorted(x.rose.get(p, {}))
            if rs and len(rs) <= max(1, n // 2 - (1 if n % 2 == 0 else 0)) and len(rs) < n:
                return self._local(
                    ctx, x.fr, p, cat, rs, x.rose[p], x.hosts_of(rs), x.before, x.after, x.onset
                )
        return None

    def _rule_waited_for(self, ctx: Context, x: _Rises) -> dict[str, Any] | None:
        comm = x.rose.get("comm_time") or {}
        quiet = [r for r in x.ranks_all if r not in comm]
        if comm and 0 < len(quiet) <= max(1, x.n // 8) and len(comm) >= x.n // 2:
            # every rank but a few waits longer in the collective: the few are what they wait for
            return self._waited_for(
                ctx, x.fr, quiet, comm, x.hosts_of(quiet), x.before, x.after, x.onset
            )
        return None

    def _rule_network(self, ctx: Context, x: _Rises) -> dict[str, Any] | None:
        if not x.rose.get("comm_time"):
            return None
        return self._network(
            ctx, x.fr, x.rose, x.before, x.after, x.onset, x.rank_host, x.ranks_all
        )

    def _rule_compute_everywhere(self, ctx: Context, x: _Rises) -> dict[str, Any] | None:
        if len(x.rose.get("compute_time", {})) < max(1, x.n // 2):
            return None
        # compute grew on (nearly) every rank: the model, the input sizes, or every GPU
        signs = self._gpu_signs(ctx, x.fr, x.ranks_all, x.before, x.after, x.onset)
        hot = len(signs) >= max(1, x.n // 2)
        return self._everywhere(
            ctx,
            x.fr,
            category="HARDWARE" if hot else "UNKNOWN",
            part="compute_time",
            changes=x.rose["compute_time"],
            onset=x.onset,
            before=x.before,
            after=x.after,
            confidence=0.6 if hot else 0.45,
            why=(
                "the GPUs' telemetry shows them throttled together (cooling or power of the whole room or rack)"
                if hot
                else "compute grew on every rank alike: a change in the model, the sequence lengths or "
                "the batch, or something every node shares — not one rank or host"
            ),
        )

    def _rule_data_everywhere(self, ctx: Context, x: _Rises) -> dict[str, Any] | None:
        if "data_time" not in x.rose or len(x.rose["data_time"]) < x.n // 2:
            return None
        return self._everywhere(
            ctx,
            x.fr,
            category=self._storage_or_data(ctx, sorted(x.rose["data_time"])),
            part="data_time",
            changes=x.rose["data_time"],
            onset=x.onset,
            before=x.before,
            after=x.after,
            confidence=0.6,
            why="data wait rose on every rank: the shared input path (storage, preprocessing) slowed down",
        )

    def _waited_for(
        self,
        ctx: Context,
        fr: Frame,
        ranks: list[int],
        comm: dict[int, tuple[float, float]],
        hosts: list[str],
        before: np.ndarray,
        after: np.ndarray,
        onset: dict[str, Any],
    ) -> dict[str, Any]:
        signs = self._gpu_signs(ctx, fr, ranks, before, after, onset)
        gpus = [{"host": g["host"], "gpu": g["gpu"], "rank": g["rank"]} for g in signs]
        why = (
            "the other ranks' collective time grew while theirs did not: they waited for these ranks"
            + (" (" + "; ".join(g["why"] for g in signs[:3]) + ")" if signs else "")
            + (
                ""
                if signs
                else "; their own compute and data times are not in the metrics, so which part of their step grew is not known"
            )
        )
        return self._finish(
            ctx,
            fr,
            category="HARDWARE" if signs else "UNKNOWN",
            part="comm_time",
            ranks=ranks,
            hosts=hosts,
            changes=comm,
            onset=onset,
            before=before,
            after=after,
            confidence=0.75 if signs else 0.6,
            why=why,
            gpus=gpus,
            waited_for=True,
            extra_ev=[g["event"] for g in signs if g.get("event") is not None],
        )

    def _whole_step(
        self,
        ctx: Context,
        fr: Frame,
        before: np.ndarray,
        after: np.ndarray,
        onset: dict[str, Any],
    ) -> dict[str, Any] | None:
        """No part of the step tells where: a throttled GPU in the telemetry says HARDWARE;
        otherwise the slowdown is reported with its start and size, category UNKNOWN."""
        rank = fr.cols["rank"]
        ranks = sorted({int(r) for r in rank[np.isfinite(rank)]})
        signs = self._gpu_signs(ctx, fr, ranks, before, after, onset) if len(ranks) > 1 else []
        col = next((c for c in ("step_time", "throughput") if fr.has(c)), None)
        if col is None:
            return None
        key = np.where(np.isfinite(rank), rank, -1)
        b = _group_median(key, np.where(before, fr.cols[col], np.nan))
        a = _group_median(key, np.where(after, fr.cols[col], np.nan))
        changes = {r: (b[r], a[r]) for r in a if r in b}
        if signs and len(signs) <= max(1, len(ranks) // 4):
            gpus = [{"host": g["host"], "gpu": g["gpu"], "rank": g["rank"]} for g in signs]
            return self._finish(
                ctx,
                fr,
                category="HARDWARE",
                part=col,
                ranks=[g["rank"] for g in signs],
                hosts=sorted({g["host"] for g in signs if g["host"]}),
                changes=changes,
                onset=onset,
                before=before,
                after=after,
                confidence=0.75,
                why="; ".join(g["why"] for g in signs[:4]),
                gpus=gpus,
                extra_ev=[g["event"] for g in signs if g.get("event") is not None],
            )
        if onset.get("pattern") == "growth":
            return self._everywhere(
                ctx,
                fr,
                category="SOFTWARE",
                part=col,
                changes=changes,
                onset=onset,
                before=before,
                after=after,
                confidence=0.55,
                why="the step time rose at every logged step, along a straight line in the step number: "
                "each step costs more in proportion to the steps already done, i.e. something the program "
                "accumulates (a growing list, graph, cache or host-memory leak). A throttled GPU or a slow "
                "link steps down to a lower level and stays there; it does not grow without bound",
            )
        return self._everywhere(
            ctx,
            fr,
            category="UNKNOWN",
            part=col,
            changes=changes,
            onset=onset,
            before=before,
            after=after,
            confidence=0.5,
            why="the metrics do not split the step into compute, communication and data wait, so they cannot say which part grew; log those times per rank (or upload GPU telemetry) to localize it",
        )

    def _storage_or_data(self, ctx: Context, ranks: list[int]) -> str:
        rs = set(ranks)
        for c in ctx.facts.causes:
            if c["category"] == "STORAGE_IO" and (not rs or c["event"].rank in rs):
                return "STORAGE_IO"
        return "DATA"

    def _local(
        self,
        ctx: Context,
        fr: Frame,
        part: str,
        cat: str,
        ranks: list[int],
        changes: dict[int, tuple[float, float]],
        hosts: list[str],
        before: np.ndarray,
        after: np.ndarray,
        onset: dict[str, Any],
    ) -> dict[str, Any]:
        gpus: list[dict[str, Any]] = []
        tele_ev: list[Event] = []
        why = ""
        conf = 0.55
        if part == "compute_time":
            hot = self._gpu_signs(ctx, fr, ranks, before, after, onset)
            if hot:
                gpus = [{"host": g["host"], "gpu": g["gpu"], "rank": g["rank"]} for g in hot]
                tele_ev = [g["event"] for g in hot if g.get("event") is not None]
                why = "; ".join(g["why"] for g in hot[:4])
                conf = 0.85
            else:
                cat = "UNKNOWN"
                why = "no GPU telemetry shows clocks, temperature or power for these GPUs; upload DCGM or nvidia-smi samples to tell a throttled GPU from a slow host"
        else:
            cat = self._storage_or_data(ctx, ranks)
            conf = 0.8
            why = "the ranks waited longer for their next batch while the others waited for them in the collective"
        return self._finish(
            ctx,
            fr,
            category=cat,
            part=part,
            ranks=ranks,
            hosts=hosts,
            changes=changes,
            onset=onset,
            before=before,
            after=after,
            confidence=conf,
            why=why,
            gpus=gpus,
            extra_ev=tele_ev,
        )

    def _gpu_signs(
        self,
        ctx: Context,
        fr: Frame,
        ranks: list[int],
        before: np.ndarray,
        after: np.ndarray,
        onset: dict[str, Any],
    ) -> list[dict[str, Any]]:
        """Telemetry of the GPUs under ``ranks``: clock down, hot, at its power limit, throttled
        (one check each in ``_GPU_SIGNS``)."""
        if not any(fr.has(c) for c in ("sm_clock", "gpu_temp", "power", "throttle")):
            return []
        rank = fr.cols["rank"]
        tele = (
            np.isnan(fr.cols["step"])
            | np.isfinite(fr.cols["sm_clock"])
            | np.isfinite(fr.cols["gpu_temp"])
        )
        t_after, t_before = self._time_windows(fr, onset, after, before)
        out = []
        for r in ranks:
            mine = tele & (rank == r)
            if not mine.any():
                continue
            w = _GpuRows(fr, mine, tele & np.isfinite(rank) & (rank != r), t_after, t_before)
            signs: list[str] = []
            ev_i = None
            for check in _GPU_SIGNS:
                sign, i = check(w)
                if sign:
                    signs.append(sign)
                if ev_i is None:
                    ev_i = i
            if signs:
                out.append(_gpu_entry(fr, r, mine, signs, ev_i))
        return out

    def _time_windows(
        self, fr: Frame, onset: dict[str, Any] | None, after: np.ndarray, before: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Telemetry rows have times, not steps: split them at the onset's time (else at
        the last third of each series)."""
        times = fr.cols["time"]
        t_after, t_before = after.copy(), before.copy()
        tele = np.isnan(fr.cols["step"])
        if not tele.any():
            return t_after, t_before
        at = onset.get("time") if onset else None
        tt = np.array([t or "" for t in times[tele]], dtype=object)
        valid = sorted(x for x in tt if x)
        if not valid:
            return t_after, t_before
        if not at or not (valid[0] <= at <= valid[-1]):
            # no onset time, or one outside the telemetry's span (another clock or zone):
            # split the telemetry at the same fraction of the run as the onset's step
            frac = 2 / 3
            steps = fr.cols["step"][np.isfinite(fr.cols["step"])]
            if onset and onset.get("step") is not None and steps.size:
                lo, hi = float(steps.min()), float(steps.max())
                frac = (onset["step"] - lo) / (hi - lo) if hi > lo else frac
            at = valid[min(len(valid) - 1, int(len(valid) * frac))]
        t_after[tele] = tt >= at
        t_before[tele] = (tt < at) & (tt != "")
        return t_after, t_before

    def _network(
        self,
        ctx: Context,
        fr: Frame,
        rose: dict[str, dict[int, tuple[float, float]]],
        before: np.ndarray,
        after: np.ndarray,
        onset: dict[str, Any],
        rank_host: dict[int, str],
        ranks_all: list[int],
    ) -> dict[str, Any]:
        """Communication rose: on a minority of hosts (their links), or everywhere (the fabric)."""
        comm = rose["comm_time"]
        by_host: dict[str, list[int]] = {}
        for r in ranks_all:
            by_host.setdefault(rank_host.get(r, "?"), []).append(r)
        slow_hosts = sorted(
            h
            for h, rs in by_host.items()
            if h != "?" and sum(r in comm for r in rs) >= 0.5 * len(rs)
        )
        flat = _compute_flat(fr, comm, rose.get("compute_time", {}), before, after)
        known = [h for h in by_host if h != "?"]
        if not (slow_hosts and len(slow_hosts) <= len(known) / 2):
            return self._everywhere(
                ctx,
                fr,
                category="NETWORK",
                part="comm_time",
                changes=comm,
                onset=onset,
                before=before,
                after=after,
                confidence=0.6 if flat else 0.45,
                why="communication rose on (nearly) every host with compute flat: the fabric or a shared link, not one node",
            )
        ranks = sorted(r for h in slow_hosts for r in by_host[h])
        why = (
            "compute stayed flat on those hosts, so their collectives waited on the network path (NIC, cable, switch port)"
            if flat
            else "compute changed too, so the network is the likelier but not the only explanation"
        )
        return self._finish(
            ctx,
            fr,
            category="NETWORK",
            part="comm_time",
            ranks=ranks,
            hosts=slow_hosts,
            changes={r: comm[r] for r in ranks if r in comm},
            onset=onset,
            before=before,
            after=after,
            confidence=0.85 if flat else 0.6,
            why=why,
            switches=_shared_topology(ctx, slow_hosts, known),
        )

    def _everywhere(self, ctx: Context, fr: Frame, **claim: Any) -> dict[str, Any]:
        """A slowdown in which no rank or host stands out (``_finish`` without ranks or hosts)."""
        return self._finish(ctx, fr, ranks=[], hosts=[], **claim)

    # -- the finding ------------------------------------------------------------------
    def _finish(
        self,
        ctx: Context,
        fr: Frame,
        *,
        category: str,
        part: str,
        ranks: list[int],
        hosts: list[str],
        changes: dict[int, tuple[float, float]],
        onset: dict[str, Any],
        before: np.ndarray,
        after: np.ndarray,
        confidence: float,
        why: str,
        gpus: list[dict[str, Any]] | None = None,
        switches: list[str] | None = None,
        extra_ev: list[Event] | None = None,
        waited_for: bool = False,
    ) -> dict[str, Any]:
        """The decomposed slowdown's finding (title, detail, evidence rows) and its summary."""
        ranks = [r for r in ranks if r >= 0]  # -1: the rows without a rank
        factor = _factor(part, changes, onset)
        when = onset.get("time")
        title = _slow_title(
            fr,
            _Claim(category, part, ranks, hosts, changes, onset, why, gpus, waited_for),
            factor,
        )
        evs = _slow_evidence(fr, part, ranks, changes, onset, before, after, extra_ev)
        what = PART_WHAT[part]
        detail = (
            f"Job step time {onset['before']:.3g} → {onset['after']:.3g} s from step {onset['step']}"
            + (f" ({when})" if when else "")
            + f". {what[0].upper()}{what[1:]} per rank before → after: "
            + "; ".join(
                f"rank {r} {b:.3g} → {a:.3g} s" for r, (b, a) in sorted(changes.items())[:6]
            )
            + f". {why[0].upper()}{why[1:]}."
            + (f" Shared: {', '.join(switches)}." if switches else "")
        )
        f = ctx.add_finding(
            phase="localization",
            kind="slowdown_decomposed",
            title=title,
            detail=detail,
            confidence=confidence,
            ranks=ranks,
            hosts=hosts,
            evidence_events=evs,
            category=category,
            source="metrics",
        )
        return {
            "category": category,
            "part": PART_SHORT[part],
            "ranks": ranks,
            "hosts": hosts,
            "gpus": gpus or [],
            "switches": switches or [],
            "factor": round(factor, 2),
            "onset_step": onset["step"],
            "onset_time": when,
            "confidence": confidence,
            "label": _slow_label(category, part, hosts),
            "finding": f,
        }

    def _telemetry_only(self, ctx: Context, fr: Frame) -> None:
        """No onset in per-step metrics: still report a GPU that throttles against its peers."""
        if not fr.has("sm_clock") and not fr.has("throttle"):
            return
        rank = fr.cols["rank"]
        ranks = sorted({int(r) for r in rank[np.isfinite(rank)]})
        if len(ranks) < 2:
            return
        window = np.zeros(rank.size, bool)
        after, before = self._time_windows(fr, None, window, window)
        signs = self._gpu_signs(ctx, fr, ranks, before, after, {"time": None})
        if not signs or len(signs) > len(ranks) // 4 + 1:
            return
        evs = [g["event"] for g in signs if g.get("event") is not None]
        ctx.facts.metrics["throttled_gpus"] = [
            {k: g[k] for k in ("rank", "gpu", "host")} for g in signs
        ]
        ctx.add_finding(
            phase="localization",
            kind="gpu_throttled",
            title="GPU throttled: " + "; ".join(g["why"] for g in signs[:3]),
            detail="Its peers run at full clocks. A throttled GPU slows every synchronous step of the job to its pace.",
            confidence=0.7,
            ranks=[g["rank"] for g in signs],
            hosts=[g["host"] for g in signs if g["host"]],
            evidence_events=evs,
            category="HARDWARE",
        )


def _secs(v: float) -> str:
    return f"{v * 1000:.0f} ms" if v < 1 else f"{v:.2f} s"


@dataclass
class _Rises:
    """Which parts of the step rose on which ranks between the windows before and after the
    onset (by at least ``comm_ratio`` and ``MIN_SHARE`` of the earlier step)."""

    fr: Frame
    before: np.ndarray
    after: np.ndarray
    onset: dict[str, Any]
    rose: dict[str, dict[int, tuple[float, float]]]
    ranks_all: list[int]
    rank_host: dict[int, str]

    @property
    def n(self) -> int:
        return max(1, len(self.ranks_all))

    def hosts_of(self, rs: list[int]) -> list[str]:
        return sorted({self.rank_host[r] for r in rs if r in self.rank_host})

    @classmethod
    def of(
        cls,
        ctx: Context,
        fr: Frame,
        before: np.ndarray,
        after: np.ndarray,
        onset: dict[str, Any],
    ) -> _Rises:
        host = fr.cols["host"]
        # rows without a rank (one process's own metrics) are one series of their own
        rank = np.where(np.isfinite(fr.cols["rank"]), fr.cols["rank"], -1.0)
        base_step = onset["before"]
        rose: dict[str, dict[int, tuple[float, float]]] = {}
        for p in PARTS:
            if not fr.has(p):
                continue
            b = _group_median(rank, np.where(before, fr.cols[p], np.nan))
            a = _group_median(rank, np.where(after, fr.cols[p], np.nan))
            rose[p] = {
                r: (b[r], a[r])
                for r in a
                if r in b
                and a[r] >= ctx.options.comm_ratio * max(b[r], 1e-9)
                and a[r] - b[r] >= MIN_SHARE * base_step
            }
        return cls(
            fr=fr,
            before=before,
            after=after,
            onset=onset,
            rose=rose,
            ranks_all=sorted({int(r) for r in rank[before | after]}),
            rank_host={int(r): h for r, h in zip(rank, host, strict=True) if h and r == r},
        )


class _GpuRows:
    """One GPU's telemetry rows, its peers', and the windows before and after the onset."""

    def __init__(
        self,
        fr: Frame,
        mine: np.ndarray,
        peers: np.ndarray,
        t_after: np.ndarray,
        t_before: np.ndarray,
    ) -> None:
        self.fr, self.mine, self.peers = fr, mine, peers
        self.t_after, self.t_before = t_after, t_before

    def med(self, col: str, mask: np.ndarray) -> float:
        v = self.fr.cols[col][mask]
        v = v[np.isfinite(v)]
        return float(np.median(v)) if v.size else float("nan")


# a sign of a slow GPU and the row that shows it (None, None when the GPU looks fine)
_Sign = tuple[str | None, int | None]


def _clock_sign(w: _GpuRows) -> _Sign:
    fr = w.fr
    if not fr.has("sm_clock"):
        return None, None
    now = w.med("sm_clock", w.mine & w.t_after)
    was = w.med("sm_clock", w.mine & w.t_before)
    peer = w.med("sm_clock", w.peers & w.t_after)
    ref = np.nanmax([was, peer]) if not (math.isnan(was) and math.isnan(peer)) else float("nan")
    if math.isnan(now) or math.isnan(ref) or now > 0.9 * ref:
        return None, None
    cand = np.flatnonzero(w.mine & w.t_after & np.isfinite(fr.cols["sm_clock"]))
    row = int(cand[np.argmin(fr.cols["sm_clock"][cand])]) if cand.size else None
    return f"SM clock {now:.0f} MHz vs {ref:.0f} MHz", row


def _temperature_sign(w: _GpuRows) -> _Sign:
    fr = w.fr
    if not fr.has("gpu_temp"):
        return None, None
    now = w.med("gpu_temp", w.mine & w.t_after)
    peer = w.med("gpu_temp", w.peers & w.t_after)
    if math.isnan(now) or not (now >= HOT_C or (not math.isnan(peer) and now >= peer + 10)):
        return None, None
    cand = np.flatnonzero(w.mine & np.isfinite(fr.cols["gpu_temp"]))
    return (
        f"temperature {now:.0f} °C"
        + (f" vs {peer:.0f} °C on its peers" if not math.isnan(peer) else ""),
        int(cand[np.argmax(fr.cols["gpu_temp"][cand])]),
    )


def _power_sign(w: _GpuRows) -> _Sign:
    if not (w.fr.has("power") and w.fr.has("power_limit")):
        return None, None
    pw, lim = w.med("power", w.mine & w.t_after), w.med("power_limit", w.mine)
    if not math.isnan(pw) and not math.isnan(lim) and lim > 0 and pw >= 0.95 * lim:
        return f"power {pw:.0f} W at its {lim:.0f} W limit", None
    return None, None


def _throttle_sign(w: _GpuRows) -> _Sign:
    if not w.fr.has("throttle"):
        return None, None
    th = w.fr.cols["throttle"][w.mine & w.t_after]
    th = th[np.isfinite(th)].astype(np.int64)
    if th.size and np.mean((th & THERMAL_BITS) != 0) >= 0.5:
        return "thermal slowdown reported as a clock-event reason", None
    if th.size and np.mean((th & POWER_BITS) != 0) >= 0.5:
        return "power cap reported as a clock-event reason", None
    return None, None


# the checks of one GPU, in the order its signs are listed (the first row found is quoted)
_GPU_SIGNS = (_clock_sign, _temperature_sign, _power_sign, _throttle_sign)


def _gpu_entry(
    fr: Frame, r: int, mine: np.ndarray, signs: list[str], ev_i: int | None
) -> dict[str, Any]:
    idx = np.flatnonzero(mine)
    g = fr.cols["gpu"][idx]
    g = g[np.isfinite(g)]
    h = next((x for x in fr.cols["host"][idx] if x), None)
    return {
        "rank": r,
        "gpu": int(g[0]) if g.size else None,
        "host": h,
        "why": f"rank {r} (GPU {int(g[0]) if g.size else '?'} on {h or '?'}): " + ", ".join(signs),
        "event": fr.event(ev_i, "metrics_row", ["gpu", "gpu_temp", "sm_clock"])
        if ev_i is not None
        else None,
    }


def _compute_flat(
    fr: Frame,
    comm: dict[int, tuple[float, float]],
    comp: dict[int, tuple[float, float]],
    before: np.ndarray,
    after: np.ndarray,
) -> bool:
    """Compute stayed within 15 % on the ranks whose communication rose."""
    if not fr.has("compute_time"):
        return True
    rank = fr.cols["rank"]
    b = _group_median(rank, np.where(before, fr.cols["compute_time"], np.nan))
    a = _group_median(rank, np.where(after, fr.cols["compute_time"], np.nan))
    rs = [r for r in comm if r in a and r in b]
    return bool(rs) and all(abs(a[r] - b[r]) <= 0.15 * max(b[r], 1e-9) for r in rs) and not comp


def _shared_topology(ctx: Context, slow_hosts: list[str], known: list[str]) -> list[str]:
    """The switch or rack every slow host hangs off, when the topology is known."""
    topo = {e.host: e.fields for e in ctx.by_kind.get("topology_entry", []) if e.host}
    shared: list[str] = []
    if not topo:
        return shared
    for key in ("switch", "rack"):
        vals = {topo.get(h, {}).get(key) for h in slow_hosts}
        if len(vals) == 1 and None not in vals:
            v = vals.pop()
            others = [h for h in known if h not in slow_hosts and topo.get(h, {}).get(key) == v]
            shared.append(
                f"{key} {v}"
                + ("" if not others else f" (also serves {len(others)} unaffected host(s))")
            )
    return shared


PART_WHAT = {
    "comm_time": "communication time",
    "compute_time": "compute time",
    "data_time": "data wait",
    "step_time": "step time",
    "throughput": "throughput",
}
PART_SHORT = {
    "comm_time": "comm",
    "compute_time": "compute",
    "data_time": "data",
    "step_time": "step",
    "throughput": "step",
}
_PATTERN_TAIL = {
    "growth": ", growing at every step",
    "stall": ", for one step",
}


def _factor(part: str, changes: dict[int, tuple[float, float]], onset: dict[str, Any]) -> float:
    """How many times slower, per rank's median (throughput: how many times lower)."""
    if part == "throughput":
        factors = [b / a for b, a in changes.values() if a > 0]
    else:
        factors = [a / b for b, a in changes.values() if b > 0]
    return float(np.median(factors)) if factors else onset["factor"]


def _where(
    fr: Frame, part: str, ranks: list[int], hosts: list[str], gpus: list[dict[str, Any]] | None
) -> str:
    if gpus:
        return ", ".join(
            f"rank {g['rank']} (GPU {g['gpu']} on {g['host'] or '?'})" for g in gpus[:3]
        )
    if ranks and not hosts:
        return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks[:8]))}"
    if 0 < len(hosts) <= 3:
        return " and ".join(hosts)
    if hosts:
        return f"{len(hosts)} hosts"
    if part not in ("step_time", "throughput") and np.isfinite(fr.cols["rank"]).any():
        return "every host"
    return "the job"


@dataclass
class _Claim:
    """What the finding says: which part of the step changed, where, and why."""

    category: str
    part: str
    ranks: list[int]
    hosts: list[str]
    changes: dict[int, tuple[float, float]]
    onset: dict[str, Any]
    why: str
    gpus: list[dict[str, Any]] | None
    waited_for: bool


def _slow_title(fr: Frame, c: _Claim, factor: float) -> str:
    """What rose (or fell) where, by how much, from when, in which pattern, and why."""
    category, part, ranks, hosts = c.category, c.part, c.ranks, c.hosts
    changes, onset, why, gpus, waited_for = c.changes, c.onset, c.why, c.gpus, c.waited_for
    what = PART_WHAT[part]
    where = _where(fr, part, ranks, hosts, gpus)
    when = onset.get("time")
    verb = "fell" if part == "throughput" else "rose"
    # a throughput is in the log's own unit (samples/s, tokens/s, …), the other parts in seconds
    show = (lambda v: f"{v:.4g}") if part == "throughput" else _secs
    levels = (
        float(np.median([b for b, _ in changes.values()])) if changes else onset["before"],
        float(np.median([a for _, a in changes.values()])) if changes else onset["after"],
    )
    flat = "while compute stayed flat" if part == "comm_time" else ""
    if part == "comm_time" and "not the only" in why:
        flat = "while compute also changed"
    if waited_for:
        where = f"every rank but {', '.join(map(str, ranks[:8]))}"
        flat = f"— the others waited for rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks[:8]))}"
    pattern = onset.get("pattern")
    if pattern == "recurring":
        tail = (
            f", in {onset['stretches']} slow stretch{'es' if onset['stretches'] > 1 else ''} "
            "with the run back at its pace between them"
        )
    else:
        tail = _PATTERN_TAIL.get(pattern or "", "")
    if gpus:
        whom = f", {'that GPU' if len(gpus) == 1 else 'those GPUs'} ({why.split(': ', 1)[-1]})"
    elif waited_for:
        whom = ""
    elif hosts or ranks:
        whom = f", {'those hosts' if hosts else 'those ranks'}"
    else:
        whom = ""
    return (
        f"{what[0].upper()}{what[1:]} {'of' if where == 'the job' else 'on'} {where} {verb} "
        + (f"{factor:.1f}x" if factor < 10 else f"from {show(levels[0])} to {show(levels[1])}")
        + " from "
        + (
            f"{when[11:16] if when and len(when) >= 16 else when} (step {onset['step']})"
            if when
            else f"step {onset['step']}"
        )
        + (f" {flat}" if flat else "")
        + tail
        + (f": {category}" if category != "UNKNOWN" else "")
        + whom
    )


def _slow_evidence(
    fr: Frame,
    part: str,
    ranks: list[int],
    changes: dict[int, tuple[float, float]],
    onset: dict[str, Any],
    before: np.ndarray,
    after: np.ndarray,
    extra_ev: list[Event] | None,
) -> list[Event]:
    """The onset's rows, the telemetry's, a typical row before and after for up to two of
    the ranks, and a peer's row after."""
    evs: list[Event] = list(onset.get("events") or []) + list(extra_ev or [])
    rank = fr.cols["rank"]
    col = part
    for r in (ranks or sorted(changes))[:2]:
        mine = np.isnan(rank) if r == -1 else rank == r
        for mask, label in ((before, "before"), (after, "after")):
            idx = np.flatnonzero(mask & mine & np.isfinite(fr.cols[col]))
            if idx.size:
                v = fr.cols[col][idx]
                i = int(idx[np.argmin(np.abs(v - np.median(v)))])
                evs.append(fr.event(i, "metrics_row", [col], window=label))
    if ranks:
        peers = np.flatnonzero(
            after & np.isfinite(rank) & ~np.isin(rank, ranks) & np.isfinite(fr.cols[col])
        )
        if peers.size:
            evs.append(fr.event(int(peers[0]), "metrics_row", [col], window="after, a peer"))
    return evs


def _slow_label(category: str, part: str, hosts: list[str]) -> str:
    return {
        "NETWORK": "communication slowed down" + (" on a subset of hosts" if hosts else ""),
        "HARDWARE": "a GPU slowed down (thermal or power throttling)",
        "DATA": "data loading slowed down",
        "STORAGE_IO": "reads from storage slowed down",
        "UNKNOWN": "compute slowed down on some ranks"
        if part == "compute_time"
        else "the job's steps slowed down",
    }.get(category, "the step slowed down")


# what rose where, in the order the analyst asks; the first rule that answers decides
_ATTRIBUTION_RULES: tuple[tuple[str, Callable[..., dict[str, Any] | None]], ...] = (
    ("compute or data wait rose on a minority of ranks", SlowdownAnalyzer._rule_local_part),
    ("all but a few ranks waited longer in collectives", SlowdownAnalyzer._rule_waited_for),
    ("communication rose", SlowdownAnalyzer._rule_network),
    ("compute rose on (nearly) every rank", SlowdownAnalyzer._rule_compute_everywhere),
    ("data wait rose on every rank", SlowdownAnalyzer._rule_data_everywhere),
)


register_analyzer(SlowdownAnalyzer())
