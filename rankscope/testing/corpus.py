"""The public-failure corpus (``tests/corpus/cases``): load cases, run the engine on a
case exactly as the offline CLI does, score a verdict against the labels, and the naive
first-match grep baseline the accuracy report compares against.

Shared by ``tests/analysis/engine/test_corpus.py`` and ``bench/accuracy/run.py``.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parents[2] / "tests" / "corpus" / "cases"
FIELDS = ("category", "shape", "culprit_ranks", "culprit_hosts", "initiator_ranks", "evidence")


@dataclass
class Case:
    id: str
    path: Path
    labels: dict[str, Any]
    files: list[Path] = field(default_factory=list)

    @property
    def xfail(self) -> str | None:
        return self.labels.get("xfail") or None

    @property
    def klass(self) -> str:
        return str(self.labels.get("class") or self.id.split("-", 1)[0])

    def evidence(self) -> list[tuple[str, str]]:
        out = []
        for item in self.labels.get("evidence", []):
            name, _, text = str(item).partition(": ")
            out.append((name.strip(), text))
        return out


def load_cases(root: Path = CORPUS) -> list[Case]:
    cases = []
    if not root.is_dir():
        return cases
    for d in sorted(p for p in root.iterdir() if (p / "case.toml").is_file()):
        labels = tomllib.loads((d / "case.toml").read_text(encoding="utf-8"))
        files = sorted(p for p in d.rglob("*") if p.is_file() and p.name != "case.toml")
        cases.append(Case(d.name, d, labels, files))
    return cases


def run_engine(case: Case) -> dict[str, Any]:
    """parse_paths + analyze in-process, on the case's log files (not its labels)."""
    from ..cli import parse_paths
    from ..pipeline import analyze

    return analyze(parse_paths(case.files, jobs=1))


def _cited(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Evidence the verdict cites: the root-cause chain and root-cause finding(s)."""
    ev: list[dict[str, Any]] = []
    for step in (doc.get("root_cause") or {}).get("chain") or []:
        ev.extend(step.get("evidence") or [])
    for f in doc.get("findings") or []:
        if f.get("phase") == "root_cause" or f.get("kind") == "root_cause":
            ev.extend(f.get("evidence") or [])
    return ev


def evidence_cited(case: Case, doc: dict[str, Any]) -> bool:
    """At least one labeled evidence line is cited with its file, its line number and text."""
    want = case.evidence()
    if not want:
        return True
    lines: dict[str, list[str]] = {}
    for name, _ in want:
        p = case.path / name
        if p.is_file():
            # lines as the engine numbers them: split on \n only (a tqdm \r stays inside)
            lines[name] = p.read_text(encoding="utf-8", errors="replace").split("\n")
    for e in _cited(doc):
        fname = str(e.get("file") or "")
        base = fname.rsplit("/", 1)[-1]
        for name, text in want:
            if base != name.rsplit("/", 1)[-1] and not fname.endswith(name):
                continue
            ln = e.get("line")
            src = lines.get(name) or []
            if not isinstance(ln, int) or not 1 <= ln <= len(src):
                continue
            line_text = src[ln - 1].rstrip("\r")
            cited = str(e.get("text") or "").rstrip("…")
            shown = {line_text.strip(), *(seg.strip() for seg in line_text.split("\r"))}
            if text.strip() in shown and line_text.startswith(cited[:200]):
                return True
    return False


def score(case: Case, doc: dict[str, Any]) -> dict[str, bool | None]:
    """Per labeled field: True/False, None when the label does not assert it."""
    lab = case.labels
    loc = doc.get("localization") or {}
    tri = doc.get("triage") or {}
    out: dict[str, bool | None] = {}
    cat = lab.get("category")
    out["category"] = None if cat in (None, "undetermined") else tri.get("category") == cat
    out["shape"] = tri.get("shape") == lab.get("shape") if "shape" in lab else None
    for k in ("culprit_ranks", "culprit_hosts", "initiator_ranks"):
        if k in lab:
            out[k] = sorted(loc.get(k) or [], key=str) == sorted(lab[k], key=str)
        else:
            out[k] = None
    out["evidence"] = evidence_cited(case, doc) if lab.get("evidence") else None
    return out


# --- the naive baseline: first line matching an ordered list of common error regexes -------

GREP_RULES: tuple[tuple[str, str, str], ...] = (
    # (regex, category, shape) — tried in this order on each line; the first line that
    # matches any rule decides
    (r"CUDA out of memory|OutOfMemoryError|out of memory|oom-kill|Killed process", "OOM", "crash"),
    (r"Watchdog caught collective operation timeout|Timeout\(ms\)=|timed out", "NETWORK", "hang"),
    (r"NCCL error|NCCL WARN|ncclSystemError|ncclRemoteError|Connection reset", "NETWORK", "crash"),
    (r"Xid|ECC|fallen off the bus|nvidia-smi", "HARDWARE", "crash"),
    (r"[Ll]oss.*(?:nan|NaN|inf)|OVERFLOW|loss scale", "NUMERICAL", "diverge"),
    (r"No space left|Input/output error|Stale file handle|S3|checkpoint", "STORAGE_IO", "crash"),
    (r"DataLoader|dataloader|shared memory|shm", "DATA", "crash"),
    (r"CANCELLED|TIME LIMIT|PREEMPT|NODE_FAIL|Address already in use", "INFRA", "crash"),
    (r"Traceback|Error:|Exception:|exitcode", "SOFTWARE", "crash"),
)
_GREP = [(re.compile(rx), c, s) for rx, c, s in GREP_RULES]
_PREFIX_RANK = re.compile(
    r"^\s*(?:\[(?:rank|default)(\d+)\]:|\[1,(\d+)\]<std(?:err|out)>:|(\d+): )"
)


def grep_baseline(case: Case) -> dict[str, Any]:
    """What a first-match grep would conclude: a triage-like document."""
    for p in case.files:
        with p.open(encoding="utf-8", errors="replace") as f:
            for i, line in enumerate(f, 1):
                for rx, cat, shape in _GREP:
                    if rx.search(line):
                        m = _PREFIX_RANK.match(line)
                        ranks = [int(next(g for g in m.groups() if g))] if m else []
                        text = line.rstrip("\n")
                        ev = [{"file": f"{case.id}/{p.name}", "line": i, "text": text}]
                        return {
                            "triage": {"category": cat, "shape": shape},
                            "localization": {
                                "culprit_ranks": ranks,
                                "culprit_hosts": [],
                                "initiator_ranks": ranks,
                            },
                            "root_cause": {"chain": [{"evidence": ev}]},
                        }
    return {
        "triage": {"category": "UNKNOWN", "shape": "none"},
        "localization": {"culprit_ranks": [], "culprit_hosts": [], "initiator_ranks": []},
        "root_cause": {"chain": []},
    }
