"""Per-step metrics files (CSV/TSV with a header, or JSON lines) → ``MetricsTable``."""

from __future__ import annotations

import io
import json
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from ..detect import host_from_name, rank_from_name
from ..metrics import MAX_ROWS, MetricsTable, normalise_columns
from ..model import ParseResult
from . import ParseError, Progress, register_parser

MAX_BYTES = 256 << 20


def _line_map(data: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray, bytes]:
    """(1-based numbers, starts, ends) of the non-empty lines of ``data``."""
    arr = np.frombuffer(data, dtype=np.uint8)
    nl = np.flatnonzero(arr == 10)
    starts = np.concatenate(([0], nl + 1))
    ends = np.concatenate((nl, [len(data)]))
    width = ends - starts
    cr = np.zeros_like(width, dtype=bool)
    has = width > 0
    cr[has] = arr[ends[has] - 1] == 13
    ends = ends - cr
    keep = (ends - starts) > 0
    numbers = np.flatnonzero(keep) + 1
    return numbers, starts[keep], ends[keep], data


def _sample(
    lines: tuple[np.ndarray, np.ndarray, np.ndarray, bytes], row: int, table: pa.Table
) -> dict[str, Any]:
    numbers, starts, ends, data = lines
    i = row + 1  # line 0 of the map is the header
    step = table.column("step")[row].as_py() if "step" in table.column_names else None
    return {
        "line": int(numbers[i]),
        "text": data[starts[i] : ends[i]].decode("utf-8", errors="replace"),
        "step": step,
    }


def _samples(
    table: pa.Table, lines: tuple[np.ndarray, np.ndarray, np.ndarray, bytes]
) -> dict[str, Any]:
    """Raw rows kept as evidence, per rank: first, last, slowest, most typical, first NaN loss."""
    n = table.num_rows
    if n == 0:
        return {}
    ranks = (
        table.column("rank").to_numpy(zero_copy_only=False)
        if "rank" in table.column_names
        else np.zeros(n)
    )
    ranks = np.where(np.isnan(ranks.astype(float)), -1, ranks).astype(np.int64)
    st = (
        table.column("step_time").to_numpy(zero_copy_only=False).astype(float)
        if "step_time" in table.column_names
        else None
    )
    loss = (
        table.column("loss").to_numpy(zero_copy_only=False).astype(float)
        if "loss" in table.column_names
        else None
    )
    out: dict[str, Any] = {}
    order = np.argsort(ranks, kind="stable")
    bounds = np.flatnonzero(np.diff(ranks[order])) + 1
    for idx in np.split(order, bounds):
        key = str(int(ranks[idx[0]])) if "rank" in table.column_names else "all"
        s: dict[str, Any] = {
            "first": _sample(lines, int(idx[0]), table),
            "last": _sample(lines, int(idx[-1]), table),
        }
        if st is not None:
            v = st[idx]
            ok = ~np.isnan(v)
            if ok.any():
                med = np.median(v[ok])
                s["median"] = _sample(lines, int(idx[ok][np.argmin(np.abs(v[ok] - med))]), table)
                s["max"] = _sample(lines, int(idx[ok][np.argmax(v[ok])]), table)
        if loss is not None:
            li = loss[idx]
            bad = idx[np.isinf(li) | (np.isnan(li) & _present(table, "loss", idx))]
            if bad.size:
                s["first_nan"] = _sample(lines, int(bad[0]), table)
        out[key] = s
    return out


def _present(table: pa.Table, col: str, idx: np.ndarray) -> np.ndarray:
    valid = table.column(col).is_valid().to_numpy(zero_copy_only=False)
    return valid[idx]


class MetricsParser:
    name = "metrics"
    kinds = ("metrics",)

    def parse(self, stream: BinaryIO, result: ParseResult, progress: Progress | None) -> None:
        first = stream.read(1 << 16)
        body = _Rewind(first, stream)
        lines: tuple[np.ndarray, np.ndarray, np.ndarray, bytes] | None = None
        if first.lstrip()[:1] == b"{":
            table = self._jsonl(body, result)
        else:
            data = body.read(MAX_BYTES + 1)
            if len(data) > MAX_BYTES:
                result.warn(f"metrics file cut at {MAX_BYTES >> 20} MiB")
                data = data[: data.rfind(b"\n", 0, MAX_BYTES) + 1]
            table = self._csv(_Rewind(data, io.BytesIO()), data[:65536], result)
            lines = _line_map(data)
            result.bytes = len(data)
            if lines[0].size - 1 != table.num_rows:
                result.warn(
                    "rows and lines do not line up (quoted newlines?); metrics evidence omitted"
                )
                lines = None
        if "_line" not in table.column_names and lines is not None:
            table = table.append_column("_line", pa.array(lines[0][1:], pa.int64()))
        table, notes = normalise_columns(table)
        for n in notes:
            result.warn(n)
        if "step" not in table.column_names:
            raise ParseError("metrics file without a step/iteration column")
        n = table.num_rows
        file_rank = rank_from_name(result.name)
        if "rank" not in table.column_names and file_rank is not None:
            table = table.append_column("rank", pa.array([file_rank] * n, pa.int64()))
        host = host_from_name(result.name)
        if "host" not in table.column_names and host:
            table = table.append_column("host", pa.array([host] * n, pa.string()))
        result.metrics = MetricsTable(table)
        result.lines = n + 1
        if "rank" in table.column_names:
            ranks = sorted({r for r in table.column("rank").to_pylist() if r is not None})
            result.ranks = ranks
            if "host" in table.column_names:
                for r, h in zip(
                    table.column("rank").to_pylist(), table.column("host").to_pylist(), strict=True
                ):
                    if r is not None and h and r not in result.rank_hosts:
                        result.rank_hosts[r] = h
                result.hosts = sorted(set(result.rank_hosts.values()))
        result.facts["metrics_columns"] = table.column_names
        if lines is not None:
            result.facts["metrics_samples"] = _samples(table, lines)

    def _csv(self, body: _Rewind, first: bytes, result: ParseResult) -> pa.Table:
        head_line = first.split(b"\n", 1)[0]
        delim = "\t" if head_line.count(b"\t") > head_line.count(b",") else ","
        reader = pacsv.open_csv(
            body,
            read_options=pacsv.ReadOptions(block_size=4 << 20),
            parse_options=pacsv.ParseOptions(
                delimiter=delim, invalid_row_handler=lambda _row: "skip"
            ),
            convert_options=pacsv.ConvertOptions(strings_can_be_null=True),
        )
        batches = []
        rows = 0
        for batch in reader:
            batches.append(batch)
            rows += batch.num_rows
            if rows >= MAX_ROWS:
                result.warn(f"metrics cut at {MAX_ROWS} rows")
                break
        return pa.Table.from_batches(batches, schema=reader.schema)

    def _jsonl(self, body: _Rewind, result: ParseResult) -> pa.Table:
        cols: dict[str, list[Any]] = {}
        n = 0
        bad = 0
        for raw in body:
            raw = raw.strip()
            if not raw:
                continue
            try:
                obj = json.loads(raw)
            except ValueError:
                bad += 1
                continue
            if not isinstance(obj, dict):
                continue
            for k, v in obj.items():
                if isinstance(v, int | float | str) or v is None:
                    cols.setdefault(k, [None] * n).append(v)
            n += 1
            for lst in cols.values():
                if len(lst) < n:
                    lst.append(None)
            if n >= MAX_ROWS:
                result.warn(f"metrics cut at {MAX_ROWS} rows")
                break
        if bad:
            result.warn(f"{bad} lines were not JSON and were skipped")
        out = {}
        for k, v in cols.items():
            try:
                out[k] = pa.array(v)
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                out[k] = pa.array([None if x is None else str(x) for x in v], pa.string())
        return pa.table(out)


class _Rewind:
    """File-like: ``first`` then the rest of ``stream`` (pyarrow wants ``read``)."""

    def __init__(self, first: bytes, stream: BinaryIO) -> None:
        self._first = first
        self._stream = stream
        self.closed = False

    def read(self, size: int = -1) -> bytes:
        if self._first:
            if size is None or size < 0:
                out, self._first = self._first + self._stream.read(), b""
                return out
            out, self._first = self._first[:size], self._first[size:]
            if len(out) < size:
                out += self._stream.read(size - len(out)) or b""
            return out
        return self._stream.read(size) or b""

    def __iter__(self):
        pending = b""
        while True:
            chunk = self.read(1 << 20)
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            yield from lines
        if pending:
            yield pending


register_parser(MetricsParser())
