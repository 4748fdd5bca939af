"""nccl-tests output (``all_reduce_perf``, ``all_gather_perf``…) → bandwidth rows and a summary.

Reads the table printed by every nccl-tests binary::

    #  Rank  0 Group  0 Pid 4242 on node-01 device  0 [0x18] NVIDIA H100 80GB HBM3
    #       size    count   type  redop  root   time  algbw  busbw #wrong   time  algbw  busbw #wrong
           1048576  262144  float   sum    -1  40.12  26.13  45.73      0  39.90  26.28  45.99      0
    # Avg bus bandwidth    : 42.3018

Old releases have no ``root`` column and some print ``N/A`` for ``#wrong``; the
numbers are read from the end of the row, so both layouts work. One file may
hold several runs (a new ``# nThread`` header starts one). Facts written:
``facts["nccl_tests"] = {"runs": [{test, hosts, ranks, nodes, scope, rows,
peak_busbw, avg_busbw, line, text, …}]}``; one ``nccl_test_result`` event per
run (the ``Avg bus bandwidth`` line, or the best row when that line is absent).
"""

from __future__ import annotations

import re
from typing import Any, BinaryIO

from ..detect import host_from_name
from ..model import Event, ParseResult
from . import ParseError, Progress, register_parser
from . import textlog as _textlog  # noqa: F401 — registered first, so this parser wins its kinds
from ._lines import clip, iter_lines

_RANK = re.compile(
    r"^#\s*Rank\s+(?P<r>\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(?P<h>\S+)\s+device\s+(?P<d>\d+)"
)
_AVG = re.compile(r"#\s*Avg bus bandwidth\s*:\s*(?P<v>[\d.]+)")
_TEST = re.compile(
    r"\b(?P<t>(?:all_reduce|all_gather|reduce_scatter|alltoall|broadcast|reduce|sendrecv|scatter|gather|hypercube)_perf)\b"
)
_HEAD = re.compile(r"#\s*nThread\s+(?P<nt>\d+)\s+nGpus\s+(?P<ng>\d+)")
_NUM = re.compile(r"^-?\d+(?:\.\d+)?$")
MAX_ROWS = 400


def _f(tok: str) -> float | None:
    return float(tok) if _NUM.match(tok) else None


def parse_row(line: str) -> dict[str, Any] | None:
    """One data row → {size, count, type, redop, time_us, algbw, busbw, ip_busbw…} or None."""
    toks = line.split()
    if len(toks) < 6 or not toks[0].isdigit():
        return None
    nums_tail = toks[-8:] if len(toks) >= 12 else None
    row: dict[str, Any] = {
        "size": int(toks[0]),
        "count": int(toks[1]) if toks[1].isdigit() else None,
    }
    row["type"] = toks[2] if len(toks) > 2 else ""
    row["redop"] = toks[3] if len(toks) > 3 else ""
    if nums_tail is not None:
        oop = [_f(t) for t in nums_tail[:3]]
        ip = [_f(t) for t in nums_tail[4:7]]
        if None in oop:
            return None
        row.update(time_us=oop[0], algbw=oop[1], busbw=oop[2], wrong=nums_tail[3])
        if None not in ip:
            row.update(ip_time_us=ip[0], ip_algbw=ip[1], ip_busbw=ip[2], ip_wrong=nums_tail[7])
        return row
    tail = [_f(t) for t in toks[-4:-1]]  # only out-of-place printed
    if None in tail:
        return None
    row.update(time_us=tail[0], algbw=tail[1], busbw=tail[2], wrong=toks[-1])
    return row


class NcclTestsParser:
    name = "nccl_tests"
    kinds = ("nccl_tests",)

    def parse(self, stream: BinaryIO, result: ParseResult, progress: Progress | None) -> None:
        runs: list[dict[str, Any]] = []
        cur: dict[str, Any] | None = None
        test_name = ""
        file_host = host_from_name(result.name)

        def new_run(line_no: int) -> dict[str, Any]:
            run = {
                "test": test_name,
                "hosts": [],
                "ranks": 0,
                "rows": [],
                "avg_busbw": None,
                "line": line_no,
                "text": "",
                "ngpus": None,
            }
            runs.append(run)
            return run

        for line_no, text in iter_lines(stream, result):
            m = _TEST.search(text)
            if m and (
                text.lstrip().startswith(("#", "$", "mpirun", "srun", "./", "/"))
                or "_perf -" in text
            ):
                test_name = m.group("t")
                if cur is not None and not cur["test"]:
                    cur["test"] = test_name
            s = text.strip()
            if not s:
                continue
            m = _HEAD.match(s)
            if m:
                cur = new_run(line_no)
                cur["ngpus"] = int(m.group("ng"))
                continue
            if s.startswith("#"):
                m = _RANK.match(s)
                if m:
                    cur = cur or new_run(line_no)
                    cur["ranks"] += 1
                    if m.group("h") not in cur["hosts"]:
                        cur["hosts"].append(m.group("h"))
                    continue
                m = _AVG.search(s)
                if m:
                    cur = cur or new_run(line_no)
                    cur["avg_busbw"] = float(m.group("v"))
                    cur["avg_line"], cur["avg_text"] = line_no, clip(text)
                    cur = None  # the run is over
                continue
            row = parse_row(s)
            if row is None:
                continue
            cur = cur or new_run(line_no)
            if len(cur["rows"]) < MAX_ROWS:
                row["line"], row["text"] = line_no, clip(text)
                cur["rows"].append(row)
        runs = [r for r in runs if r["rows"] or r["avg_busbw"] is not None]
        if not runs:
            raise ParseError("no nccl-tests result rows (size/count/type/…/busbw) found")
        for run in runs:
            if not run["test"]:
                run["test"] = test_name or "unknown_perf"
            if not run["hosts"] and file_host:
                run["hosts"] = [file_host]
            rows = run["rows"]
            best = max(rows, key=lambda r: r["busbw"]) if rows else None
            big = [r for r in rows if r["size"] >= (1 << 28)] or rows[-3:]
            run["peak_busbw"] = best["busbw"] if best else run["avg_busbw"]
            run["large_busbw"] = round(sum(r["busbw"] for r in big) / len(big), 3) if big else None
            run["nodes"] = len(run["hosts"]) or None
            run["scope"] = (
                "inter_node"
                if len(run["hosts"]) > 1
                else ("intra_node" if run["hosts"] else "unknown")
            )
            run["wrong"] = sum(1 for r in rows if str(r.get("wrong", "0")) not in ("0", "N/A"))
            if run.get("avg_line"):
                line, text = run["avg_line"], run["avg_text"]
            elif best:
                line, text = best["line"], best["text"]
            else:
                continue
            run["line"], run["text"] = line, text
            result.events.append(
                Event(
                    kind="nccl_test_result",
                    line=line,
                    text=text,
                    host=run["hosts"][0] if run["hosts"] else None,
                    fields={
                        k: run[k]
                        for k in (
                            "test",
                            "hosts",
                            "scope",
                            "peak_busbw",
                            "avg_busbw",
                            "large_busbw",
                            "wrong",
                        )
                    },
                    file=result.name,
                )
            )
            for h in run["hosts"]:
                if h not in result.hosts:
                    result.hosts.append(h)
        for run in runs:
            run["rows"] = run["rows"][-40:]
        result.facts["nccl_tests"] = {"runs": runs}
        result.event_counts["nccl_test_result"] = len(runs)


register_parser(NcclTestsParser())
