"""Retries and connection resets: noise when they recover on the first retry, a cause when exhausted.

Per (rank, reason) we look at the highest attempt number reached: ``1/N``
everywhere is a reconnect that worked (e.g. an idle keep-alive connection the
server closed); ``N/N`` or "Max retries exceeded" is exhaustion.
"""

from __future__ import annotations

from . import Context, register_analyzer


class RetryNoiseAnalyzer:
    name = "retry_noise"
    phase = "triage"
    order = 40
    reads = ("events", "results")
    writes = ("facts.retry_exhausted", "facts.retry_escalated", "facts.retry_noise", "findings")

    def run(self, ctx: Context) -> None:
        retries = ctx.by_kind.get("retry", [])
        resets = ctx.by_kind.get("connection_error", [])
        exhausted = list(ctx.by_kind.get("retry_exhausted", []))
        worst = 0
        escalated = []
        for e in retries:
            k, n = e.fields.get("attempt"), e.fields.get("max")
            if k is not None and n:
                worst = max(worst, k)
                if k >= n:
                    exhausted.append(e)
                elif k >= 2:
                    escalated.append(e)
            elif e.fields.get("remaining") is not None and e.fields["remaining"] <= 0:
                exhausted.append(e)
        total_retries = sum(r.event_counts.get("retry", 0) for r in ctx.results)
        total_resets = sum(r.event_counts.get("connection_error", 0) for r in ctx.results)
        ctx.facts.retry_exhausted = exhausted
        ctx.facts.retry_escalated = escalated
        if exhausted:
            exhausted.sort(key=lambda e: (e.time or "9999", e.file, e.line))
            reason = exhausted[0].fields.get("reason") or "a remote call"
            ctx.add_finding(
                phase="triage",
                kind="retries_exhausted",
                title=f"Retries exhausted ({reason}) on rank(s) {', '.join(str(r) for r in sorted({e.rank for e in exhausted if e.rank is not None})[:8]) or '?'}",
                detail="Retries escalated to the last attempt and gave up: this is a cause, not noise.",
                confidence=0.8,
                ranks=sorted({e.rank for e in exhausted if e.rank is not None}),
                evidence_events=exhausted[:3],
            )
        elif retries or resets:
            evs = (retries or resets)[:3]
            ranks = sorted({e.rank for e in retries + resets if e.rank is not None})
            level = "first retry" if worst <= 1 else f"at most retry {worst}"
            ctx.facts.retry_noise = True
            ctx.add_finding(
                phase="triage",
                kind="retry_noise",
                title=f"{total_retries or total_resets} retried connection error(s) recovered ({level}): noise, not a cause",
                detail=(
                    f"{total_retries} retry line(s) and {total_resets} connection reset/refused line(s) on {len(ranks)} rank(s); "
                    "none escalated to the last attempt. Typical of idle keep-alive connections closed by the server."
                ),
                confidence=0.8 if worst <= 1 else 0.6,
                ranks=ranks,
                evidence_events=evs,
                noise=True,
            )


register_analyzer(RetryNoiseAnalyzer())
