"""Proposals for resolution (order 99): hypotheses with concrete tests, a Five Whys draft,
immediate and structural fixes, prevention checklist items.

People accept, edit or reject them (the investigation pages); nothing here is a
conclusion. Shape: ``doc["proposals"]`` as in the contracts ("the triage
document: proposals"). Ids are stable slugs so re-running the analysis on the
same input proposes the same ids.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..document import read_document
from . import Context, register_analyzer

FIXES: dict[str, list[tuple[str, str, str]]] = {
    "OOM": [
        (
            "immediate",
            "Halve the micro-batch (keep the global batch with gradient accumulation)",
            "Restart from the last checkpoint with micro_batch_size // 2 and accumulation x 2.",
        ),
        (
            "immediate",
            "Enable activation checkpointing",
            "Recompute activations in backward on the stages that ran out of memory.",
        ),
        (
            "structural",
            "Shard optimizer state and gradients (ZeRO-2/3, FSDP)",
            "Moves the per-GPU memory budget below capacity at this scale.",
        ),
        (
            "structural",
            "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
            "Cuts fragmentation when reserved - allocated grows.",
        ),
    ],
    "NETWORK": [
        (
            "immediate",
            "Exclude the slow/failed nodes and restart from the last checkpoint",
            "sbatch --exclude=<nodes>; run nccl-tests on them before they return.",
        ),
        (
            "structural",
            "Have the network team inspect the links/switch ports of the affected group",
            "CRC errors, link flaps, transceivers on the common switch.",
        ),
        (
            "structural",
            "Add nccl-tests to periodic node health checks",
            "Alert when busbw drops > 20 % from the fabric baseline.",
        ),
    ],
    "HARDWARE": [
        (
            "immediate",
            "Drain the node and restart without it",
            'scontrol update nodename=<node> state=drain reason="Xid/ECC"; restart from the last checkpoint.',
        ),
        (
            "structural",
            "Run GPU diagnostics and replace failing parts",
            "dcgmi diag -r 3; RMA the GPU on uncorrectable ECC / row-remap failure.",
        ),
        (
            "structural",
            "Prolog/epilog GPU health checks",
            "Check ECC, remapped rows and Xids before a job lands on a node.",
        ),
    ],
    "NUMERICAL": [
        (
            "immediate",
            "Restart from the last clean checkpoint with a lower learning rate",
            "Before the grad-norm spike; e.g. LR x 0.5, and skip the spike step's batch.",
        ),
        ("immediate", "Tighten gradient clipping", "clip_grad_norm_(…, 1.0)."),
        (
            "structural",
            "Alert on grad-norm spikes and loss jumps",
            "Catch divergence before it reaches NaN; keep checkpoints frequent enough to roll back.",
        ),
    ],
    "DATA": [
        (
            "immediate",
            "Restart from the last checkpoint; inspect the stalled rank's shard",
            "Check the files/objects that rank was reading.",
        ),
        (
            "structural",
            "Put a timeout on every data read",
            "An HTTP/object-store read without timeout blocks a rank forever; retry or skip the sample instead.",
        ),
        (
            "structural",
            "Log per-rank data-loading time per step",
            "A stalling rank becomes visible long before the NCCL timeout.",
        ),
    ],
    "STORAGE_IO": [
        (
            "immediate",
            "Relieve the storage targets and restart from the last checkpoint",
            "Free disk/memory on the targets under pressure; restart any daemon that restarted mid-run.",
        ),
        (
            "structural",
            "Make the client retry with backoff and a bounded number of attempts per batch",
            "And raise a clear error naming the missing objects.",
        ),
        (
            "structural",
            "Alert on storage error counters (err.get.n, batch errors) per target",
            "Target-side spikes precede client failures.",
        ),
    ],
    "SOFTWARE": [
        (
            "immediate",
            "Fix the failing code path on the named rank and rerun",
            "Read the first traceback; with TORCH_DISTRIBUTED_DEBUG=DETAIL for collective mismatches.",
        ),
        (
            "structural",
            "Smoke-test multi-node after code changes",
            "A short run at 2 nodes catches rank-dependent branches.",
        ),
    ],
    "INFRA": [
        (
            "immediate",
            "Resubmit from the last checkpoint",
            "With a longer time limit if the job hit it.",
        ),
        (
            "structural",
            "Checkpoint on SIGTERM and before the time limit",
            "Use job dependencies for long runs.",
        ),
    ],
    "UNKNOWN": [
        (
            "immediate",
            "Rerun with more visibility",
            "TORCH_NCCL_TRACE_BUFFER_SIZE=2000, NCCL_DEBUG=INFO, py-spy dump of stuck ranks.",
        ),
    ],
}
PREVENTION: dict[str, list[str]] = {
    "pre_training": [
        "Calculate the memory budget (params + grads + optimizer + activations) against GPU capacity",
        "Test at small scale first, then at 2 nodes, before the full run",
        "Verify data loading does not bottleneck (per-rank load time per step)",
        "Check network bandwidth between nodes with nccl-tests against the fabric's expected busbw",
        "Ensure checkpoint save and restore work before the long run",
        "Set an appropriate NCCL timeout and enable the flight recorder (TORCH_NCCL_TRACE_BUFFER_SIZE)",
        "Put timeouts on data/storage reads",
    ],
    "scaling_up": [
        "Adjust the learning rate and warm-up for the new batch size",
        "Monitor for stragglers at the new scale (per-rank step time)",
        "Profile communication overhead; check which collectives became inter-node",
        "Reproduce at the previous scale first; bisect the scale if it breaks",
    ],
    "long_runs": [
        "Enable automatic checkpointing frequent enough to lose < 1 h",
        "Set up monitoring and alerting on loss, grad norm, memory, step time and busbw",
        "Configure automatic restart from the last checkpoint, excluding failed nodes",
        "Plan checkpoint storage capacity",
        "Watch storage-side error counters and daemon restarts",
    ],
}
# which checklist items matter most per category (indexes into PREVENTION lists)
FOCUS = {
    "OOM": [("pre_training", 0), ("long_runs", 1)],
    "NETWORK": [("pre_training", 3), ("scaling_up", 2), ("long_runs", 1)],
    "HARDWARE": [("long_runs", 2), ("pre_training", 1)],
    "NUMERICAL": [("scaling_up", 0), ("long_runs", 1), ("long_runs", 0)],
    "DATA": [("pre_training", 2), ("pre_training", 6)],
    "STORAGE_IO": [("pre_training", 6), ("long_runs", 4)],
    "SOFTWARE": [("pre_training", 1), ("scaling_up", 3)],
    "INFRA": [("long_runs", 0), ("long_runs", 2)],
    "UNKNOWN": [("pre_training", 5)],
}


def _slug(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")[:48]


def _short_event(event: str, limit: int = 70) -> str:
    """A chain event as the subject of the next Why: no trailing "(started …)" aside, no
    trailing punctuation, cut at a word boundary (never inside a timestamp)."""
    text = re.sub(r"\s*\((?:started|at|since|from)\b[^)]*\)?\s*$", "", str(event)).strip()
    text = text.rstrip(" .:;?")
    if len(text) > limit:
        cut = text[:limit].rsplit(" ", 1)[0]
        if cut.count("(") > cut.count(")"):  # never leave an aside open
            cut = cut[: cut.rfind("(")]
        text = cut.rstrip(" ,.:;(=") + "…"
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


def _refs(findings: list[dict[str, Any]], n: int = 3) -> list[dict[str, Any]]:
    out = []
    for f in findings:
        for ev in f["evidence"][:1]:
            if ev not in out:
                out.append(ev)
        if len(out) >= n:
            break
    return out


@dataclass
class _Seen:
    """What the hypotheses are drawn from: the verdict's category and culprits, the findings
    by category and kind, the slow and healthy hosts, the stragglers, the chain's trigger."""

    ctx: Context
    cat: str
    hosts: list[str]
    ranks: list[int]
    by_cat: dict[str, list[dict[str, Any]]]
    kinds: dict[str, dict[str, Any]]
    slow_hosts: list[str]
    control: list[str]
    stragglers: list[int]
    chain_refs: list[dict[str, Any]]

    @classmethod
    def of(cls, ctx: Context, cat: str) -> _Seen:
        doc = read_document(ctx.doc)
        loc, job = doc.localization, doc.job
        hosts = list(loc.get("culprit_hosts") or [])
        by_cat: dict[str, list[dict[str, Any]]] = {}
        for f in ctx.findings:
            c = f.get("category")
            if c:
                by_cat.setdefault(c, []).append(f)
        slow_hosts = sorted(
            {
                h
                for f in ctx.findings
                if f["kind"].startswith(("isolated_comm", "nccl_tests_slow", "slow_network"))
                for h in f["hosts"]
            }
        )
        all_hosts = sorted(job.get("hosts") or {})
        return cls(
            ctx=ctx,
            cat=cat,
            hosts=hosts,
            ranks=list(loc.get("culprit_ranks") or []),
            by_cat=by_cat,
            kinds={f["kind"]: f for f in ctx.findings},
            slow_hosts=slow_hosts,
            control=[h for h in all_hosts if h not in set(slow_hosts) | set(hosts)][:2],
            stragglers=list(loc.get("straggler_ranks") or []),
            chain_refs=[
                step["evidence"][0]
                for step in (doc.root_cause.get("chain") or [])[:1]
                if step.get("evidence")
            ],
        )

    @property
    def findings(self) -> list[dict[str, Any]]:
        return self.ctx.findings


def _hypothesis(
    category: str,
    title: str,
    description: str,
    expected: str,
    test: str,
    conf: float,
    supporting: list[dict[str, Any]],
    refuting: list[dict[str, Any]],
) -> dict[str, Any]:
    return {
        "id": f"hyp-{_slug(category)}-{_slug(title)[:40]}",
        "title": title,
        "description": description,
        "expected_if_true": expected,
        "test": test,
        "category": category,
        "confidence": round(conf, 2),
        "supporting": supporting[:5],
        "refuting": refuting[:5],
    }


def _network(s: _Seen) -> dict[str, Any] | None:
    if not (s.cat == "NETWORK" or s.slow_hosts or "nccl_tests_slow_group" in s.kinds):
        return None
    nodes = ",".join((s.slow_hosts or s.hosts)[:4]) or "<suspect nodes>"
    ctrl = ",".join(s.control) or "<healthy nodes>"
    refute = (
        _refs([f for f in s.findings if f["kind"] in ("straggler_rank", "nccl_straggler")])
        if s.stragglers
        else []
    )
    return _hypothesis(
        "NETWORK",
        f"Degraded inter-node links on {nodes}",
        "Communication on these nodes is slower (or fails) while compute is equal: a link, NIC or switch port problem.",
        "nccl-tests busbw across these nodes well below the control group and the fabric's expected bandwidth; intra-node busbw normal.",
        f"srun -w {nodes} --ntasks-per-node=8 ./build/all_reduce_perf -b 1G -e 1G -f 2 -g 1 ; compare with the same on {ctrl}; "
        "then ibdiagnet / perfquery on their ports",
        0.75 if s.slow_hosts else 0.5,
        _refs(s.by_cat.get("NETWORK", [])) or s.chain_refs,
        refute,
    )


def _hardware(s: _Seen) -> dict[str, Any] | None:
    if not (s.cat == "HARDWARE" or s.by_cat.get("HARDWARE")):
        return None
    hw = sorted({h for f in s.by_cat.get("HARDWARE", []) for h in f["hosts"]}) or s.hosts
    node = ",".join(hw[:3]) or "<node>"
    return _hypothesis(
        "HARDWARE",
        f"Faulty GPU on {node}",
        "A GPU (memory, NVLink, bus) on this node fails; the other ranks only echo it.",
        "GPU diagnostics fail on this node; the job runs when the node is excluded.",
        f"dcgmi diag -r 3 on {node}; rerun with sbatch --exclude={node}",
        0.8 if s.by_cat.get("HARDWARE") else 0.5,
        _refs(s.by_cat.get("HARDWARE", [])) or s.chain_refs,
        [],
    )


def _oom(s: _Seen) -> dict[str, Any] | None:
    if not (
        s.cat == "OOM"
        or any(f["kind"].startswith("memory_") for f in s.findings)
        or s.ctx.by_kind.get("cuda_oom")
    ):
        return None
    mem = [
        f
        for f in s.findings
        if f.get("category") == "OOM"
        or f["kind"] in ("cuda_oom", "memory_staircase", "memory_slope")
    ]
    leak = any(f["kind"] == "memory_staircase" for f in s.findings)
    return _hypothesis(
        "OOM",
        "Per-GPU memory exceeds capacity"
        + (" because of a leak" if leak else " at this micro-batch"),
        "Memory on the failing rank(s) reaches the GPU's capacity"
        + (" stepwise (a leak)" if leak else "")
        + ".",
        "Halving the micro-batch (or fixing the leak) removes the OOM; peak memory scales with the micro-batch.",
        "Rerun from the last checkpoint with micro_batch_size halved (gradient accumulation x 2); record torch.cuda.max_memory_allocated per step",
        0.8 if s.cat == "OOM" else 0.5,
        _refs(mem) or s.chain_refs,
        [],
    )


def _data(s: _Seen) -> dict[str, Any] | None:
    if not (s.cat == "DATA" or s.stragglers):
        return None
    r = ",".join(map(str, (s.stragglers or s.ranks)[:3])) or "<rank>"
    return _hypothesis(
        "DATA",
        f"Rank {r} stalled in data loading",
        "One rank stopped in its data pipeline (a read without timeout) and never joined the collective.",
        "That rank's flight-recorder state shows last enqueued = last completed; its last lines are data/storage reads; a py-spy dump shows it in the loader.",
        f"Replay rank {r}'s shard alone with a read timeout and timing per sample; next run: py-spy dump the rank that stops advancing",
        0.75 if s.cat == "DATA" else 0.5,
        _refs(s.by_cat.get("DATA", [])) or s.chain_refs,
        _refs([f for f in s.findings if f.get("category") == "NETWORK"]),
    )


def _storage(s: _Seen) -> dict[str, Any] | None:
    if not (s.cat == "STORAGE_IO" or s.by_cat.get("STORAGE_IO") or s.ctx.doc.get("storage")):
        return None
    st = [
        f
        for f in s.findings
        if f["kind"].startswith("storage") or f.get("category") == "STORAGE_IO"
    ]
    return _hypothesis(
        "STORAGE_IO",
        "Storage targets under pressure lost objects of batch GETs",
        "Target-side resource pressure broke inter-target streams; batches came back short and the client loader failed.",
        "Target error counters (err.get.n, batch errors) jump in the failure window; pressure/broken-pipe lines precede the client errors.",
        "Compare target stats before/after the window; rerun the loader against the same shards with the pressured targets relieved (or excluded)",
        0.8 if s.cat == "STORAGE_IO" else 0.45,
        _refs(st) or s.chain_refs,
        _refs([f for f in s.findings if f["kind"] == "retry_noise"]),
    )


def _numerical(s: _Seen) -> dict[str, Any] | None:
    if not (s.cat == "NUMERICAL" or s.by_cat.get("NUMERICAL")):
        return None
    num = s.by_cat.get("NUMERICAL", [])
    step = next(
        (f.get("first_nonfinite_step") for f in num if f.get("first_nonfinite_step") is not None),
        None,
    )
    return _hypothesis(
        "NUMERICAL",
        "Learning rate too high for this batch / a bad batch"
        + (f" near step {step}" if step else ""),
        "The update blew up: a grad-norm spike, then NaN/Inf.",
        "Restarting from the last clean checkpoint with a lower LR (or skipping that batch) passes the step.",
        "Restart from the last checkpoint before the spike with LR x 0.5; then, separately, with the original LR but the spike step's batch skipped",
        0.75 if s.cat == "NUMERICAL" else 0.45,
        _refs(num) or s.chain_refs,
        [],
    )


def _software(s: _Seen) -> dict[str, Any] | None:
    if s.cat != "SOFTWARE":
        return None
    return _hypothesis(
        "SOFTWARE",
        "A code path differs between ranks or fails on one rank",
        "The first exception names the failing code.",
        "The same traceback reproduces at small scale.",
        "Rerun at 2 nodes with TORCH_DISTRIBUTED_DEBUG=DETAIL and the same config",
        0.6,
        s.chain_refs,
        [],
    )


def _infra(s: _Seen) -> dict[str, Any] | None:
    if s.cat != "INFRA":
        return None
    return _hypothesis(
        "INFRA",
        "The scheduler or a node ended the job",
        "Not a training failure.",
        "SLURM records show the cancel/node failure.",
        "sacct -j <job> --format=JobID,State,ExitCode,NodeList; scontrol show node <node>",
        0.7,
        s.chain_refs,
        [],
    )


# One rule per category, each proposing its hypothesis when the evidence points there;
# the verdict's own category is sorted first.
HYPOTHESES = (_network, _hardware, _oom, _data, _storage, _numerical, _software, _infra)


class ProposalsAnalyzer:
    name = "proposals"
    phase = "resolution"
    order = 99
    reads = (
        "findings",
        "doc.triage",
        "doc.root_cause",
        "doc.localization",
        "doc.job",
        "doc.storage",
    )
    writes = ("doc.proposals",)

    def run(self, ctx: Context) -> None:
        doc = ctx.doc
        rc = doc.get("root_cause", {})
        cat = rc.get("category") or "UNKNOWN"
        if doc.get("triage", {}).get("shape", "none") == "none":
            return  # nothing failed (retry noise, a healthy run): nothing to resolve
        hyps = self._hypotheses(ctx, cat)
        whys = self._five_whys(ctx, cat)
        fixes = [
            {
                "id": f"fix-{_slug(cat)}-{_slug(t)}",
                "kind": k,
                "title": t,
                "detail": d,
                "category": cat,
            }
            for k, t, d in FIXES.get(cat, FIXES["UNKNOWN"])
        ]
        seen_cats = {cat}
        for h in hyps[1:3]:
            if h["category"] not in seen_cats and h["confidence"] >= 0.5:
                seen_cats.add(h["category"])
                k, t, d = FIXES.get(h["category"], FIXES["UNKNOWN"])[0]
                fixes.append(
                    {
                        "id": f"fix-{_slug(h['category'])}-{_slug(t)}",
                        "kind": k,
                        "title": t,
                        "detail": d,
                        "category": h["category"],
                    }
                )
        prevention = []
        focus = FOCUS.get(cat, FOCUS["UNKNOWN"])
        for checklist, i in focus:
            text = PREVENTION[checklist][i]
            prevention.append(
                {"id": f"prev-{checklist}-{_slug(text)[:32]}", "checklist": checklist, "text": text}
            )
        for checklist, items in PREVENTION.items():
            for text in items:
                pid = f"prev-{checklist}-{_slug(text)[:32]}"
                if all(p["id"] != pid for p in prevention):
                    prevention.append({"id": pid, "checklist": checklist, "text": text})
        doc["proposals"] = {
            "hypotheses": hyps,
            "five_whys": whys,
            "fixes": fixes,
            "prevention": prevention,
        }

    # -- hypotheses ----------------------------------------------------------
    def _hypotheses(self, ctx: Context, cat: str) -> list[dict[str, Any]]:
        seen = _Seen.of(ctx, cat)
        out = [h for rule in HYPOTHESES if (h := rule(seen)) is not None]
        if not out:
            out.append(
                _hypothesis(
                    cat,
                    "Cause not visible in these logs",
                    "No recognised trigger.",
                    "More instrumentation shows the first failing rank.",
                    "Rerun with NCCL_DEBUG=INFO, TORCH_NCCL_TRACE_BUFFER_SIZE=2000 and py-spy dumps on hang",
                    0.3,
                    _refs(ctx.findings),
                    [],
                )
            )
        repeat = [f for f in ctx.findings if f["kind"] == "repeat_offender"]
        for h in out:
            if h["category"] == "HARDWARE" and repeat:
                h["supporting"] = (h["supporting"] + _refs(repeat))[:5]
        out.sort(key=lambda h: (h["category"] != cat, -h["confidence"]))
        return out

    # -- five whys -------------------------------------------------------------
    def _five_whys(self, ctx: Context, cat: str) -> list[dict[str, Any]]:
        chain = list(ctx.doc.get("root_cause", {}).get("chain") or [])
        if not chain:
            return []
        steps = list(reversed(chain))  # from the crash back to the trigger
        levels = []
        question = "Why did the job fail?"
        for s in steps:
            levels.append(
                {"why": question, "answer": s["event"], "evidence": s.get("evidence", [])[:3]}
            )
            question = f"Why did that happen: {_short_event(s['event'])}?"
        trigger_ev = chain[0].get("evidence", [])[:1]
        deeper = {
            "DATA": "Data reads have no timeout, so one slow read blocks the rank until the NCCL watchdog kills the job.",
            "STORAGE_IO": "The storage targets ran out of headroom (disk/memory) and nothing alerted before clients failed.",
            "OOM": "The memory budget was not checked against capacity for this configuration (or memory leaks over steps).",
            "NUMERICAL": "No guard (grad-norm alert, LR scaled to the batch) stopped the divergence before NaN.",
            "HARDWARE": "Node health is not checked before jobs land on it; a failing GPU stayed in the pool.",
            "NETWORK": "Fabric bandwidth is not monitored; a degraded link stayed in service.",
            "INFRA": "The job does not checkpoint before the scheduler ends it.",
            "SOFTWARE": "The code change was not tested at multi-node scale before the run.",
        }.get(cat)
        if deeper and len(levels) < 6:
            levels.append(
                {
                    "why": question,
                    "answer": deeper + " (draft: confirm or edit)",
                    "evidence": trigger_ev,
                }
            )
        factors = []
        for f in ctx.findings:
            if f["kind"] in (
                "storage_retry_escalation",
                "repeat_offender",
                "storage_restart",
                "precursor_correlation",
                "periodic_failures",
                "clock_offset",
                "step_time_regression",
            ):
                factors.append(f["title"])
        return [
            {
                "id": f"why-{_slug(cat)}-{_slug(chain[0]['event'])[:32]}",
                "title": f"Five Whys: {_short_event(chain[-1]['event'])}",
                "levels": levels[:7],
                "contributing_factors": factors[:8],
            }
        ]


register_analyzer(ProposalsAnalyzer())
