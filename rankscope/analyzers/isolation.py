"""Isolation: affected vs unaffected groups, nccl-tests bandwidth, bisection breaking points.

- Groups: nodes; switches/racks when a topology map (host → switch[, rack]) was
  uploaded; pipeline stages when ``Options.pipeline_stages`` is set (stage =
  rank // (world / p), Megatron's layout). For each grouping, the median
  compute and communication time per group (from per-step metrics); a group
  whose comm time is ``Options.comm_ratio`` x the others' while compute is equal
  is affected on the communication side (and the reverse for compute).
- nccl-tests: each run's bus bandwidth (the mean busbw of its ≥ 256 MiB rows,
  else the ``Avg bus bandwidth`` line, which averages the whole size sweep and so
  depends on ``-b``/``-e``); runs are grouped by their hosts and
  compared with each other (a run below 60 % of the best comparable run) and
  with ``Options.expected_busbw`` (below 80 % is degraded; below 50 % poor);
  intra-node and inter-node runs are compared separately.
- Bisection: per variable, trials sorted by value; the breaking point lies
  between the largest working value and the smallest failing one.
"""

from __future__ import annotations

from typing import Any

from .._lazy import lazy_module
from ..links import DEGRADED, POOR
from ..model import Event
from . import Context, register_analyzer
from ._rc import metrics_files, row_event

np = lazy_module("numpy")


class IsolationAnalyzer:
    name = "isolation"
    phase = "isolation"
    order = 65
    reads = ("events", "doc.job", "facts.rank_host")
    writes = (
        "doc.isolation.topology_hosts",
        "doc.isolation.groups",
        "doc.isolation.intra_vs_inter",
        "doc.isolation.nccl_tests",
        "doc.isolation.bisection",
        "findings",
    )

    def run(self, ctx: Context) -> None:
        iso = ctx.doc.setdefault("isolation", {})
        topo = self._topology(ctx)
        if topo:
            iso["topology_hosts"] = len(topo)
        self._groups(ctx, iso, topo)
        self._nccl_tests(ctx, iso, topo)
        self._bisection(ctx, iso)
        if not iso:
            ctx.doc.pop("isolation", None)

    @staticmethod
    def _topology(ctx: Context) -> dict[str, dict[str, Any]]:
        topo: dict[str, dict[str, Any]] = {}
        for e in ctx.by_kind.get("topology_entry", []):
            if e.host:
                topo[e.host] = {
                    "switch": e.fields.get("switch"),
                    "rack": e.fields.get("rack"),
                    "event": e,
                }
        return topo

    def _groups(self, ctx: Context, iso: dict[str, Any], topo: dict[str, dict[str, Any]]) -> None:
        rank_host = ctx.facts.rank_host
        world = ctx.doc.get("job", {}).get("world_size")
        p = ctx.options.pipeline_stages
        results = []
        for name, m in metrics_files(ctx):
            if not m.has("step", "comm_time", "compute_time") or not (
                m.has("host") or m.has("rank")
            ):
                continue
            n = len(m)
            comm, comp = m.numpy("comm_time").astype(float), m.numpy("compute_time").astype(float)
            steps = m.numpy("step").astype(float)
            recent = steps >= np.nanquantile(steps, 2 / 3) if n else np.ones(0, bool)
            hosts = np.array(m.column("host") if m.has("host") else [None] * n, dtype=object)
            ranks = m.numpy("rank").astype(float) if m.has("rank") else np.full(n, np.nan)
            for i in np.flatnonzero([h is None for h in hosts]):
                r = ranks[i]
                hosts[i] = rank_host.get(int(r)) if not np.isnan(r) else None
            groupings: dict[str, np.ndarray] = {"node": hosts}
            if topo:
                groupings["switch"] = np.array(
                    [topo.get(h, {}).get("switch") if h else None for h in hosts], dtype=object
                )
                if any(v.get("rack") for v in topo.values()):
                    groupings["rack"] = np.array(
                        [topo.get(h, {}).get("rack") if h else None for h in hosts], dtype=object
                    )
            if p and world and world % p == 0:
                per = world // p
                groupings["stage"] = np.array(
                    [None if np.isnan(r) else f"stage {int(r) // per}" for r in ranks], dtype=object
                )
            for gname, labels in groupings.items():
                res = self._compare(ctx, name, m, gname, labels, comm, comp, recent)
                if res:
                    results.append(res)
        if results:
            iso["groups"] = results

    def _compare(
        self,
        ctx: Context,
        name: str,
        m: Any,
        gname: str,
        labels: np.ndarray,
        comm: np.ndarray,
        comp: np.ndarray,
        recent: np.ndarray,
    ) -> dict[str, Any] | None:
        per: dict[str, dict[str, Any]] = {}
        for g in sorted({x for x in labels if x is not None}):
            idx = np.flatnonzero((labels == g) & recent)
            c, k = comm[idx], comp[idx]
            if idx.size == 0 or np.all(np.isnan(c)) or np.all(np.isnan(k)):
                continue
            per[g] = {
                "comm": float(np.nanmedian(c)),
                "compute": float(np.nanmedian(k)),
                "rows": idx,
            }
        if len(per) < 2:
            return None
        ratio = ctx.options.comm_ratio
        out: dict[str, Any] = {
            "by": gname,
            "file": name,
            "groups": {
                g: {"comm": round(v["comm"], 4), "compute": round(v["compute"], 4)}
                for g, v in per.items()
            },
        }
        for side, other in (("comm", "compute"), ("compute", "comm")):
            affected = []
            for g, v in per.items():
                rest = [w[side] for h, w in per.items() if h != g]
                rest_o = [w[other] for h, w in per.items() if h != g]
                base, base_o = float(np.median(rest)), float(np.median(rest_o))
                if (
                    base > 0
                    and v[side] >= ratio * base
                    and (base_o == 0 or abs(v[other] - base_o) <= 0.15 * base_o)
                ):
                    affected.append(g)
            if affected and len(affected) < len(per):
                unaffected = [g for g in per if g not in affected]
                out[f"affected_{side}"] = affected
                ev_rows = [int(per[g]["rows"][-1]) for g in affected[:3]] + [
                    int(per[unaffected[0]]["rows"][-1])
                ]
                a_med = np.median([per[g][side] for g in affected])
                u_med = np.median([per[g][side] for g in unaffected])
                ctx.add_finding(
                    phase="isolation",
                    kind=f"isolated_{side}_{gname}",
                    title=f"{side.capitalize()} is slow on {gname} group(s) {', '.join(affected[:6])}: "
                    f"{a_med:.3g}s vs {u_med:.3g}s elsewhere, {other} equal",
                    detail=(
                        "A communication problem local to these groups (links, NICs, switch ports): run nccl-tests "
                        "across them vs the others."
                        if side == "comm"
                        else "A compute problem local to these groups (throttled or faulty GPUs, CPU contention): check nvidia-smi clocks and temperatures."
                    ),
                    confidence=0.75,
                    hosts=[g for g in affected if gname == "node"],
                    evidence_events=[
                        row_event(name, m, r, "metrics_row", ["host", "compute_time", "comm_time"])
                        for r in ev_rows
                    ],
                    category="NETWORK" if side == "comm" else "HARDWARE",
                    by=gname,
                    affected=affected,
                )
        return out

    def _nccl_tests(
        self, ctx: Context, iso: dict[str, Any], topo: dict[str, dict[str, Any]]
    ) -> None:
        """nccl-tests runs compared with each other (same scope and test), with the expected
        bus bandwidth and with the link they ran on."""
        runs = [r for e in ctx.by_kind.get("nccl_test_result", []) if (r := _nccl_test_run(e))]
        if not runs:
            return
        expected = ctx.options.expected_busbw
        table: list[dict[str, Any]] = []
        for scope in sorted({r["scope"] for r in runs}):
            for test, rs in _by_test([r for r in runs if r["scope"] == scope]).items():
                best = max(r["busbw"] for r in rs)
                table += [_nccl_test_row(r, test, scope, best, topo, expected) for r in rs]
                slow = [r for r in rs if len(rs) > 1 and r["busbw"] < 0.6 * best]
                if slow:
                    _slow_group_finding(ctx, test, scope, rs, slow, topo)
                if expected:
                    _below_expected_findings(ctx, test, rs, slow, expected)
        self._against_link(ctx, runs, table)
        # intra vs inter: a healthy intra-node result with a poor inter-node one points at the fabric
        intra = [r for r in runs if r["scope"] == "intra_node"]
        inter = [r for r in runs if r["scope"] == "inter_node"]
        if intra and inter:
            iso["intra_vs_inter"] = {
                "intra_busbw": max(r["busbw"] for r in intra),
                "inter_busbw": min(r["busbw"] for r in inter),
            }
        iso["nccl_tests"] = table

    def _against_link(
        self, ctx: Context, runs: list[dict[str, Any]], table: list[dict[str, Any]]
    ) -> None:
        """Each run against the link it ran on (``engine/links.py``) and against its own
        larger sizes (a collapse at one size)."""
        rows_by_event = {(t["file"], t["line"]): t for t in table}
        for r in runs:
            e: Event = r["event"]
            f = e.fields
            exp = f.get("expected")
            row = rows_by_event.get((e.file, e.line))
            if exp and exp.get("gbs") and r["basis"] in ("large_rows", "avg_line"):
                ratio = r["busbw"] / exp["gbs"]
                if row is not None:
                    row["link"] = exp["link"]
                    row["link_busbw"] = round(exp["gbs"], 1)
                    row["vs_link"] = round(ratio, 3)
                # the Avg line averages small sizes too: only a run with large rows is judged low
                if ratio < DEGRADED and r["basis"] == "large_rows":
                    level = "far below" if ratio < POOR else "below"
                    ctx.add_finding(
                        phase="isolation",
                        kind="nccl_tests_below_link",
                        title=f"{r['test']} on {', '.join(r['hosts'][:4]) or e.file}: {r['busbw']:.3g} GB/s busbw is "
                        f"{ratio:.0%} of what its link carries ({exp['gbs']:.3g} GB/s, {exp['link']}) — {level} the link's rate",
                        detail=f"Link rate: {exp['basis']}. Healthy runs reach 75-95 % of it at ≥ 256 MiB. "
                        "Check the NICs' link rate and errors (ibstat, ethtool -S), NCCL_IB_HCA / NCCL_SOCKET_IFNAME "
                        "(a run on the wrong interface or over TCP), PCIe/ACS settings, and NCCL_P2P_DISABLE / NCCL_NVLS_ENABLE.",
                        confidence=0.75 if ratio < POOR else 0.6,
                        hosts=r["hosts"],
                        evidence_events=[e],
                        category="NETWORK",
                        busbw=r["busbw"],
                        link_busbw=exp["gbs"],
                    )
            col = f.get("collapse")
            if col and col.get("row"):
                bad = col["row"]
                evs = [
                    Event(
                        kind="nccl_test_row",
                        line=x["line"],
                        text=x["text"],
                        host=e.host,
                        file=e.file,
                    )
                    for x in (col.get("before"), bad, col.get("after"))
                    if x
                ]
                where = (
                    f"at the largest size ({_size(bad['size'])}: {bad['busbw']:.3g} GB/s vs {col['before']['busbw']:.3g} GB/s at {_size(col['before']['size'])})"
                    if col.get("tail")
                    else f"at {_size(bad['size'])} ({bad['busbw']:.3g} GB/s between {col['before']['busbw']:.3g} and {col['after']['busbw']:.3g} GB/s)"
                )
                ctx.add_finding(
                    phase="isolation",
                    kind="nccl_tests_size_collapse",
                    title=f"{r['test']} on {', '.join(r['hosts'][:4]) or e.file}: bus bandwidth collapses {where}",
                    detail="The sizes around it run at full speed, so the fabric can carry the traffic: "
                    "look at what NCCL picks for that size (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING; "
                    "NCCL_PROTO/NCCL_ALGO overrides, a tuner plugin, NCCL_BUFFSIZE) and at the switch "
                    "buffers/adaptive routing if it shows only across nodes.",
                    confidence=0.7,
                    hosts=r["hosts"],
                    evidence_events=evs,
                    category="NETWORK",
                    size=bad["size"],
                )

    def _bisection(self, ctx: Context, iso: dict[str, Any]) -> None:
        trials = ctx.by_kind.get("bisection_trial", [])
        if not trials:
            return
        by_var: dict[str, list[Event]] = {}
        for e in trials:
            by_var.setdefault(str(e.fields.get("variable")), []).append(e)
        out = []
        for var, evs in sorted(by_var.items()):
            num = [e for e in evs if isinstance(e.fields.get("value"), int | float)]
            works = [e for e in num if e.fields["outcome"] == "works"]
            fails = [e for e in num if e.fields["outcome"] == "fails"]
            row: dict[str, Any] = {
                "variable": var,
                "trials": len(evs),
                "works": sorted({e.fields["value"] for e in works}),
                "fails": sorted({e.fields["value"] for e in fails}),
            }
            if works and fails:
                hi_ok = max(works, key=lambda e: e.fields["value"])
                lo_bad = min(fails, key=lambda e: e.fields["value"])
                if hi_ok.fields["value"] < lo_bad.fields["value"]:
                    row["breaking_point"] = {
                        "last_working": hi_ok.fields["value"],
                        "first_failing": lo_bad.fields["value"],
                    }
                    row["monotonic"] = not any(
                        e.fields["value"] > lo_bad.fields["value"] for e in works
                    )
                    title = (
                        f"Bisection on {var}: works at {hi_ok.fields['value']:g}, fails at {lo_bad.fields['value']:g} — "
                        f"the breaking point is between them"
                    )
                    detail = (
                        "Test the midpoint next"
                        if _gap(hi_ok.fields["value"], lo_bad.fields["value"])
                        else "Adjacent values: this is the exact breaking point"
                    )
                    detail += "; document what changes at that value (a new node, a new switch tier, a memory limit)."
                    conf = 0.8
                else:
                    row["monotonic"] = False
                    title = f"Bisection on {var} is not monotonic: fails at {lo_bad.fields['value']:g} but works above it"
                    detail = "An intermittent failure or a second variable changing between trials; repeat the trials around the failing values."
                    conf = 0.6
                ctx.add_finding(
                    phase="isolation",
                    kind="bisection_breaking_point",
                    title=title,
                    detail=detail,
                    confidence=conf,
                    evidence_events=[hi_ok, lo_bad],
                    variable=var,
                    **{k: v for k, v in row.items() if k == "breaking_point"},
                )
            elif fails and not works:
                row["note"] = (
                    "fails at every value tried: the cause is below the smallest value tested"
                )
            elif works and not fails:
                row["note"] = (
                    "works at every value tried: the failure needs a larger value (or another variable)"
                )
            out.append(row)
        iso["bisection"] = out


def _gap(a: float, b: float) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return b - a > 1
    return b - a > 1e-9


def _size(n: int) -> str:
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << k and n % (1 << k) == 0:
            return f"{n >> k} {unit}"
    return f"{n} B"


def _nccl_test_run(e: Event) -> dict[str, Any] | None:
    """One nccl-tests run's bus bandwidth and where it comes from."""
    f = e.fields
    # the ≥ 256 MiB rows first: the "Avg bus bandwidth" line averages every size of the
    # sweep, so it depends on -b/-e (8 B..16 GiB averages ~5x lower than 512 MiB..8 GiB)
    if f.get("large_rows") and f.get("large_busbw") is not None:
        bw, basis = f["large_busbw"], "large_rows"
    elif f.get("avg_busbw") is not None:
        bw, basis = f["avg_busbw"], "avg_line"
    else:
        bw, basis = f.get("large_busbw"), "last_rows"
    if bw is None:
        bw, basis = f.get("peak_busbw"), "peak"
    if bw is None:
        return None
    return {
        "event": e,
        "busbw": float(bw),
        "basis": basis,
        "hosts": f.get("hosts") or [],
        "scope": f.get("scope"),
        "test": f.get("test"),
    }


def _by_test(same: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    by_test: dict[str, list[dict[str, Any]]] = {}
    for r in same:
        by_test.setdefault(r["test"], []).append(r)
    # a sweep without ≥ 256 MiB rows measures latency, not the fabric: compare it only
    # with others like it
    for test in list(by_test):
        small = [r for r in by_test[test] if r["basis"] != "large_rows"]
        if small and len(small) < len(by_test[test]):
            by_test[test] = [r for r in by_test[test] if r["basis"] == "large_rows"]
            by_test[f"{test} (small sizes only)"] = small
    return by_test


def _nccl_test_row(
    r: dict[str, Any],
    test: str,
    scope: str,
    best: float,
    topo: dict[str, dict[str, Any]],
    expected: float | None,
) -> dict[str, Any]:
    row = {
        "file": r["event"].file,
        "line": r["event"].line,
        "test": test,
        "scope": scope,
        "hosts": r["hosts"],
        "busbw": r["busbw"],
        "busbw_from": r["basis"],
        "vs_best": round(r["busbw"] / best, 3) if best else None,
    }
    if topo:
        row["switches"] = sorted(
            {topo[h]["switch"] for h in r["hosts"] if h in topo and topo[h].get("switch")}
        )
    if expected:
        row["vs_expected"] = round(r["busbw"] / expected, 3)
    return row


def _slow_group_finding(
    ctx: Context,
    test: str,
    scope: str,
    rs: list[dict[str, Any]],
    slow: list[dict[str, Any]],
    topo: dict[str, dict[str, Any]],
) -> None:
    """Runs of one test well below the best: the slow group's hosts (and switches)."""
    good = [r for r in rs if r not in slow]
    hosts = sorted({h for r in slow for h in r["hosts"]})
    ok_hosts = sorted({h for r in good for h in r["hosts"]} - set(hosts))
    sw = ""
    if topo:
        s_bad = {topo[h]["switch"] for h in hosts if h in topo}
        s_ok = {topo[h]["switch"] for h in ok_hosts if h in topo}
        only = sorted(s_bad - s_ok)
        if only:
            sw = f"; slow nodes share switch(es) {', '.join(only)} that the fast ones do not use"
    good_bw = max(r["busbw"] for r in good)
    ctx.add_finding(
        phase="isolation",
        kind="nccl_tests_slow_group",
        title=f"{test} {scope.replace('_', '-')}: {', '.join(hosts[:6]) or 'some runs'} reach "
        f"{min(r['busbw'] for r in slow):.3g} GB/s busbw vs {good_bw:.3g} GB/s on the others{sw}",
        detail="Bus bandwidth that differs between node groups on the same test isolates the problem to "
        "the slow group's links, NICs or switch ports.",
        confidence=0.8,
        hosts=hosts,
        evidence_events=[r["event"] for r in slow[:3]]
        + [max(good, key=lambda r: r["busbw"])["event"]],
        category="NETWORK",
        busbw=[r["busbw"] for r in slow],
    )


def _below_expected_findings(
    ctx: Context,
    test: str,
    rs: list[dict[str, Any]],
    slow: list[dict[str, Any]],
    expected: float,
) -> None:
    low = [r for r in rs if r["busbw"] < 0.8 * expected and r not in slow]
    for r in low[:5]:
        level = "poor (< 50 %)" if r["busbw"] < 0.5 * expected else "degraded (< 80 %)"
        ctx.add_finding(
            phase="isolation",
            kind="nccl_tests_below_expected",
            title=f"{test} on {', '.join(r['hosts'][:4]) or r['event'].file}: {r['busbw']:.3g} GB/s busbw, "
            f"{r['busbw'] / expected:.0%} of the expected {expected:g} GB/s — {level}",
            confidence=0.7,
            hosts=r["hosts"],
            evidence_events=[r["event"]],
            category="NETWORK",
        )


register_analyzer(IsolationAnalyzer())
