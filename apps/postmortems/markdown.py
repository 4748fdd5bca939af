# ruff: noqa: RUF001, RUF003 — × and − are the symbols people read in a formula
"""GitHub-flavoured markdown of a post-mortem, from its stored content (never the live incident).

User text stays markdown (people write it that way) with raw HTML neutralised; log text
goes into code spans; every table cell goes through ``md_cell`` so a ``|`` or a newline in
someone's text cannot break a row.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from apps.lib.timefmt import format_time
from apps.postmortems.cost import FORMULA_LINES, INPUT_LABELS, CostResult
from apps.postmortems.formatting import (
    fmt_duration,
    fmt_fraction,
    fmt_hours,
    fmt_input,
    fmt_usd,
    md_cell,
    md_code,
    md_text,
)
from apps.postmortems.snapshot import MARKERS


def _yaml(value: Any) -> str:
    # JSON strings and numbers are valid YAML scalars, and quoting makes any text safe.
    return json.dumps(value, ensure_ascii=False)


class Raw(str):
    """A table cell already made safe (code spans of log text): not escaped again."""

    __slots__ = ()


def _table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    for row in rows:
        cells = [c if isinstance(c, Raw) and c else md_cell(c) for c in row]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


# Set by render() for the post-mortem being rendered: file, line → the viewer's URL ("" if
# the file is not among the incident's uploads).
_LINKER: contextvars.ContextVar[Callable[[str, Any], str] | None] = contextvars.ContextVar(
    "postmortem_linker", default=None
)


def _iso_seconds(value: Any) -> Any:
    try:
        return dt.datetime.fromisoformat(str(value)).isoformat(timespec="seconds")
    except ValueError:
        return value


_t = format_time


def _ref(ref: dict[str, Any], *, in_table: bool = False) -> str:
    """`file:line` (a link to the viewer at that line) and the quoted log line in a code
    span (where HTML is never run)."""
    label = md_cell(f"{ref.get('file', '')}:{ref.get('line', '')}")
    linker = _LINKER.get()
    url = linker(str(ref.get("file") or ""), ref.get("line")) if linker else ""
    where = f"[{label.replace('[', '&#91;').replace(']', '&#93;')}](<{url}>)" if url else label
    text = ref.get("text")
    return f"{where} {md_code(text, in_table=in_table)}" if text else where


def _refs(refs: list[dict[str, Any]] | None, *, in_table: bool = False) -> str:
    return "; ".join(_ref(r, in_table=in_table) for r in refs or [])


def _why(text: Any) -> str:
    """A Why level's question, with one "Why" in front (people often write it already)."""
    q = md_cell(text).strip()
    return q if q.lower().startswith("why") else f"Why? {q}"


def _gpus(inc: dict[str, Any], pm: Any) -> str:
    count = inc.get("gpu_count") or (pm.cost_inputs or {}).get("gpu_count")
    if not count:
        return "—"
    return f"{fmt_input(count)} × {inc.get('gpu_type') or 'GPU'}"


def _num(mean: Any, trials: Any) -> str:
    if mean is None:
        return "—"
    try:
        text = f"{float(mean):.4g}"
    except (TypeError, ValueError):
        text = str(mean)
    return text + (f" (n={trials})" if trials else "")


def _change(before: Any, after: Any) -> float | None:
    try:
        b = sum(map(float, before)) / len(before)
        a = sum(map(float, after)) / len(after)
    except (TypeError, ValueError, ZeroDivisionError):
        return None
    return (a - b) / abs(b) if b else None


def _pct(change: Any) -> str:
    try:
        return f"{float(change) * 100:+.1f} %"
    except (TypeError, ValueError):
        return "—"


def _para(text: str, empty: str = "_Not written yet._") -> list[str]:
    body = md_text(text)
    return [body if body else empty, ""]


def render(ctx: dict[str, Any]) -> str:
    """The markdown text of a post-mortem; ``ctx`` comes from services.postmortem_context.

    ``ctx["evidence_url"]`` (optional): file, line → absolute URL of the evidence viewer.
    """
    token = _LINKER.set(ctx.get("evidence_url"))
    try:
        return _render(ctx)
    finally:
        _LINKER.reset(token)


@dataclass(frozen=True, slots=True)
class _Doc:
    """What every section of the text reads."""

    pm: Any
    ctx: dict[str, Any]
    snap: dict[str, Any]
    inc: dict[str, Any]
    cost: CostResult | None
    job_ids: list[Any]
    # Optional sections: a published text says so plainly instead of "not written yet".
    optional_empty: str


def _render(ctx: dict[str, Any]) -> str:
    pm = ctx["postmortem"]
    snap: dict[str, Any] = pm.snapshot or {}
    inc = snap.get("incident") or {}
    d = _Doc(
        pm=pm,
        ctx=ctx,
        snap=snap,
        inc=inc,
        cost=ctx.get("cost"),
        job_ids=[j for j in [inc.get("job_id"), inc.get("run_key")] if j],
        optional_empty="_Nothing recorded._" if pm.status == "published" else "_Not written yet._",
    )
    out: list[str] = []
    for section in _SECTIONS:
        out += section(d)
    return "\n".join(out)


def _front_matter(d: _Doc) -> list[str]:
    """YAML front matter, the title and the summary table."""
    pm, snap, inc, cost, ctx, job_ids = d.pm, d.snap, d.inc, d.cost, d.ctx, d.job_ids
    out: list[str] = []
    out += [
        "---",
        f"title: {_yaml(pm.title)}",
        f"postmortem: {_yaml(pm.code)}",
        f"incident: {_yaml(inc.get('code', ''))}",
        f"status: {_yaml(pm.status)}",
        f"severity: {_yaml(pm.severity or inc.get('severity', ''))}",
        f"failure_class: {_yaml(pm.category)}",
        f"cluster: {_yaml(inc.get('cluster', ''))}",
        f"job_ids: {_yaml(job_ids)}",
        f"gpus: {_yaml(inc.get('gpu_count'))}",
        f"gpu_hours_lost: {_yaml(round(cost.gpu_hours_lost, 2) if cost else None)}",
        f"cost_usd: {_yaml(round(cost.cost_usd, 2) if cost and cost.cost_usd is not None else None)}",
        f"owner: {_yaml(ctx.get('owner', ''))}",
        f"revision: {pm.revision}",
        f"snapshot_taken_at: {_yaml(_iso_seconds(snap.get('taken_at')))}",
        "---",
        "",
        f"# {md_text(pm.title)}",
        "",
    ]
    out += _table(
        ["Field", "Value"],
        [
            ["Status", pm.get_status_display()],
            ["Severity", pm.severity or inc.get("severity", "")],
            ["Failure class", pm.category],
            ["Team", inc.get("team", "")],
            ["Cluster", inc.get("cluster", "")],
            ["Job ids", ", ".join(job_ids)],
            ["GPUs", _gpus(inc, pm)],
            ["Owner", ctx.get("owner", "")],
            ["Approved by", ", ".join(a["approver"] for a in ctx.get("approvals", []))],
        ],
    )
    out.append("")
    return out


def _summary_and_impact(d: _Doc) -> list[str]:
    """Summary, impact, milestones and the detect / mitigate / resolve intervals."""
    pm, snap = d.pm, d.snap
    out: list[str] = []
    out += ["## Summary", "", *_para(pm.summary)]

    out += ["## Impact", "", *_para(pm.impact)]
    durations = snap.get("durations") or {}
    out += _table(
        ["Milestone", "Time (UTC)"],
        [
            [m["label"] + (f" ({m['source']})" if m.get("source") else ""), _t(m.get("at"))]
            for m in durations.get("milestones", [])
        ],
    )
    out.append("")
    out += _table(
        ["Interval", "Duration"],
        [
            ["Time to detect", fmt_duration(durations.get("time_to_detect_s"))],
            ["Time to mitigate", fmt_duration(durations.get("time_to_mitigate_s"))],
            ["Time to resolve", fmt_duration(durations.get("time_to_resolve_s"))],
            ["Time to verified fix", fmt_duration(durations.get("time_to_verify_s"))],
        ],
    )
    out.append("")
    return out


def _cost(d: _Doc) -> list[str]:
    """The cost method, its inputs with their sources, the result and the arithmetic."""
    cost, ctx = d.cost, d.ctx
    out: list[str] = []
    out += ["## Cost", "", "Method:", ""]
    out += [f"- {line}" for line in FORMULA_LINES]
    out.append("")
    if cost is None:
        out += [f"_Cost not computed: {md_text(ctx.get('cost_error', 'no inputs'))}_", ""]
    else:
        inputs = cost.inputs.to_json()
        sources = ctx.get("cost_sources") or {}
        out += _table(
            ["Input", "Value", "Source"],
            [
                [label, fmt_input(inputs[name]), sources.get(name, "—")]
                for name, label, _ in INPUT_LABELS
            ],
        )
        out.append("")
        out += _table(
            ["Result", "Value"],
            [
                [
                    "Waste fraction",
                    f"{fmt_fraction(cost.waste_fraction)} — "
                    + (
                        sources.get("waste_fraction", "entered")
                        if cost.waste_fraction_source == "entered"
                        else cost.waste_fraction_source
                    ),
                ],
                ["Degraded GPU-hours", fmt_hours(cost.degraded_gpu_hours)],
                ["Downtime GPU-hours", fmt_hours(cost.downtime_gpu_hours)],
                ["Recomputed GPU-hours", fmt_hours(cost.recompute_gpu_hours)],
                ["**GPU-hours lost**", fmt_hours(cost.gpu_hours_lost)],
                ["**Cost**", fmt_usd(cost.cost_usd)],
            ]
            + (
                [
                    ["GPU-hours if undetected", fmt_hours(cost.undetected_gpu_hours)],
                    [
                        "Cost if undetected for the rest of the run",
                        fmt_usd(cost.undetected_cost_usd),
                    ],
                ]
                if ctx.get("show_undetected", True)
                else []
            ),
        )
        out += ["", "Arithmetic:", ""]
        out += [f"    {step}" for step in cost.steps]
        out.append("")
        if cost.missing:
            labels = {name: label for name, label, _ in INPUT_LABELS}
            missing = ", ".join(labels.get(m, m) for m in cost.missing)
            out += [f"Missing inputs (their terms count as zero): {md_cell(missing)}", ""]
    return out


def _narrative(d: _Doc) -> list[str]:
    """Trigger, detection, response: the text people wrote."""
    pm = d.pm
    out: list[str] = []
    out += ["## Trigger and leadup", "", *_para(pm.trigger)]
    out += ["## Detection", "", *_para(pm.detection)]
    out += ["## Response and recovery", "", *_para(pm.response)]
    return out


def _timeline(d: _Doc) -> list[str]:
    """The incident's timeline, then the events read from the logs."""
    snap = d.snap
    out: list[str] = []
    out += ["## Timeline", ""]
    timeline = snap.get("timeline") or []
    if timeline:
        out += _table(
            ["Time (UTC)", "Marker", "Event", "By"],
            [
                [
                    _t(e.get("at")),
                    MARKERS.get(e.get("marker") or "", ""),
                    e.get("message", "") + (f" (×{e['count']})" if e.get("count", 1) > 1 else ""),
                    e.get("actor", ""),
                ]
                for e in timeline
            ],
        )
    else:
        out.append("_No events recorded._")
    out.append("")
    log_timeline = snap.get("log_timeline") or []
    if log_timeline:
        out += ["### From the logs", ""]
        out += _table(
            ["Time (log clock)", "Rank", "Event", "Where"],
            [
                [
                    _t(e.get("time")),
                    e.get("rank"),
                    _log_event(e),
                    Raw(_ref({"file": e.get("file", ""), "line": e.get("line", "")})),
                ]
                for e in log_timeline
            ],
        )
        out.append("")
    return out


def _log_event(entry: dict[str, Any], width: int = 160) -> Raw:
    """A log timeline row's event: its kind and the line itself (shortened, as code), so
    the table reads without opening every link."""
    text = " ".join(str(entry.get("text") or "").split())
    if len(text) > width:
        text = text[: width - 1] + "…"
    kind = md_cell(entry.get("event") or "")
    return Raw(f"{kind}: {md_code(text, in_table=True)}" if text else kind)


def _technical_analysis(d: _Doc) -> list[str]:
    """Triage, localization (with the NCCL state per rank) and the findings."""
    snap = d.snap
    out: list[str] = []
    out += ["## Technical analysis", "", "### Triage", ""]
    triage = snap.get("triage") or {}
    if (snap.get("analysis") or {}).get("available"):
        out += _table(
            ["Shape", "Category", "Severity", "Scope", "When", "Confidence"],
            [
                [
                    triage.get("shape"),
                    triage.get("category"),
                    triage.get("severity"),
                    triage.get("scope"),
                    triage.get("when"),
                    triage.get("confidence"),
                ]
            ],
        )
        out += ["", *_para(triage.get("summary", ""), empty="")]
    else:
        out += ["_No analysis had run when this was drafted._", ""]
    loc = snap.get("localization") or {}
    out += ["### Localization", ""]
    out += _table(
        ["Culprit ranks", "Culprit hosts", "Straggler ranks", "Ranks reporting NCCL state"],
        [
            [
                ", ".join(map(str, loc.get("culprit_ranks", []))),
                ", ".join(loc.get("culprit_hosts", [])),
                ", ".join(map(str, loc.get("straggler_ranks", []))),
                loc.get("ranks_reporting", 0),
            ]
        ],
    )
    out.append("")
    if loc.get("nccl"):
        out += _table(
            ["Rank", "PG", "Seq", "Op", "Last completed", "Role"],
            [
                [
                    e.get("rank"),
                    e.get("pg"),
                    e.get("seq"),
                    e.get("op"),
                    e.get("last_completed"),
                    e.get("role"),
                ]
                for e in loc["nccl"]
            ],
        )
        out.append("")
    findings = snap.get("findings") or []
    if findings:
        out += ["### Findings", ""]
        out += _table(
            ["Phase", "Kind", "Finding", "Evidence"],
            [
                [
                    f.get("phase"),
                    f.get("kind"),
                    f.get("title"),
                    Raw(_refs(f.get("evidence"), in_table=True)),
                ]
                for f in findings
            ],
        )
        out.append("")
    return out


def _hypotheses(d: _Doc) -> list[str]:
    """Hypotheses and their tests, or the analysis' untested proposals."""
    snap = d.snap
    out: list[str] = []
    out += ["## Hypotheses and tests", ""]
    hypotheses = snap.get("hypotheses") or []
    if hypotheses:
        out += _table(
            ["Hypothesis", "Expected if true", "Test", "Result", "Status"],
            [
                [
                    h["title"],
                    h.get("expected_if_true"),
                    h.get("test_plan"),
                    h.get("test_result"),
                    h.get("status"),
                ]
                for h in hypotheses
            ],
        )
    elif snap.get("proposed_hypotheses"):
        out += ["Proposed by the analysis (not tested):", ""]
        out += _table(
            ["Hypothesis", "Test", "Confidence"],
            [
                [h.get("title"), h.get("test"), h.get("confidence")]
                for h in snap["proposed_hypotheses"]
            ],
        )
    else:
        out.append("_No hypotheses recorded._")
    out.append("")
    return out


def _root_cause(d: _Doc) -> list[str]:
    """The root cause, the causal chain from the logs, the Five Whys."""
    pm, snap = d.pm, d.snap
    out: list[str] = []
    out += ["## Root cause", "", *_para(pm.root_cause)]
    rca = snap.get("root_cause_analysis") or {}
    if rca.get("chain"):
        out += ["Causal chain from the logs (trigger first):", ""]
        for i, link in enumerate(rca["chain"], 1):
            refs = _refs(link.get("evidence"))
            out.append(
                f"{i}. {_t(link.get('time'))} rank {md_cell(link.get('rank'))}: "
                f"{md_cell(link.get('event'))}" + (f" — {refs}" if refs else "")
            )
        out.append("")
    out += ["### Five Whys", ""]
    chains = snap.get("five_whys") or snap.get("proposed_five_whys") or []
    if not chains:
        out += ["_No Five Whys recorded._", ""]
    for chain in chains:
        steps = chain.get("steps") or chain.get("levels") or []
        chosen = " (chosen)" if chain.get("is_chosen") else ""
        out += [f"#### {md_cell(chain.get('title') or 'Chain')}{chosen}", ""]
        for i, step in enumerate(steps, 1):
            refs = _refs(step.get("evidence"))
            out.append(
                f"{i}. {_why(step.get('why'))} → {md_cell(step.get('answer'))}"
                + (f" — evidence: {refs}" if refs else "")
            )
        out.append("")
    return out


def _contributing_factors(d: _Doc) -> list[str]:
    """Contributing factors."""
    snap = d.snap
    out: list[str] = []
    out += ["## Contributing factors", ""]
    factors = snap.get("contributing_factors") or []
    out += [f"- {md_cell(f)}" for f in factors] or ["_None recorded._"]
    out.append("")
    return out


def _fixes(d: _Doc) -> list[str]:
    """Each fix and its verifications against the baseline."""
    snap = d.snap
    out: list[str] = []
    out += ["## Fix and verification", ""]
    fixes = snap.get("fixes") or []
    if not fixes:
        out += ["_No fix recorded._", ""]
    for fix in fixes:
        out += [
            f"### {md_cell(fix.get('title'))} ({md_cell(fix.get('kind'))}, {md_cell(fix.get('status'))})",
            "",
            *_para(fix.get("detail", ""), empty=""),
        ]
        for v in fix.get("verifications") or []:
            out.append(
                f"Verification at {_t(v.get('at'))}: **{md_cell(v.get('verdict'))}** (tolerance {md_cell(v.get('tolerance'))})"
            )
            out.append("")
            metrics = (v.get("details") or {}).get("metrics") or []
            if metrics:
                # The same columns as the page: Metric, Baseline, After fix, Change, Outcome.
                out += _table(
                    ["Metric", "Baseline", "After fix", "Change", "Outcome"],
                    [
                        [
                            str(m.get("metric", ""))
                            + (" (target)" if m.get("is_target") else "")
                            + (f", {m['direction']} is better" if m.get("direction") else ""),
                            _num(m.get("baseline_mean"), m.get("baseline_trials")),
                            _num(m.get("post_mean"), m.get("post_trials")),
                            _pct(m.get("change")),
                            m.get("outcome", ""),
                        ]
                        for m in metrics
                    ],
                )
                out.append("")
                continue
            baseline, post = v.get("baseline") or {}, v.get("post_fix") or {}
            rows = [
                [
                    metric,
                    ", ".join(map(str, baseline.get(metric) or [])),
                    ", ".join(map(str, post.get(metric) or [])),
                    _pct(_change(baseline.get(metric), post.get(metric))),
                    "—",
                ]
                for metric in sorted(set(baseline) | set(post))
            ]
            if rows:
                out += _table(["Metric", "Baseline", "After fix", "Change", "Outcome"], rows)
                out.append("")
    return out


def _action_items(d: _Doc) -> list[str]:
    """Prevention action items."""
    snap = d.snap
    out: list[str] = []
    out += ["## Action items", ""]
    items = snap.get("action_items") or []
    if items:
        out += _table(
            ["Action", "Type", "Owner", "Priority", "Due", "Status"],
            [
                [
                    i["text"],
                    i.get("kind"),
                    i.get("owner"),
                    i.get("priority"),
                    i.get("due_date"),
                    i.get("status"),
                ]
                for i in items
            ],
        )
    else:
        out.append("_No action items recorded._")
    out.append("")
    return out


def _reflection(d: _Doc) -> list[str]:
    """What went well, what went wrong, where we got lucky."""
    pm, optional_empty = d.pm, d.optional_empty
    out: list[str] = []
    out += ["## What went well", "", *_para(pm.went_well, empty=optional_empty)]
    out += ["## What went wrong", "", *_para(pm.went_wrong, empty=optional_empty)]
    out += ["## Where we got lucky", "", *_para(pm.got_lucky, empty=optional_empty)]
    return out


def _lessons(d: _Doc) -> list[str]:
    """Time spent per phase and the lessons."""
    pm, ctx = d.pm, d.ctx
    out: list[str] = []
    out += ["## Lessons learned", ""]
    phases = ctx.get("phases") or []
    total = sum(p["seconds"] for p in phases)
    out += _table(
        ["Phase", "Time spent", "Key action"],
        [[p["label"], fmt_duration(p["seconds"]), p.get("key_action", "")] for p in phases]
        + [["Total", fmt_duration(total), ""]],
    )
    out += ["", *_para(pm.lessons, empty="")]
    return out


def _similar(d: _Doc) -> list[str]:
    """Similar incidents and what recurs."""
    ctx = d.ctx
    out: list[str] = []
    out += ["## Similar incidents", ""]
    similar = ctx.get("similar")
    if similar and similar.matches:
        out += _table(
            ["Incident", "Score", "Why it matches"],
            [
                [f"{m.title} ({m.code})", f"{m.score:.2f}", "; ".join(m.reasons)]
                for m in similar.matches
            ],
        )
        out.append("")
    else:
        out += ["_No similar incidents found._", ""]
    if similar and similar.recurring:
        out += ["Recurring:", ""] + [f"- {md_cell(r)}" for r in similar.recurring] + [""]
    return out


def _review_record(d: _Doc) -> list[str]:
    """Approvals and revisions in time order."""
    ctx = d.ctx
    out: list[str] = []
    out += ["## Review record", ""]
    rows = [
        [_t(a["at"]), a["approver"], f"approved revision {a['revision']}"]
        for a in ctx.get("approvals", [])
    ]
    rows += [
        [_t(r["at"]), r["by"], f"revision {r['number']} ({r['status']}) {r['note']}"]
        for r in ctx.get("revisions", [])
    ]
    if rows:
        out += _table(["When (UTC)", "Who", "What"], sorted(rows, key=lambda r: r[0]))
    else:
        out.append("_Not reviewed yet._")
    out.append("")
    return out


# The sections of the text, in reading order.
_SECTIONS: tuple[Callable[[_Doc], list[str]], ...] = (
    _front_matter,
    _summary_and_impact,
    _cost,
    _narrative,
    _timeline,
    _technical_analysis,
    _hypotheses,
    _root_cause,
    _contributing_factors,
    _fixes,
    _action_items,
    _reflection,
    _lessons,
    _similar,
    _review_record,
)
