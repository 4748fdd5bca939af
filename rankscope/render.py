"""Render the triage document as Markdown (reports, the web's copy button) or plain text (terminal)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

MAX_LIST = 24


def rank_ranges(ranks: Iterable[int] | None, *, limit: int | None = None) -> str:
    """[0, 1, 2, 5, 7, 8] → "0-2, 5, 7-8": a thousand ranks stay one short line.

    With ``limit``, the first ``limit`` runs and then "… (N ranks)". Empty → "". The one
    way ranks are written as ranges, here and in the web.
    """
    values = sorted({int(r) for r in ranks or ()})
    runs: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        runs.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    if limit is not None and len(runs) > limit:
        return ", ".join(runs[:limit]) + f", … ({len(values)} ranks)"
    return ", ".join(runs)


def rank_list(ranks: list[int], n: int = 8) -> str:
    """The first ``n`` ranks as given, then "and N more" (finding titles)."""
    return ", ".join(map(str, ranks[:n])) + (
        f" and {len(ranks) - n} more" if len(ranks) > n else ""
    )


def _ranks(rs: list[int]) -> str:
    return rank_ranges(rs) or "none"


def _md_escape(s: str) -> str:
    return s.replace("|", "\\|").replace("`", "'")


def render_markdown(doc: dict[str, Any]) -> str:
    t = doc["triage"]
    job = doc["job"]
    loc = doc["localization"]
    rc = doc["root_cause"]
    lines = [
        f"# Triage: {t['shape']} — {t['category']} ({t['severity']})",
        "",
        f"**{t['summary']}**",
        "",
        f"- scope: {t['scope']}; when: {t['when']}; confidence: {t['confidence']:.2f}",
        f"- framework: {job['framework']}; world size: {job['world_size'] or 'unknown'}"
        f" ({job.get('world_size_source') or 'no source'}); nodes: {job['nodes'] or 'unknown'}",
        f"- ranks seen: {len(job['ranks_seen'])}; missing: {_ranks(job['ranks_missing'])}",
        "",
        "## Localization",
        "",
        f"- culprit ranks: {_ranks(loc['culprit_ranks'])}"
        + (f" on {', '.join(loc['culprit_hosts'])}" if loc["culprit_hosts"] else ""),
        f"- initiators (own watchdog fired): {_ranks(loc['initiator_ranks'])}",
        f"- notified only: {_ranks(loc['notified_ranks'])}",
        f"- stragglers: {_ranks(loc['straggler_ranks'])}",
    ]
    groups = loc.get("nccl_groups") or []
    if groups:
        lines += [
            "",
            "| NCCL state | ranks | pg | seq | op | last enqueued | last completed |",
            "|---|---|---|---|---|---|---|",
        ]
        for g in groups[:MAX_LIST]:
            lines.append(
                f"| {g['role']} | {_ranks(g['ranks'])} | {g['pg']} | {g['seq']} | {g['op']} | "
                f"{g['last_enqueued']} | {g['last_completed']} |"
            )
    lines += ["", "## Root cause", "", rc.get("summary") or "not established", ""]
    for i, step in enumerate(rc.get("chain", []), 1):
        ev = step.get("evidence") or [{}]
        where = f" ({ev[0].get('file')}:{ev[0].get('line')})" if ev[0] else ""
        rank = f"rank {step['rank']}: " if step.get("rank") is not None else ""
        lines.append(
            f"{i}. {step.get('time') or ''} {rank}{step['event']}{where}".replace("  ", " ")
        )
    lines += ["", "## Findings", ""]
    for f in doc["findings"]:
        lines.append(f"### [{f['phase']}] {f['title']} ({f['kind']}, {f['confidence']:.2f})")
        if f.get("detail"):
            lines += ["", f["detail"]]
        lines.append("")
        for ev in f["evidence"][:3]:
            lines.append(f"- `{_md_escape(ev['file'])}:{ev['line']}`")
            lines.append("")
            lines.append("  ```")
            lines.append("  " + ev["text"].replace("```", "'''"))
            lines.append("  ```")
        lines.append("")
    if doc["recommendations"]:
        lines += ["## Recommendations", ""]
        lines += [f"- **{r['kind']}**: {r['text']}" for r in doc["recommendations"]]
        lines.append("")
    if doc["timeline"]:
        lines += ["## Timeline", "", "| time | rank | event | where |", "|---|---|---|---|"]
        for e in doc["timeline"][:60]:
            lines.append(
                f"| {e.get('time') or ''} | {'' if e.get('rank') is None else e['rank']} | "
                f"{_md_escape(e['event'])} | {_md_escape(e['file'])}:{e['line']} |"
            )
        lines.append("")
    lines += _md_isolation(doc)
    bad = [a for a in doc.get("artifacts", []) if a.get("error")]
    if bad:
        lines += ["## Files skipped", ""]
        lines += [f"- `{_md_escape(a['name'])}`: {a['error']}" for a in bad[:MAX_LIST]]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def render_text(doc: dict[str, Any]) -> str:
    t = doc["triage"]
    loc = doc["localization"]
    job = doc["job"]
    out = [
        f"{t['severity']}: {t['shape']} / {t['category']}  (scope {t['scope']}, when {t['when']}, "
        f"confidence {t['confidence']:.2f})",
        t["summary"],
        "",
        f"job: {job['framework']}, world size {job['world_size'] or '?'}, nodes {job['nodes'] or '?'}, "
        f"ranks seen {len(job['ranks_seen'])}, missing {_ranks(job['ranks_missing'])}",
        f"culprit: {_ranks(loc['culprit_ranks'])} {' '.join(loc['culprit_hosts'])}".rstrip(),
        f"initiators: {_ranks(loc['initiator_ranks'])}",
        f"notified: {_ranks(loc['notified_ranks'])}",
        f"stragglers: {_ranks(loc['straggler_ranks'])}",
        "",
        "root cause: " + (doc["root_cause"].get("summary") or "not established"),
    ]
    for i, step in enumerate(doc["root_cause"].get("chain", []), 1):
        rank = f"rank {step['rank']}: " if step.get("rank") is not None else ""
        out.append(f"  {i}. {step.get('time') or '-'} {rank}{step['event']}")
    out += ["", "findings:"]
    for f in doc["findings"]:
        out.append(f"  [{f['phase']}] {f['title']}  ({f['confidence']:.2f})")
        ev = f["evidence"][0]
        out.append(f"      {ev['file']}:{ev['line']}: {ev['text'][:200]}")
    if doc["recommendations"]:
        out += ["", "what to do:"]
        out += [f"  - ({r['kind']}) {r['text']}" for r in doc["recommendations"]]
    out += _text_isolation(doc)
    bad = [a for a in doc.get("artifacts", []) if a.get("error")]
    if bad:
        out += ["", "skipped files:"]
        out += [f"  - {a['name']}: {a['error']}" for a in bad[:MAX_LIST]]
    return "\n".join(out) + "\n"


# -- isolation, storage, hardware, proposals -------------------------------------


def _md_isolation(doc: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    iso = doc.get("isolation") or {}
    if iso.get("nccl_tests"):
        lines += [
            "## Isolation: nccl-tests",
            "",
            "| test | scope | hosts | busbw GB/s | vs best | where |",
            "|---|---|---|---|---|---|",
        ]
        for r in iso["nccl_tests"][:MAX_LIST]:
            lines.append(
                f"| {r['test']} | {r['scope']} | {_md_escape(', '.join(r['hosts'][:4]))} | {r['busbw']:g} | "
                f"{r.get('vs_best') or ''} | {_md_escape(r['file'])}:{r['line']} |"
            )
        lines.append("")
    for b in iso.get("bisection") or []:
        bp = b.get("breaking_point")
        what = (
            f"works at {bp['last_working']:g}, fails at {bp['first_failing']:g}"
            if bp
            else b.get("note", "")
        )
        lines.append(f"- bisection on {_md_escape(b['variable'])}: {what}")
    if iso.get("pipeline_bubble"):
        pb = iso["pipeline_bubble"]
        lines.append(
            f"- pipeline bubble (p={pb['stages']}, m={pb['micro_batches']}): {pb['fraction']:.1%}"
        )
    st = doc.get("storage") or {}
    if st.get("chain") or st.get("offset_seconds"):
        lines += ["", "## Storage", ""]
        if st.get("offset_seconds"):
            lines.append(f"- storage clock offset applied: {st['offset_seconds']:+.0f} s")
        for i, c in enumerate(st.get("chain") or [], 1):
            lines.append(
                f"{i}. {c.get('time') or ''} {_md_escape(c['step'])} ({_md_escape(c['file'])}:{c['line']})"
            )
        lines.append("")
    hw = doc.get("hardware") or {}
    if hw.get("xid") or hw.get("repeat_offenders"):
        lines += ["## Hardware", ""]
        for x in hw.get("xid", [])[:MAX_LIST]:
            lines.append(
                f"- {x['host'] or '?'} GPU {x['pci'] or '?'}: Xid {x['xid']} — {x['meaning']} → **{x['action']}** (x{x['count']})"
            )
        for r in hw.get("repeat_offenders", [])[:MAX_LIST]:
            lines.append(f"- repeat offender: {r['host']} ({r['past_incidents']} past incidents)")
        lines.append("")
    p = doc.get("proposals") or {}
    if p.get("hypotheses"):
        lines += ["## Proposals", "", "### Hypotheses", ""]
        for h in p["hypotheses"]:
            lines.append(
                f"- **{_md_escape(h['title'])}** ({h['category']}, {h['confidence']:.2f}) — expected if true: "
                f"{_md_escape(h['expected_if_true'])}; test: `{_md_escape(h['test'])}`"
            )
        for w in p.get("five_whys", []):
            lines += ["", f"### {_md_escape(w['title'])}", ""]
            for i, lv in enumerate(w["levels"], 1):
                ev = lv["evidence"][0] if lv.get("evidence") else None
                where = f" ({_md_escape(ev['file'])}:{ev['line']})" if ev else ""
                lines.append(f"{i}. {_md_escape(lv['why'])} → {_md_escape(lv['answer'])}{where}")
        if p.get("fixes"):
            lines += ["", "### Fixes", ""]
            lines += [
                f"- ({f['kind']}) {_md_escape(f['title'])}: {_md_escape(f['detail'])}"
                for f in p["fixes"]
            ]
        if p.get("prevention"):
            lines += ["", "### Prevention", ""]
            lines += [f"- [{x['checklist']}] {_md_escape(x['text'])}" for x in p["prevention"][:12]]
        lines.append("")
    return lines


def _text_isolation(doc: dict[str, Any]) -> list[str]:
    out: list[str] = []
    st = doc.get("storage") or {}
    if st.get("chain"):
        out += ["", "storage chain:"] + [
            f"  {i}. {c['step']} ({c['file']}:{c['line']})" for i, c in enumerate(st["chain"], 1)
        ]
    hyps = (doc.get("proposals") or {}).get("hypotheses") or []
    if hyps:
        out += ["", "hypotheses to test:"] + [f"  - {h['title']}: {h['test']}" for h in hyps[:5]]
    return out
