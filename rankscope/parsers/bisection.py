"""Bisection results people upload: what was tried at which value, and whether it worked.

Formats (documented in docs/analysis.md):
- CSV/TSV with a header ``variable,value,outcome[,note]`` (``outcome`` is
  ``works``/``ok``/``pass``/``success``/``true``/``1`` or ``fails``/``fail``/
  ``error``/``oom``/``hang``/``false``/``0``; anything else is ``unknown``);
- JSON: a list of ``{"variable", "value", "outcome", "note"}`` objects, or
  ``{"variable": [{"value", "outcome", "note"}, …]}``; JSON lines work too.
``variable`` names what was varied (``gpus``, ``nodes``, ``batch_size``, ``layers``, ``seq_len``…).

Each trial becomes a ``bisection_trial`` event at its row's line.
"""

from __future__ import annotations

import json
import re
from typing import Any, BinaryIO

from ..detect import Recognizer
from ..model import Event, ParseResult
from . import ParseError, Progress, register_parser
from ._json_rows import json_document_or_lines
from ._lines import clip, iter_lines

_WORKS = {
    "works",
    "work",
    "worked",
    "ok",
    "pass",
    "passed",
    "success",
    "succeeded",
    "true",
    "1",
    "yes",
    "good",
    "stable",
}
_FAILS = {
    "fails",
    "fail",
    "failed",
    "error",
    "oom",
    "hang",
    "hangs",
    "crash",
    "crashed",
    "false",
    "0",
    "no",
    "bad",
    "diverged",
    "nan",
    "timeout",
}
MAX_TRIALS = 10_000


def outcome_of(v: Any) -> str:
    s = str(v).strip().lower()
    if s in _WORKS:
        return "works"
    if s in _FAILS or s.startswith(("fail", "error", "oom", "hang", "crash", "timeout")):
        return "fails"
    return "unknown"


def _value(v: Any) -> float | str:
    s = str(v).strip()
    m = re.fullmatch(r"(-?\d+(?:\.\d+)?)\s*([kKmM]?)", s)
    if m:
        x = float(m.group(1)) * {"": 1, "k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6}[m.group(2)]
        return int(x) if x.is_integer() else x
    return s


class BisectionParser:
    name = "bisection"
    kinds = ("bisection",)
    recognizers = (
        Recognizer(
            "bisection",
            41,
            lambda h: bool(re.match(r"^variable,value,(?:outcome|result)\b", h.first_line)),
        ),
        Recognizer("bisection", 65, lambda h: "bisect" in h.base),
    )

    def parse(self, stream: BinaryIO, result: ParseResult, progress: Progress | None) -> None:
        lines = []
        for pair in iter_lines(stream, result):
            lines.append(pair)
            if len(lines) > MAX_TRIALS:
                result.warn(f"only the first {MAX_TRIALS} rows were read")
                break
        body = "\n".join(t for _, t in lines).strip()
        trials: list[dict[str, Any]] = []
        if body.startswith(("{", "[")):
            self._json(lines, body, trials)
        else:
            self._csv(lines, trials)
        if not trials:
            raise ParseError("no bisection rows found (expected variable,value,outcome[,note])")
        for t in trials:
            result.events.append(
                Event(
                    kind="bisection_trial",
                    line=t["line"],
                    text=t["text"],
                    fields={k: t[k] for k in ("variable", "value", "outcome", "note")},
                    file=result.name,
                )
            )
        result.event_counts["bisection_trial"] = len(trials)
        result.facts["bisection"] = {
            "trials": len(trials),
            "variables": sorted({t["variable"] for t in trials}),
        }

    def _csv(self, lines: list[tuple[int, str]], trials: list[dict[str, Any]]) -> None:
        idx = {"variable": 0, "value": 1, "outcome": 2, "note": 3}
        for n, (line_no, text) in enumerate(lines):
            s = text.strip()
            if not s or s.startswith("#"):
                continue
            sep = "\t" if s.count("\t") > s.count(",") else ","
            cells = [c.strip().strip('"') for c in s.split(sep)]
            low = [c.lower() for c in cells]
            if n < 5 and ("outcome" in low or "result" in low) and "value" in low:
                idx = {
                    k: (low.index(k) if k in low else -1)
                    for k in ("variable", "value", "outcome", "note")
                }
                if idx["outcome"] < 0 and "result" in low:
                    idx["outcome"] = low.index("result")
                continue
            if len(cells) < 3:
                continue

            def get(k: str, cells: list[str] = cells, idx: dict[str, int] = idx) -> str:
                return cells[idx[k]] if 0 <= idx[k] < len(cells) else ""

            if idx["note"] >= 0 and len(cells) > idx["note"] + 1:
                note = sep.join(cells[idx["note"] :])
            else:
                note = get("note")
            trials.append(
                {
                    "variable": get("variable") or "value",
                    "value": _value(get("value")),
                    "outcome": outcome_of(get("outcome")),
                    "note": note,
                    "line": line_no,
                    "text": clip(text),
                }
            )

    def _json(self, lines: list[tuple[int, str]], body: str, trials: list[dict[str, Any]]) -> None:
        data = json_document_or_lines(body, lines)
        rows: list[tuple[str, dict[str, Any]]] = []
        if isinstance(data, dict):
            for var, lst in data.items():
                for o in lst if isinstance(lst, list) else []:
                    if isinstance(o, dict):
                        rows.append((var, o))
        elif isinstance(data, list):
            rows = [(str(o.get("variable", "value")), o) for o in data if isinstance(o, dict)]
        cursor = 0
        for var, o in rows:
            val = o.get("value")
            # the line of this trial: the next line (from the last one used) naming its value
            line, text = lines[0] if lines else (1, "")
            needle = json.dumps(val) if not isinstance(val, str) else f'"{val}"'
            for i in range(cursor, len(lines)):
                if needle in lines[i][1] or str(val) in lines[i][1]:
                    line, text = lines[i]
                    cursor = i + 1
                    break
            trials.append(
                {
                    "variable": var,
                    "value": _value(val),
                    "outcome": outcome_of(o.get("outcome", o.get("result", ""))),
                    "note": str(o.get("note", "")),
                    "line": line,
                    "text": clip(text),
                }
            )


register_parser(BisectionParser())
