"""Per-step metrics files (CSV/TSV with a header, or JSON lines) → ``MetricsTable``."""

from __future__ import annotations

import json
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.csv as pacsv

from ..detect import host_from_name, rank_from_name
from ..metrics import MAX_ROWS, MetricsTable, normalise_columns
from ..model import ParseResult
from . import ParseError, Progress, register_parser


class MetricsParser:
    name = "metrics"
    kinds = ("metrics",)

    def parse(self, stream: BinaryIO, result: ParseResult, progress: Progress | None) -> None:
        first = stream.read(1 << 16)
        body = _Rewind(first, stream)
        if first.lstrip()[:1] == b"{":
            table = self._jsonl(body, result)
        else:
            table = self._csv(body, first, result)
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
                for r, h in zip(table.column("rank").to_pylist(), table.column("host").to_pylist(), strict=True):
                    if r is not None and h and r not in result.rank_hosts:
                        result.rank_hosts[r] = h
                result.hosts = sorted(set(result.rank_hosts.values()))
        result.facts["metrics_columns"] = table.column_names

    def _csv(self, body: _Rewind, first: bytes, result: ParseResult) -> pa.Table:
        head_line = first.split(b"\n", 1)[0]
        delim = "\t" if head_line.count(b"\t") > head_line.count(b",") else ","
        reader = pacsv.open_csv(
            body,
            read_options=pacsv.ReadOptions(block_size=4 << 20),
            parse_options=pacsv.ParseOptions(delimiter=delim, invalid_row_handler=lambda _row: "skip"),
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

    def __iter__(self):  # noqa: ANN204
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
