"""The ``localization`` section of the document, assembled from the analyzers' facts.

Runs after the verdict (order 91) and is the section's only writer. Who contributes
what (``rankscope.model.Facts``):

- ``nccl`` (20) and ``flight_recorder`` (32): the per-rank NCCL rows and their groups,
  initiator / notified / straggler ranks, which ranks a dump signal named;
- ``failures`` (30): each rank's first error and the job's first failure;
- ``flight_recorder`` (32): the cross-rank comparison of the dumps;
- ``odd_one_out`` (34): the strict minority that differs;
- ``torchrun`` (35): every agent's failure summary;
- ``metrics`` (50) and ``slowdown`` (52): ranks slow in the metrics (added to the
  stragglers), straggler scores, the slowdown's onset and part;
- ``verdict`` (90): culprit ranks and hosts.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from . import Context, register_analyzer


def _public(row: dict[str, Any]) -> dict[str, Any]:
    """A row without the analyzer's private keys (``_ev``…)."""
    return {k: v for k, v in row.items() if not k.startswith("_")}


class LocalizationAnalyzer:
    name = "localization"
    phase = "localization"
    order = 91
    reads = (
        "facts.nccl",
        "facts.first_error_by_rank",
        "facts.first_failure",
        "facts.flight_recorder",
        "facts.odd_one_out",
        "facts.torchrun_failures",
        "facts.metric_stragglers",
        "facts.straggler_scores",
        "facts.straggler_score_source",
        "facts.slowdown",
        "facts.culprit_ranks",
        "facts.culprit_hosts",
    )
    writes = ("doc.localization",)

    def run(self, ctx: Context) -> None:
        f = ctx.facts
        nccl = f.nccl
        stragglers: list[int] = list(nccl.get("stragglers") or [])
        if f.metric_stragglers:
            stragglers = sorted(set(stragglers) | f.metric_stragglers)
        loc: dict[str, Any] = {
            "culprit_ranks": sorted(set(f.culprit_ranks)),
            "culprit_hosts": sorted(set(f.culprit_hosts)),
            "initiator_ranks": sorted(nccl.get("initiators") or nccl.get("own") or ()),
            "notified_ranks": sorted(nccl.get("notified") or ()),
            "straggler_ranks": stragglers,
            "nccl": [_public(r) for r in nccl.get("rows") or []][: ctx.options.max_nccl_rows],
        }
        if nccl:
            loc["first_initiator"] = nccl.get("first_initiator")
        if "groups" in nccl:
            loc["nccl_groups"] = nccl["groups"]
        notified_from = nccl.get("notified_from")
        if notified_from:
            named = Counter(v for v in notified_from.values() if v is not None and v >= 0)
            loc["dump_signal_from"] = [{"rank": r, "notified": n} for r, n in named.most_common(10)]
        if f.first_error_by_rank is not None:
            loc["first_error_by_rank"] = f.first_error_by_rank
        if f.first_failure is not None:
            loc["first_failure"] = f.first_failure
        if f.flight_recorder is not None:
            loc["flight_recorder"] = f.flight_recorder
        if f.odd_one_out:
            loc["odd_one_out"] = [_public(o) for o in f.odd_one_out]
        if f.torchrun_failures is not None:
            loc["torchrun_failures"] = f.torchrun_failures
        if f.straggler_scores is not None:
            loc["straggler_scores"] = f.straggler_scores
            loc["straggler_score_source"] = f.straggler_score_source
        if f.slowdown is not None:
            loc["slowdown"] = f.slowdown
        ctx.doc["localization"] = loc


register_analyzer(LocalizationAnalyzer())
