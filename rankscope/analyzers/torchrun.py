"""torchrun / elastic ChildFailedError summaries from several nodes, compared by time.

Each agent prints its own "Root Cause (first observed failure)"; the job's first
failure is the earliest ``time`` across all of them. For a signal death without
an error file that time is when the agent noticed, not when the rank died.
"""

from __future__ import annotations

from . import Context, register_analyzer

SIGNALS = {-9: "SIGKILL", -6: "SIGABRT", -11: "SIGSEGV", -15: "SIGTERM", -7: "SIGBUS"}


class TorchrunAnalyzer:
    name = "torchrun"
    phase = "localization"
    order = 35
    reads = ("events",)
    writes = ("facts.torchrun_first", "facts.torchrun_failures", "findings")

    def run(self, ctx: Context) -> None:
        failures = [e for e in ctx.by_kind.get("torchrun_failure", [])]
        if not failures:
            return
        roots = [e for e in failures if e.fields.get("root_cause")]
        # times have whole seconds: on a tie the agent's own "Root Cause" entry wins over the
        # "Failures:" list printed above it
        earliest = min(
            (e for e in failures if e.time),
            key=lambda e: (e.time, not e.fields.get("root_cause"), e.file, e.line),
            default=None,
        )
        if earliest is not None:
            first = earliest
        else:
            first = roots[0] if roots else failures[0]
        code = first.fields.get("exitcode")
        sig = SIGNALS.get(code) if isinstance(code, int) else None
        files = {e.file for e in failures}
        ctx.facts.torchrun_first = first
        summary = [
            {
                "rank": e.rank,
                "host": e.host,
                "time": e.time,
                "exitcode": e.fields.get("exitcode"),
                "root_cause": bool(e.fields.get("root_cause")),
                "file": e.file,
                "line": e.line,
            }
            for e in sorted(
                failures, key=lambda e: (e.time or "9999", e.rank if e.rank is not None else -1)
            )
        ][:256]
        ctx.facts.torchrun_failures = summary
        note = ""
        if sig == "SIGKILL":
            note = " Exit by SIGKILL is usually the kernel OOM killer or the scheduler."
        elif sig == "SIGABRT":
            note = " SIGABRT follows a watchdog abort or a C++ terminate."
        ctx.add_finding(
            phase="localization",
            kind="torchrun_first_failure",
            title=(
                f"First failure reported by torchrun: rank {first.rank} on {first.host or '?'}"
                f" at {first.time or 'unknown time'}, exit code {code}"
                + (f" ({sig})" if sig else "")
            ),
            detail=(
                f"{len(failures)} failed worker(s) in {len(files)} summary file(s); {len(roots)} agent(s) named a root cause; "
                "the earliest time across agents is taken." + note
            ),
            confidence=0.7,
            ranks=[first.rank] if first.rank is not None else [],
            hosts=[first.host] if first.host else [],
            evidence_events=[first],
        )


register_analyzer(TorchrunAnalyzer())
