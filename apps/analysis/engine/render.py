"""Render the triage document as Markdown (reports, the web's copy button) or plain text (terminal)."""

from __future__ import annotations

from typing import Any

MAX_LIST = 24


def _ranks(rs: list[int]) -> str:
    """Compact rank list: 0-7, 9, 12-15."""
    if not rs:
        return "none"
    rs = sorted(set(rs))
    out: list[str] = []
    start = prev = rs[0]
    for r in [*rs[1:], None]:  # type: ignore[list-item]
        if r is not None and r == prev + 1:
            prev = r
            continue
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    return ", ".join(out)


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
    bad = [a for a in doc.get("artifacts", []) if a.get("error")]
    if bad:
        out += ["", "skipped files:"]
        out += [f"  - {a['name']}: {a['error']}" for a in bad[:MAX_LIST]]
    return "\n".join(out) + "\n"
