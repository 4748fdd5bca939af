"""nccl-tests output (``all_reduce_perf``, ``all_gather_perf``…) → bandwidth rows and a summary.

Reads the table printed by every nccl-tests binary::

    #  Rank  0 Group  0 Pid 4242 on node-01 device  0 [0x18] NVIDIA H100 80GB HBM3
    #       size    count   type  redop  root   time  algbw  busbw #wrong   time  algbw  busbw #wrong
           1048576  262144  float   sum    -1  40.12  26.13  45.73      0  39.90  26.28  45.99      0
    # Avg bus bandwidth    : 42.3018

Old releases have no ``root`` column, no ``Group`` in the rank lines, and an
``error`` column (the largest relative error, ``1e-06``…, not a count of wrong
elements); some print ``N/A`` for ``#wrong``; new ones may append a timestamp
column. The numbers are read from the end of the row, so every layout works.
The ``Out of bounds values : N`` footer, when present, is the run's wrong count.
Launcher prefixes (``[1,0]<stdout>:`` from ``mpirun --tag-output``, ``0:`` from
``srun -l``, Ray's ``(head, rank=0, pid=…)``, a ``host:`` label, an ISO time
stamp) are peeled first. One file may hold several runs (a new ``# nThread``
header starts one). Facts written:
``facts["nccl_tests"] = {"runs": [{test, hosts, ranks, nodes, scope, rows,
peak_busbw, avg_busbw, line, text, …}]}``; one ``nccl_test_result`` event per
run (the ``Avg bus bandwidth`` line, or the best row when that line is absent).
"""

from __future__ import annotations

import re
from typing import Any, BinaryIO

from .._lazy import lazy_compile
from ..detect import Head, Recognizer, host_from_name
from ..links import LinkSniffer, expected_busbw, size_collapse
from ..model import Event, ParseResult
from . import ParseError, Progress, register_parser
from ._lines import clip, iter_lines

_RANK = lazy_compile(
    r"^#\s*Rank\s+(?P<r>\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(?P<h>\S+)\s+device\s+(?P<d>\d+)"
    r"(?:\s+\[[^\]]*\])?\s*(?P<model>.*)$"
)
_AVG = lazy_compile(r"#\s*Avg bus bandwidth\s*:\s*(?P<v>[\d.]+(?:e[+-]?\d+)?)")
_OOB = lazy_compile(r"#\s*Out of bounds values\s*:\s*(?P<n>\d+)")
_TEST = lazy_compile(
    r"\b(?P<t>(?:all_reduce|all_gather|reduce_scatter|alltoallv?|broadcast|reduce|sendrecv|scatter|gather|hypercube)_(?:perf(?:_mpi)?|test))\b"
)
_HEAD = lazy_compile(r"#\s*nThread\s+(?P<nt>\d+)\s+nGpus\s+(?P<ng>\d+)")
_NUM = lazy_compile(r"^-?\d+(?:\.\d+)?(?:e[+-]?\d+)?$", re.I)
# what launchers put in front of each line, stacked in this order
_PREFIX = lazy_compile(
    r"^(?:\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\s+)?"  # kubectl --timestamps
    r"(?:\([^()]*\)\s+)?"  # Ray (head, rank=0, pid=…)
    r"(?:\[\d+,\d+\]<std(?:out|err)>:|\s*\d{1,6}:(?=\s)|[A-Za-z][\w.-]*:(?=\s+[#\d]))?"
)
# NCCL 1.x test programs (all_reduce_test N nGPUs GPU…): "N type op time algbw busbw",
# no '#', no count column, time in ms, no wrong column
_V1_HEAD = lazy_compile(r"^\s*N\s+type\s+op\s+time\s+algbw\s+busbw\s*(?:res\b.*)?$")
_TS_TAIL = lazy_compile(r"\s+\d{4}-\d\d-\d\d\s+\d\d:\d\d:\d\d\s*$")  # -Z timestamp column
MAX_ROWS = 400
LARGE = 1 << 28  # rows at or above this size stand for the fabric's bandwidth


def _f(tok: str) -> float | None:
    return float(tok) if _NUM.match(tok) else None


def _wrong_tok(tok: str) -> bool:
    return tok == "N/A" or _f(tok) is not None


def strip_prefix(line: str) -> str:
    """The line without the launcher's prefix (see the module docstring)."""
    m = _PREFIX.match(line)
    return line[m.end() :] if m and m.end() else line


def parse_row(line: str) -> dict[str, Any] | None:
    """One data row → {size, count, type, redop, time_us, algbw, busbw, ip_busbw…} or None."""
    line = _TS_TAIL.sub("", line)
    toks = line.split()
    if len(toks) < 6 or not toks[0].isdigit():
        return None
    row: dict[str, Any] = {
        "size": int(toks[0]),
        "count": int(toks[1]) if toks[1].isdigit() else None,
    }
    row["type"] = toks[2] if len(toks) > 2 else ""
    row["redop"] = toks[3] if len(toks) > 3 and _f(toks[3]) is None else ""
    tail = toks[-8:]
    if len(toks) >= 11 and _wrong_tok(tail[3]) and _wrong_tok(tail[7]):
        oop = [_f(t) for t in tail[:3]]
        ip = [_f(t) for t in tail[4:7]]
        if None not in oop and None not in ip:
            row.update(time_us=oop[0], algbw=oop[1], busbw=oop[2], wrong=tail[3])
            row.update(ip_time_us=ip[0], ip_algbw=ip[1], ip_busbw=ip[2], ip_wrong=tail[7])
            return row
    last = [_f(t) for t in toks[-4:-1]]  # only one block printed
    if None in last or not _wrong_tok(toks[-1]):
        return None
    row.update(time_us=last[0], algbw=last[1], busbw=last[2], wrong=toks[-1])
    return row


def parse_v1_row(line: str) -> dict[str, Any] | None:
    """A NCCL 1.x test row: ``10000000    char     sum    5.650   1.77   1.77`` (time in ms)."""
    toks = line.split()
    if len(toks) < 6 or not toks[0].isdigit():
        return None
    nums = [_f(t) for t in toks[3:6]]
    if None in nums:
        return None
    return {
        "size": int(toks[0]),
        "count": None,
        "type": toks[1],
        "redop": toks[2],
        "time_us": nums[0] * 1000.0,  # type: ignore[operator]
        "algbw": nums[1],
        "busbw": nums[2],
        "wrong": "N/A",
    }


def _row_wrong(v: Any) -> int:
    """Wrong elements in one ``#wrong`` cell (``%g``: ``0``, ``12``, ``1e+06``; ``N/A``)."""
    x = _f(str(v))
    return int(x) if x is not None and x > 0 else 0


_HEAD_LITERALS = (
    "out-of-place",
    "busbw",
    "# nccl-tests",
    "_perf -b",
    "# nThread ",
    " nGpus ",
    "# Rank",
    "# Avg bus bandwidth",
    "algbw",
)


def _is_nccl_tests(h: Head) -> bool:
    has = h.has  # every literal here is declared: answered from one pass over the head
    return (
        (has("out-of-place") and has("busbw"))
        or has("# nccl-tests")
        or has("_perf -b")
        or (has("# nThread ") and has(" nGpus ") and (has("busbw") or has("# Rank")))
        or has("# Avg bus bandwidth")
        # the literal first: the regex alone tries every position (~1 ms a file)
        or (
            has("algbw")
            and re.search(r"(?m)^\s*N\s+type\s+op\s+time\s+algbw\s+busbw\b", h.text) is not None
        )
    )  # the last: NCCL 1.x tests' table header


_EVENT_FIELDS = (
    "test",
    "hosts",
    "scope",
    "peak_busbw",
    "avg_busbw",
    "large_busbw",
    "large_rows",
    "wrong",
    "gpu_model",
    "gpus_per_node",
    "link",
    "expected",
    "collapse",
    "duplicate_rank",
)


class _Scan:
    """One pass over an nccl-tests file: the runs found so far and the table being read."""

    def __init__(self) -> None:
        self.runs: list[dict[str, Any]] = []
        self.cur: dict[str, Any] | None = None
        self.test_name = ""
        self.error_column = False  # the header of the current table says "error", not "#wrong"
        self.v1 = False  # the current table is a NCCL 1.x test's (no '#' lines)
        self.link = LinkSniffer()

    def new_run(self, line_no: int) -> dict[str, Any]:
        run = {
            "test": self.test_name,
            "hosts": [],
            "ranks": 0,
            "rows": [],
            "avg_busbw": None,
            "line": line_no,
            "text": "",
            "ngpus": None,
            "error_column": False,
            "oob": None,
        }
        self.runs.append(run)
        return run

    def feed(self, line_no: int, text: str) -> None:
        body = strip_prefix(text)
        self.link.feed(body)
        self._note_test(body)
        s = body.strip()
        if not s or self._table_header(s, line_no):
            return
        if s.startswith("#"):
            self._comment(s, line_no, text)
        else:
            self._row(s, line_no, text)

    def _note_test(self, body: str) -> None:
        """A command line or banner naming the test binary."""
        m = _TEST.search(body)
        if m and (
            body.lstrip().startswith(("#", "$", "mpirun", "srun", "./", "/"))
            or "_perf -" in body
            or "_perf_mpi -" in body
        ):
            self.test_name = m.group("t").removesuffix("_mpi")  # the MPI build runs the same test
            if self.cur is not None and not self.cur["test"]:
                self.cur["test"] = self.test_name

    def _table_header(self, s: str, line_no: int) -> bool:
        """A line that starts a run or names the table's columns (True: consumed)."""
        if _V1_HEAD.match(s):
            self.v1 = True
            self.cur = self.new_run(line_no)
            self.cur["v1"] = True  # NCCL 1.x ran within one node only
            return True
        m = _HEAD.match(s)
        if m:
            self.v1 = False
            self.cur = self.new_run(line_no)
            self.cur["ngpus"] = int(m.group("ng"))
            return True
        if s.startswith("#") and "busbw" in s and "algbw" in s:
            self.error_column = " error" in s and "#wrong" not in s
            if self.cur is not None:
                self.cur["error_column"] = self.error_column
            return True
        return False

    def _comment(self, s: str, line_no: int, text: str) -> None:
        """A ``#`` line: a rank, the out-of-bounds footer or the average (which ends the run)."""
        m = _RANK.match(s)
        if m:
            self._rank(m, line_no, text)
            return
        m = _OOB.search(s)
        if m:
            self.cur = self.cur or self.new_run(line_no)
            self.cur["oob"] = int(m.group("n"))
            return
        m = _AVG.search(s)
        if m:
            cur = self.cur or self.new_run(line_no)
            cur["avg_busbw"] = float(m.group("v"))
            cur["avg_line"], cur["avg_text"] = line_no, clip(text)
            self.cur = None  # the run is over

    def _rank(self, m: re.Match[str], line_no: int, text: str) -> None:
        cur = self.cur = self.cur or self.new_run(line_no)
        cur["ranks"] += 1
        seen = cur.setdefault("_rank_ids", {})
        r = int(m.group("r"))
        if r in seen and "duplicate_rank" not in cur:
            # the same rank listed twice: several independent jobs wrote here
            # (the binary built without MPI=1, or started by N launchers)
            cur["duplicate_rank"] = {
                "rank": r,
                "hosts": sorted({seen[r], m.group("h")}),
                "line": line_no,
                "text": clip(text),
            }
        seen.setdefault(r, m.group("h"))
        if m.group("model").strip() and not cur.get("gpu_model"):
            cur["gpu_model"] = m.group("model").strip()[:80]
        if m.group("h") not in cur["hosts"]:
            cur["hosts"].append(m.group("h"))

    def _row(self, s: str, line_no: int, text: str) -> None:
        row = parse_v1_row(s) if self.v1 else parse_row(s)
        if row is None:
            return
        if self.cur is None:
            self.cur = self.new_run(line_no)
            self.cur["error_column"] = self.error_column
        if len(self.cur["rows"]) < MAX_ROWS:
            row["line"], row["text"] = line_no, clip(text)
            self.cur["rows"].append(row)


def _run_wrong(run: dict[str, Any]) -> int:
    """Wrong elements over the run."""
    if run["oob"] is not None:
        return run["oob"]  # the footer counts every size, kept rows or not
    if run["error_column"]:
        return 0  # old "error" cells are a relative error, not wrong elements
    return sum(_row_wrong(r.get("wrong")) + _row_wrong(r.get("ip_wrong")) for r in run["rows"])


def _collapse(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Where the bandwidth falls off with size (``links.size_collapse``), rows cut to what is cited."""
    collapse = size_collapse(rows)
    if not collapse:
        return None
    out: dict[str, Any] = {
        k: ({f: v[f] for f in ("size", "busbw", "line", "text")} if v else None)
        for k, v in collapse.items()
        if k in ("row", "before", "after")
    }
    out["tail"] = bool(collapse.get("tail"))
    return out


def _summarise(run: dict[str, Any], scan: _Scan, name: str, file_host: str | None) -> bool:
    """Fill the run's summary: test, hosts, bandwidths, scope, wrong count, link, expectation.

    True when the run has a line to cite (its average line, else its best row)."""
    if not run["test"]:
        named = _TEST.search(name.rsplit("/", 1)[-1])
        run["test"] = scan.test_name or (named.group("t") if named else "unknown_perf")
    if not run["hosts"] and file_host:
        run["hosts"] = [file_host]
    rows = run["rows"]
    best = max(rows, key=lambda r: r["busbw"]) if rows else None
    big = [r for r in rows if r["size"] >= LARGE]
    run["large_rows"] = len(big)  # rows of ≥ 256 MiB behind large_busbw (0: the last rows)
    big = big or rows[-3:]
    run["peak_busbw"] = best["busbw"] if best else run["avg_busbw"]
    run["large_busbw"] = round(sum(r["busbw"] for r in big) / len(big), 3) if big else None
    run["nodes"] = len(run["hosts"]) or None
    run["scope"] = (
        "inter_node"
        if len(run["hosts"]) > 1
        else ("intra_node" if run["hosts"] or run.get("v1") else "unknown")
    )
    run["wrong"] = _run_wrong(run)
    run["link"] = scan.link.facts()
    per_node = run["ranks"] // len(run["hosts"]) if run["ranks"] and run["hosts"] else None
    run["gpus_per_node"] = per_node
    run["expected"] = expected_busbw(run["scope"], run.get("gpu_model"), run["link"], per_node)
    collapse = _collapse(rows)
    if collapse is not None:
        run["collapse"] = collapse
    if run.get("avg_line"):
        run["line"], run["text"] = run["avg_line"], run["avg_text"]
    elif best:
        run["line"], run["text"] = best["line"], best["text"]
    else:
        return False
    return True


def _report(run: dict[str, Any], result: ParseResult) -> None:
    """The run's ``nccl_test_result`` event (its average line, else its best row) and hosts."""
    result.events.append(
        Event(
            kind="nccl_test_result",
            line=run["line"],
            text=run["text"],
            host=run["hosts"][0] if run["hosts"] else None,
            fields={k: run[k] for k in _EVENT_FIELDS if k in run},
            file=result.name,
        )
    )
    for h in run["hosts"]:
        if h not in result.hosts:
            result.hosts.append(h)


class NcclTestsParser:
    name = "nccl_tests"
    kinds = ("nccl_tests",)
    recognizers = (Recognizer("nccl_tests", 50, _is_nccl_tests, _HEAD_LITERALS),)

    def parse(self, stream: BinaryIO, result: ParseResult, progress: Progress | None) -> None:
        scan = _Scan()
        for line_no, text in iter_lines(stream, result):
            scan.feed(line_no, text)
        runs = [r for r in scan.runs if r["rows"] or r["avg_busbw"] is not None]
        if not runs:
            raise ParseError("no nccl-tests result rows (size/count/type/…/busbw) found")
        file_host = host_from_name(result.name)
        for run in runs:
            if _summarise(run, scan, result.name, file_host):
                _report(run, result)
        for run in runs:
            run["rows"] = run["rows"][-40:]
            run.pop("_rank_ids", None)
        result.facts["nccl_tests"] = {"runs": runs}
        result.event_counts["nccl_test_result"] = len(runs)


register_parser(NcclTestsParser())
