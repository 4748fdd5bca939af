"""``analyze``: parse results → the triage document (schema ``rankscope.triage/v1``).

The document's shape is declared in ``rankscope.document``; this module runs the
analyzers and adds the sections no analyzer owns (findings, artifacts, analysis).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, cast

from .analyzers import PHASES, Context, run_all
from .document import TriageDocument, empty_document
from .model import Options, ParseResult


def analyze(
    results: Sequence[ParseResult], *, options: Options | None = None, progress: Any = None
) -> TriageDocument:
    """Run every registered analyzer over the parse results of one job.

    Deterministic for the same inputs (order of ``results`` does not matter).
    Never raises because of content: an analyzer that fails is listed in
    ``doc["analysis"]["analyzers"]`` with its error.
    """
    from . import ENGINE_VERSION

    t0 = time.perf_counter()
    ordered = sorted((r for r in results if r is not None), key=lambda r: r.name)
    ctx = Context.build(ordered, options or Options())
    ctx.doc = cast(dict[str, Any], empty_document(ENGINE_VERSION))
    ran = run_all(ctx, progress)
    rank_of = {p: i for i, p in enumerate(PHASES)}
    ctx.findings.sort(key=lambda f: (rank_of.get(f["phase"], 9), -f["confidence"], f["kind"]))
    ctx.doc["findings"] = ctx.findings
    ctx.doc["artifacts"] = [
        {
            "name": r.name,
            "kind": r.kind,
            "parser": r.parser,
            "lines": r.lines,
            "bytes": r.bytes,
            "ranks": len(r.ranks),
            "error": r.error,
            "warnings": r.warnings[:10],
        }
        for r in ordered
    ]
    ctx.doc["analysis"] = {
        "analyzers": ran,
        "seconds": round(time.perf_counter() - t0, 3),
        "scanner": sorted({r.facts.get("scanner") for r in ordered if r.facts.get("scanner")}),
    }
    return cast(TriageDocument, ctx.doc)
