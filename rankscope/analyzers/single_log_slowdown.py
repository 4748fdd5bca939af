"""Slowdowns a single log shows without a step-time series: nccl-tests runs judged
against their link and their own larger sizes, NCCL falling back to TCP sockets on a
multi-node job, and a slowdown nothing else located on a GPU the job's nvidia-smi
readings show hot or throttled (see ``SingleLogSlowAnalyzer``)."""

from __future__ import annotations

from typing import Any

from ..model import Event
from . import Context, register_analyzer

PCIE_FLOOR_GBS = 4.0  # a quarter of PCIe Gen3 x16 (~16 GB/s per direction, PCI-SIG): the
# slowest link two GPUs of one node share; a ≥ 8 MiB all-GPU collective below it is not
# using any intra-node link at its rate (peer-to-peer off, traffic through the CPU)
PCIE_FLOOR_SIZE = 8 << 20


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
      (``NCCL_IB_HCA``) — NETWORK, stronger when the RDMA stack is reported missing.

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
        got = self._nccl_tests(ctx) or self._socket(ctx)
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


register_analyzer(SingleLogSlowAnalyzer())
