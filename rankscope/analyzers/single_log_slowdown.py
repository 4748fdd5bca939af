"""Slowdowns a single log shows without a step-time series: nccl-tests runs judged
against their link and their own larger sizes, NCCL falling back to TCP sockets on a
multi-node job, a running-mean throughput that falls at the end of a short excerpt, two
runs of one workload where one is slower at every step, and a slowdown nothing else
located on a GPU the job's nvidia-smi readings show hot or throttled (see
``SingleLogSlowAnalyzer``)."""

from __future__ import annotations

from typing import Any

from .._lazy import lazy_compile, lazy_module
from ..model import Event
from . import Context, register_analyzer
from ._rc import row_event
from .slowdown import _group_median

np = lazy_module("numpy")

PCIE_FLOOR_GBS = 4.0  # a quarter of PCIe Gen3 x16 (~16 GB/s per direction, PCI-SIG): the
# slowest link two GPUs of one node share; a ≥ 8 MiB all-GPU collective below it is not
# using any intra-node link at its rate (peer-to-peer off, traffic through the CPU)
PCIE_FLOOR_SIZE = 8 << 20
RUNNING_FELL = 0.01  # a printed running mean must fall by more than its rounding to count
LONG_SERIES = 12  # prints from which one slow interval at the end is not enough
MIN_COMPARED = 3  # steps two runs must share (after the first) to be compared
_VERSION = lazy_compile(r"(?<![\d.])v?(\d+(?:\.\d+)+)")


class SingleLogSlowAnalyzer:
    """A slowdown told by what one log prints once rather than by a step-time series:

    - nccl-tests: the same rank listed twice in one run (independent jobs: the binary
      built without ``MPI=1`` — SOFTWARE); an inter-node run over TCP sockets; a run
      far below its link's rate
      (``nccl_tests_below_link``, see ``links.py``) or collapsing at one size
      (``nccl_tests_size_collapse``) — NETWORK; a one-node run below ``PCIE_FLOOR_GBS``
      at ≥ 8 MiB — NETWORK (intra-node path);
    - NCCL chose TCP sockets (``Using network Socket``) on a multi-node job — the logs show
      more than one host, a file named after a node index, or IB asked for
      (``NCCL_IB_HCA``) — NETWORK, stronger when the RDMA stack is reported missing;
    - a throughput printed as a running mean (tf_cnn_benchmarks ``images/sec``) that falls
      by the end of the excerpt: the interval since an earlier print ran ``throughput_drop``
      below the mean of all the steps before it (``_running_mean``) — UNKNOWN;
    - two files of rankless iteration lines over the same steps, not at the same time: two
      runs of one workload; the one slower by ``throughput_drop`` at every shared step after
      the first is slow (``_two_runs``) — SOFTWARE when the names differ only in a version
      number, else UNKNOWN.

    Declares ``ctx.facts.metrics["slowdown"]`` (as ``SlowdownAnalyzer`` does) only when
    no step-time slowdown was found; the verdict uses it only when nothing failed."""

    name = "single_log_slowdown"
    phase = "localization"
    order = 80  # after isolation (65), which judges nccl-tests runs against their link
    reads = ("events", "findings", "facts.metrics", "facts.causes", "facts.rank_host")
    writes = ("facts.metrics", "facts.slowdown", "findings")

    def run(self, ctx: Context) -> None:
        met = ctx.facts.metrics
        if met.get("slowdown"):
            self._thermal(ctx, met["slowdown"])
            return
        from .verdict import FATAL

        failed = any(c["strength"] >= 0.5 for c in ctx.facts.causes) or any(
            ctx.by_kind.get(k) for k in (*FATAL, "watchdog_hang")
        )
        if failed:
            return  # a failure explains the job better than its transport or a benchmark
        got = (
            self._nccl_tests(ctx)
            or self._socket(ctx)
            or self._running_mean(ctx)
            or self._two_runs(ctx)
        )
        if got is not None:
            met["slowdown"] = got
            ctx.facts.slowdown = {k: v for k, v in got.items() if k != "finding"}

    def _thermal(self, ctx: Context, sd: dict[str, Any]) -> None:
        """A slowdown nothing located (UNKNOWN) while the job's nvidia-smi readings show a
        GPU hot, clock-throttled or clocked down under load (``gpu_health``, analyzer
        ``hardware``): HARDWARE, citing that reading."""
        if sd.get("category") != "UNKNOWN" or not sd.get("finding"):
            return
        hot = [
            f
            for f in ctx.findings
            if f["kind"] == "gpu_health"
            and any(w in f["title"] for w in ("temperature", "thermal", "throttled", "SM clock"))
        ]
        if not hot:
            return
        f = sd["finding"]
        sd["category"] = f["category"] = "HARDWARE"
        sd["label"] = "the GPUs slowed down (hot or clock-throttled)"
        sd["hosts"] = sorted({h for x in hot for h in x.get("hosts") or []})
        f["title"] += ": HARDWARE, " + hot[0]["title"].split(" → ")[0]
        f["evidence"] = list(f.get("evidence") or [])[:2] + list(hot[0].get("evidence") or [])[:2]
        ctx.facts.slowdown = {k: v for k, v in sd.items() if k != "finding"}

    def _declare(self, f: dict[str, Any], category: str, label: str, part: str) -> dict[str, Any]:
        return {
            "category": category,
            "part": part,
            "ranks": [],
            "hosts": [],
            "gpus": [],
            "switches": [],
            "factor": None,
            "onset_step": None,
            "onset_time": None,
            "confidence": f["confidence"],
            "label": label,
            "finding": f,
        }

    def _nccl_tests(self, ctx: Context) -> dict[str, Any] | None:
        runs = ctx.by_kind.get("nccl_test_result", [])
        for e in runs:
            dup = e.fields.get("duplicate_rank")
            if not dup:
                continue
            line = Event(
                kind="nccl_test_rank", line=dup["line"], text=dup["text"], file=e.file, host=e.host
            )
            f = ctx.add_finding(
                phase="localization",
                kind="nccl_tests_independent_jobs",
                title=f"{e.fields.get('test')}: rank {dup['rank']} is listed twice "
                f"({', '.join(dup['hosts'])}) — each process ran its own test, the numbers are not one job's",
                detail="Every process printed its own header and rank list starting at 0: nccl-tests was "
                "built without MPI support (make MPI=1) or started once per process, so each one "
                "benchmarked only its own GPUs. Rebuild with MPI=1 (MPI_HOME=…) and run it under mpirun.",
                confidence=0.75,
                hosts=dup["hosts"],
                evidence_events=[line, e],
                category="SOFTWARE",
            )
            return self._declare(f, "SOFTWARE", "nccl-tests ran as independent jobs", "comm")
        for e in runs:
            link = e.fields.get("link") or {}
            if e.fields.get("scope") != "inter_node" or link.get("net") != "socket":
                continue
            f = ctx.add_finding(
                phase="localization",
                kind="nccl_tests_socket",
                title=f"{e.fields.get('test')} across {', '.join((e.fields.get('hosts') or [])[:4])}: "
                "NCCL ran over TCP sockets, not RDMA",
                detail="A socket run measures the hosts' TCP path, a fraction of an IB/RoCE/EFA "
                "fabric's rate. Check that the RDMA stack and NCCL's net plugin load "
                "(NCCL_DEBUG=INFO should print 'NET/IB : Using …' or the OFI provider) and "
                "NCCL_IB_DISABLE / NCCL_NET.",
                confidence=0.65,
                hosts=list(e.fields.get("hosts") or []),
                evidence_events=[e],
                category="NETWORK",
            )
            return self._declare(f, "NETWORK", "nccl-tests ran over TCP sockets", "comm")
        for kind in ("nccl_tests_below_link", "nccl_tests_size_collapse"):
            f = next(
                (f for f in ctx.findings if f["kind"] == kind and f["confidence"] >= 0.7), None
            )
            if f is not None:
                label = {
                    "nccl_tests_below_link": "bus bandwidth far below the link's rate",
                    "nccl_tests_size_collapse": "bus bandwidth collapses at one message size",
                }[kind]
                return self._declare(f, f.get("category") or "NETWORK", label, "comm")
        for e in runs:
            fl = e.fields
            if fl.get("scope") != "intra_node" or fl.get("expected"):
                continue  # a known link was judged against its own rate above
            rows = [r for r in self._rows(ctx, e) if r.get("size", 0) >= PCIE_FLOOR_SIZE]
            if not rows or any(not r.get("busbw") or r["busbw"] >= PCIE_FLOOR_GBS for r in rows):
                continue
            best = max(rows, key=lambda r: r["busbw"])
            ev = Event(kind="nccl_test_row", line=best["line"], text=best["text"], file=e.file)
            f = ctx.add_finding(
                phase="localization",
                kind="nccl_tests_below_pcie",
                title=f"{fl.get('test')} within one node: {best['busbw']:.3g} GB/s busbw at "
                f"{best['size']:,} B — below a quarter of even PCIe Gen3 x16 (~16 GB/s)",
                detail="No intra-node path runs this slowly at this size: peer-to-peer between the GPUs "
                "is off or failing (ACS/IOMMU on the PCIe switch, a BIOS setting, the driver), so "
                "traffic goes through host memory. Check nvidia-smi topo -m, p2pBandwidthLatencyTest, "
                "and NCCL_P2P_LEVEL / NCCL_P2P_DISABLE.",
                confidence=0.6,
                evidence_events=[ev],
                category="NETWORK",
            )
            return self._declare(f, "NETWORK", "intra-node bus bandwidth below PCIe", "comm")
        return None

    def _rows(self, ctx: Context, e: Event) -> list[dict[str, Any]]:
        for r in ctx.results:
            if r.name != e.file:
                continue
            for run in (r.facts.get("nccl_tests") or {}).get("runs", []):
                if run.get("line") == e.line:
                    return list(run.get("rows") or [])
        return []

    def _socket(self, ctx: Context) -> dict[str, Any] | None:
        hosts = set(ctx.doc["job"].get("hosts") or {})
        for r in ctx.results:
            t = r.facts.get("nccl_transport") or {}
            net = t.get("net")
            if not net or str(net[0]).lower() != "socket":
                continue
            why = (
                f"{len(hosts)} hosts in the logs"
                if len(hosts) > 1
                else "IB was asked for (NCCL_IB_HCA)"
                if t.get("ib_hca")
                else None
            )
            if why is None:
                continue  # one node: NCCL prints its network even when no traffic leaves it
            missing = t.get("no_ib_device") or t.get("no_ibverbs")
            evs = [
                Event(kind="nccl_transport", line=v[1], text=v[2], file=r.name)
                for v in (t.get("no_ib_device") or t.get("no_ibverbs"), net)
                if v
            ]
            f = ctx.add_finding(
                phase="localization",
                kind="nccl_socket_transport",
                title="NCCL carries inter-node traffic over TCP sockets"
                + (" (no RDMA device or library found)" if missing else "")
                + f" on a multi-node job ({why})",
                detail="Sockets reach a fraction of an RDMA fabric's bandwidth and cost CPU per byte: "
                "collectives across nodes become the bottleneck and more nodes can train slower than "
                "one. Install/enable the RDMA stack (rdma-core/libibverbs, the IB or RoCE driver, "
                "nvidia-peermem) or NCCL's net plugin (EFA: aws-ofi-nccl), check NCCL_IB_HCA and "
                "NCCL_IB_DISABLE, and confirm with NCCL_DEBUG=INFO that NCCL prints 'Using network IB'.",
                confidence=0.7 if missing else 0.55,
                evidence_events=evs,
                category="NETWORK",
            )
            return self._declare(f, "NETWORK", "NCCL fell back to TCP sockets", "comm")
        return None

    def _running_mean(self, ctx: Context) -> dict[str, Any] | None:
        """A throughput printed as the mean since timing began (``IterFormat.running``,
        turned into interval rates by the iteration reader) that falls at the end of the
        excerpt: the steps since an earlier print ran ``throughput_drop`` or more below the
        mean of all the steps before it. The earlier mean is a baseline of that many steps,
        so even three prints decide; the printed mean itself must fall by more than its
        rounding (``RUNNING_FELL``), and every interval from there to the end must be slow
        (a slow interval the run recovered from is a checkpoint or an evaluation) — at
        least two of them on a series of ``LONG_SERIES`` prints or more."""
        drop = ctx.options.throughput_drop
        for r in ctx.results:
            if r.metrics is None or not r.facts.get("iteration_throughput_from_running_mean"):
                continue
            t = r.metrics.table
            if "throughput" not in t.column_names:
                continue
            steps = t.column("step").to_numpy(zero_copy_only=False).astype(float)
            rates = t.column("throughput").to_numpy(zero_copy_only=False).astype(float)
            per = _group_median(steps, np.where(rates > 0, rates, np.nan))
            if len(per) < 3:
                continue
            ks = np.array(sorted(per), dtype=float)
            rate = np.array([per[int(k)] for k in ks])
            # the running mean at each print, rebuilt from the interval rates
            spent = np.cumsum(np.diff(np.concatenate(([0.0], ks))) / rate)
            mean = ks / spent
            slow = [
                i
                for i in range(1, ks.size)
                if ks[i - 1] >= ks[i] - ks[i - 1]
                and rate[i] <= (1 - drop) * mean[i - 1]
                and mean[i] <= (1 - RUNNING_FELL) * mean[i - 1]
            ]
            if not slow or any(j not in slow for j in range(slow[0], ks.size)):
                continue
            if ks.size >= LONG_SERIES and ks.size - slow[0] < 2:
                continue  # a long run slow only at its last print: its end, not a trend
            i = slow[0]
            return self._declare_running(ctx, r, ks, rate, mean, i, steps)
        return None

    def _declare_running(
        self,
        ctx: Context,
        r: Any,
        ks: np.ndarray,
        rate: np.ndarray,
        mean: np.ndarray,
        i: int,
        steps: np.ndarray,
    ) -> dict[str, Any]:
        unit = r.facts.get("iteration_throughput_unit") or "/s"
        factor = float(mean[i - 1] / rate[i])
        at = [int(np.flatnonzero(steps == ks[i])[0]), int(np.flatnonzero(steps == ks[i - 1])[0])]
        evs = [row_event(r.name, r.metrics, j, "metrics_row", ["throughput"]) for j in at]
        f = ctx.add_finding(
            phase="localization",
            kind="running_mean_drop",
            title=f"{r.name}: the mean {unit} since timing began fell from {mean[i - 1]:.4g} "
            f"to {mean[i]:.4g} by step {int(ks[i])} — the steps since step {int(ks[i - 1])} "
            f"ran at ~{rate[i]:.3g} {unit}, {factor:.1f}x slower than the {int(ks[i - 1])} before",
            detail="The program prints a running mean, which hides a drop behind every step "
            "averaged before it; the rate over the last interval shows it. All ranks slowing "
            "together points at something they share (input pipeline or shared storage, the "
            "network, the host); check GPU utilisation and I/O wait over that interval.",
            confidence=0.55,
            evidence_events=evs,
            category="UNKNOWN",
        )
        got = self._declare(f, "UNKNOWN", "throughput fell (the running mean dropped)", "step")
        got.update(factor=factor, onset_step=int(ks[i]))
        return got

    def _two_runs(self, ctx: Context) -> dict[str, Any] | None:
        """Two files of iteration lines that carry no rank and log the same steps are two
        runs of one workload (ranks of one synchronous job wait for each other and log the
        same step time): the slower one by ``throughput_drop`` or more, at every step they
        share after the first (warm-up), is a slowdown of that run. When the file names
        differ only in a version number, that version is what differs: SOFTWARE."""
        runs = {}
        for r in ctx.results:
            m = r.metrics
            if m is None or r.facts.get("metrics_source") != "iteration lines":
                continue
            t = m.table
            if "rank" in t.column_names and t.column("rank").null_count < t.num_rows:
                continue
            col = next((c for c in ("step_time", "throughput") if c in t.column_names), None)
            if col is None:
                continue
            steps = t.column("step").to_numpy(zero_copy_only=False).astype(float)
            v = t.column(col).to_numpy(zero_copy_only=False).astype(float)
            per = _group_median(steps, np.where(v > 0, v, np.nan))
            if per:
                runs[r.name] = (
                    r,
                    col,
                    {k: (x if col == "step_time" else 1 / x) for k, x in per.items()},
                )
        if len(runs) < 2 or len({c for _, c, _ in runs.values()}) > 1:
            return None
        common = sorted(set.intersection(*(set(p) for _, _, p in runs.values())))[1:]
        if (
            len(common) < MIN_COMPARED
            or len(common) < 0.5 * min(len(p) for _, _, p in runs.values()) - 1
        ):
            return None
        level = {n: float(np.median([p[k] for k in common])) for n, (_, _, p) in runs.items()}
        fast, slow = min(level, key=level.get), max(level, key=level.get)
        pf, ps = runs[fast][2], runs[slow][2]
        if level[slow] < (1 + ctx.options.throughput_drop) * level[fast]:
            return None
        if min(ps[k] for k in common) <= max(pf[k] for k in common):
            return None  # not slower at every step: noise, not a second run's pace
        return self._declare_two_runs(ctx, runs, fast, slow, level, common)

    def _declare_two_runs(
        self,
        ctx: Context,
        runs: dict[str, Any],
        fast: str,
        slow: str,
        level: dict[str, float],
        common: list[int],
    ) -> dict[str, Any] | None:
        spans = [_time_span(runs[n][0].metrics.table) for n in (fast, slow)]
        if spans[0] and spans[1] and spans[0][0] <= spans[1][1] and spans[1][0] <= spans[0][1]:
            return None  # the two files ran at the same time: one job's processes
        factor = level[slow] / level[fast]
        evs = []
        for n in (slow, fast):
            r, col, _ = runs[n]
            steps = r.metrics.table.column("step").to_numpy(zero_copy_only=False)
            evs.append(
                row_event(
                    n, r.metrics, int(np.flatnonzero(steps == common[0])[0]), "metrics_row", [col]
                )
            )
        versions = _version_change(fast, slow)
        what = "step time" if runs[slow][1] == "step_time" else "throughput"
        f = ctx.add_finding(
            phase="localization",
            kind="slower_run",
            title=f"{slow} runs the same steps as {fast} {factor:.2f}x slower "
            f"(median {what} over {len(common)} shared steps"
            + (
                f"; the names differ only in a version, {versions[0]} → {versions[1]})"
                if versions
                else ")"
            ),
            detail="Both files log the same step numbers and no rank: two runs of one workload. "
            "The slower one is slower at every step both logged after the first, so the "
            "difference is the run's own pace, not noise. Compare what differs between the two "
            "runs: framework, CUDA and driver versions, settings (precision, parallelism, batch "
            "size, data workers) and the machine."
            + (
                " Only a version differs in their names: a performance regression in that "
                "release is the first suspect — confirm by rerunning both versions on the same "
                "machine, then bisect between them."
                if versions
                else ""
            ),
            confidence=0.5 if versions else 0.45,
            evidence_events=evs,
            category="SOFTWARE" if versions else "UNKNOWN",
        )
        cat = "SOFTWARE" if versions else "UNKNOWN"
        got = self._declare(f, cat, "the same workload ran slower in one of two runs", "step")
        got.update(factor=factor, onset_step=common[0])
        return got


def _time_span(t: Any) -> tuple[str, str] | None:
    if "time" not in t.column_names:
        return None
    times = sorted(x for x in t.column("time").to_pylist() if x)
    return (times[0], times[-1]) if times else None


def _version_change(a: str, b: str) -> tuple[str, str] | None:
    """(version in ``a``, version in ``b``) when the two file names are the same but for
    one version number (``train_torch2.1.log`` / ``train_torch2.2.log``), else None."""
    va, vb = _VERSION.findall(a), _VERSION.findall(b)
    if len(va) != 1 or len(vb) != 1 or va == vb:
        return None
    if _VERSION.sub("#", a) != _VERSION.sub("#", b):
        return None
    return va[0], vb[0]


register_analyzer(SingleLogSlowAnalyzer())
