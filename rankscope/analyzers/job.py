"""Job facts: framework, world size (and how we know it), ranks seen/missing, hosts ↔ ranks.

Also what the post-mortem's cost model reads (docs/postmortems.md), added only when
known: ``job.last_step``, the highest step any rank logged (log head/tail facts,
metrics rows), and ``job.last_checkpoint_step``, the last checkpoint saved at or before
it (checkpoint events with a step).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from .._lazy import lazy_module
from . import Context, register_analyzer
from ._rc import metrics_files

np = lazy_module("numpy")

_FRAMEWORK_PRIORITY = ["nemo", "megatron", "deepspeed", "lightning", "pytorch"]
_WORLD_PRIORITY = ["WORLD_SIZE", "world size", "Lightning MEMBER", "NCCL nranks"]
SAVED = ("checkpoint_saved", "checkpoint_save")


class JobAnalyzer:
    name = "job"
    phase = "triage"
    order = 10
    reads = ("results",)
    writes = ("doc.job", "facts.job_start", "facts.last_step", "facts.rank_host", "facts.seen")

    def run(self, ctx: Context) -> None:
        job = ctx.doc["job"]
        fws = Counter(r.facts["framework"] for r in ctx.results if r.facts.get("framework"))
        for fw in _FRAMEWORK_PRIORITY:
            if fws.get(fw):
                job["framework"] = fw
                break

        seen: set[int] = set()
        rank_host: dict[int, str] = {}
        for r in ctx.results:
            if r.error:
                continue
            seen.update(r.ranks)
            for rank, host in r.rank_hosts.items():
                rank_host.setdefault(rank, host)
        for e in ctx.events:
            if e.rank is not None and e.kind != "torchrun_failure":
                seen.add(e.rank)
            if e.kind == "torchrun_failure" and e.rank is not None and e.host:
                rank_host.setdefault(e.rank, e.host)

        world, source = self._world_size(ctx, seen)
        job["world_size"] = world
        job["world_size_source"] = source
        job["ranks_seen"] = sorted(seen)
        for r in ctx.results:
            for host, pairs in r.facts.get("nccl_init", {}).items():
                for rank, n in pairs:
                    if world and n == world:
                        rank_host.setdefault(rank, host)
        if world:
            job["ranks_missing"] = sorted(set(range(world)) - seen)
        hosts: dict[str, list[int]] = {}
        for rank, host in sorted(rank_host.items()):
            hosts.setdefault(host, []).append(rank)
        job["hosts"] = dict(sorted(hosts.items()))
        nnodes = [r.facts["nnodes"] for r in ctx.results if r.facts.get("nnodes")]
        job["nodes"] = len(hosts) or (max(nnodes) if nnodes else None)
        job["resumed_from_checkpoint"] = any(
            r.facts.get("resumed_from_checkpoint") for r in ctx.results
        )
        first = [ri.first_time for r in ctx.results for ri in r.rank_info.values() if ri.first_time]
        if ctx.year:
            first = [f"{ctx.year:04d}{t[4:]}" if t.startswith("0000-") else t for t in first]
        ctx.facts.job_start = min(first) if first else None
        steps = [
            ri.last_step
            for r in ctx.results
            for ri in r.rank_info.values()
            if ri.last_step is not None
        ]
        ctx.facts.last_step = max(steps) if steps else None
        ctx.facts.rank_host = rank_host
        ctx.facts.seen = seen
        self._progress(ctx, job)

    @staticmethod
    def _progress(ctx: Context, job: dict[str, Any]) -> None:
        """The last step (logs and metrics rows) and the last checkpoint at or before it."""
        last = ctx.facts.last_step
        for _, m in metrics_files(ctx):
            if not m.has("step"):
                continue
            steps = m.numpy("step").astype(float)
            if steps.size and not np.all(np.isnan(steps)):
                top = int(np.nanmax(steps))
                last = top if last is None else max(last, top)
        if last is not None:
            job["last_step"] = int(last)
        ckpts = [
            e.fields["step"]
            for e in ctx.kinds(*SAVED)
            if isinstance(e.fields.get("step"), int) and (last is None or e.fields["step"] <= last)
        ]
        if ckpts:
            job["last_checkpoint_step"] = max(ckpts)

    def _world_size(self, ctx: Context, seen: set[int]) -> tuple[int | None, str | None]:
        claims: dict[str, int] = {}
        for r in ctx.results:
            for value, how in r.facts.get("world_size_claims", []):
                claims[how] = max(claims.get(how, 0), int(value))
        for how in _WORLD_PRIORITY:
            if claims.get(how):
                return claims[how], how
        inits: dict[str, Any] = {}
        for r in ctx.results:
            for host, pairs in r.facts.get("nccl_init", {}).items():
                inits.setdefault(host, []).extend(pairs)
        if inits:
            n = max(p[1] for pairs in inits.values() for p in pairs)
            return n, "NCCL nranks"
        if seen:
            return max(seen) + 1, "highest rank seen + 1"
        return None, None


register_analyzer(JobAnalyzer())
