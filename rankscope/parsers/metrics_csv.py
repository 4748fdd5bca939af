"""Per-step metrics files (CSV/TSV with a header, or JSON lines) → ``MetricsTable``."""

from __future__ import annotations

import io
import json
import re
from typing import Any, BinaryIO

from .._lazy import LazyModule, lazy_compile, lazy_module
from ..detect import Head, Recognizer, host_from_name, rank_from_name
from ..metrics import (
    _GPU_WIDE,
    _WANDB_GPU,
    MAX_ROWS,
    MetricsTable,
    _key,
    looks_like_metrics_header,
    normalise_columns,
)
from ..model import ParseResult
from . import ParseError, Progress, register_parser

np = lazy_module("numpy")

pa = LazyModule("pyarrow")
pacsv = LazyModule("pyarrow.csv")
pq = LazyModule("pyarrow.parquet")

MAX_BYTES = 256 << 20
MAX_JSONL_RAW = 64 << 20  # raw JSON-lines text kept for evidence up to this size
_WIDE = lazy_compile(
    r"^(?:(?P<m1>.+?)[\s_./:-]*(?<![A-Za-z])rank[\s_-]?(?P<r1>\d+)"
    r"|rank[\s_-]?(?P<r2>\d+)[\s_./:-]+(?P<m2>.+))$",
    re.IGNORECASE,
)


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


def _text_of(lines: tuple[np.ndarray, np.ndarray, np.ndarray, bytes], line: int) -> str | None:
    numbers, starts, ends, data = lines
    i = int(np.searchsorted(numbers, line))
    if i >= numbers.size or numbers[i] != line:
        return None
    return data[starts[i] : ends[i]].decode("utf-8", errors="replace")


def _sample(
    lines: tuple[np.ndarray, np.ndarray, np.ndarray, bytes], row: int, table: pa.Table
) -> dict[str, Any]:
    line = int(table.column("line")[row].as_py())
    step = table.column("step")[row].as_py() if "step" in table.column_names else None
    return {"line": line, "text": _text_of(lines, line) or "", "step": step}


# raw rows kept per file as evidence: per rank evenly spaced rows plus every extreme
MAX_RAW_ROWS = 20_000
_EXTREME_COLS = (
    "step_time",
    "compute_time",
    "comm_time",
    "loss",
    "grad_norm",
    "throughput",
    "mem_allocated",
    "mem_reserved",
    "mem_peak",
)


def _raw_rows(
    table: pa.Table, lines: tuple[np.ndarray, np.ndarray, np.ndarray, bytes]
) -> dict[str, str]:
    """{line: raw text} for the rows a metric finding can quote, bounded by ``MAX_RAW_ROWS``.

    Per rank: its first and last rows, evenly spaced rows between them, the rows of each
    column's minimum and maximum, and the first non-finite/null loss after a finite one.
    Analyzers quote the kept row nearest to the one they computed on (``_rc.row_event``).
    """
    n = table.num_rows
    if n == 0 or "line" not in table.column_names:
        return {}
    line_col = table.column("line").to_numpy(zero_copy_only=False)
    ranks = (
        np.nan_to_num(table.column("rank").to_numpy(zero_copy_only=False).astype(float), nan=-1)
        if "rank" in table.column_names
        else np.zeros(n)
    )
    order = np.argsort(ranks, kind="stable")
    groups = np.split(order, np.flatnonzero(np.diff(ranks[order])) + 1)
    per_rank = max(8, min(64, MAX_RAW_ROWS // max(1, len(groups)) - 2 * len(_EXTREME_COLS) - 3))
    cols = {
        c: table.column(c).to_numpy(zero_copy_only=False).astype(float)
        for c in _EXTREME_COLS
        if c in table.column_names
    }
    keep: set[int] = set()
    for idx in groups:
        if idx.size <= per_rank:
            keep.update(int(i) for i in idx)
        else:
            keep.update(int(idx[int(j)]) for j in np.linspace(0, idx.size - 1, per_rank))
        for c, v in cols.items():
            vv = v[idx]
            ok = np.isfinite(vv)
            if ok.any():
                keep.add(int(idx[ok][np.argmax(vv[ok])]))
                keep.add(int(idx[ok][np.argmin(vv[ok])]))
            if c == "loss" and ok.any() and not ok.all():
                bad = np.flatnonzero(~ok)
                bad = bad[bad > np.flatnonzero(ok)[0]]
                if bad.size:
                    keep.add(int(idx[bad[0]]))
        if len(keep) >= MAX_RAW_ROWS:
            break
    out: dict[str, str] = {}
    for i in sorted(keep)[:MAX_RAW_ROWS]:
        ln = int(line_col[i])
        text = _text_of(lines, ln)
        if text is not None:
            out[str(ln)] = text
    return out


def _samples(
    table: pa.Table, lines: tuple[np.ndarray, np.ndarray, np.ndarray, bytes]
) -> dict[str, Any]:
    """Raw rows kept as evidence, per rank: first, last, slowest, most typical, first NaN loss."""
    n = table.num_rows
    if n == 0 or "line" not in table.column_names:
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


def _is_parquet(h: Head) -> bool:
    """Parquet per-step metrics (magic ``PAR1``)."""
    return h.head[:4] == b"PAR1" and (h.base.endswith((".parquet", ".pq")) or "metric" in h.base)


def _is_metrics_table(h: Head) -> bool:
    if not (h.base.endswith((".csv", ".tsv", ".jsonl", ".ndjson")) or "metrics" in h.base):
        return False
    text = h.text
    if looks_like_metrics_header(text.split("\n", 1)[0]):
        return True
    # JSON lines whose first record is not a step (a run header)
    return text.lstrip().startswith("{") and any(
        looks_like_metrics_header(ln) for ln in text.split("\n", 8)[1:8]
    )


class MetricsParser:
    name = "metrics"
    kinds = ("metrics",)
    recognizers = (
        Recognizer("metrics", 15, _is_parquet),  # binary: before the text/binary test
        Recognizer("metrics", 30, _is_metrics_table),
    )

    def parse(self, stream: BinaryIO, result: ParseResult, progress: Progress | None) -> None:
        first = stream.read(1 << 16)
        body = _Rewind(first, stream)
        lines: tuple[np.ndarray, np.ndarray, np.ndarray, bytes] | None = None
        if first[:4] == b"PAR1":
            table = self._parquet(body, result)
            result.facts["metrics_format"] = "parquet"
        elif first.lstrip()[:1] == b"{":
            table, lines = self._jsonl(body, result)
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
        table = _tensorboard_value(table, result.name)
        table = _pivot_long(table, result)
        table = _melt_wide(table, result)
        table = _melt_gpus(table, result)
        table, notes = normalise_columns(table)
        meta = table.schema.metadata or {}
        result.facts["metrics_unplaced"] = json.loads(meta.get(b"unplaced", b"[]"))
        result.facts["metrics_placed"] = json.loads(meta.get(b"placed", b"{}"))
        for n in notes:
            if not n.startswith("unplaced column"):
                result.warn(n)
        if result.facts["metrics_unplaced"]:
            shown = ", ".join(result.facts["metrics_unplaced"][:12])
            result.warn(f"columns not placed on any known measure: {shown}")
        if "step" not in table.column_names and not (
            "time" in table.column_names and set(table.column_names) & _TELEMETRY
        ):
            raise ParseError(
                "metrics file without a step/iteration column (or a time column with GPU telemetry)"
            )
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
            result.facts["metrics_rows"] = _raw_rows(table, lines)

    def _parquet(self, body: _Rewind, result: ParseResult) -> pa.Table:
        """Row groups streamed in batches; a non-seekable stream is spooled to a temp file."""
        import tempfile  # here: it brings shutil, bz2, lzma and random, which a text log never needs

        with tempfile.SpooledTemporaryFile(max_size=32 << 20) as spool:
            size = 0
            while True:
                chunk = body.read(4 << 20)
                if not chunk:
                    break
                size += len(chunk)
                spool.write(chunk)
            spool.seek(0)
            result.bytes = size
            try:
                pf = pq.ParquetFile(spool)
            except (pa.ArrowInvalid, OSError) as exc:
                raise ParseError(f"not a readable Parquet file: {exc}") from None
            batches = _capped(pf.iter_batches(batch_size=65536), result)
            table = pa.Table.from_batches(batches, schema=pf.schema_arrow)
        # Parquet has no text lines: a row is addressed by its 1-based row number
        return table.append_column("_line", pa.array(np.arange(1, table.num_rows + 1), pa.int64()))

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
        return pa.Table.from_batches(_capped(reader, result), schema=reader.schema)

    def _jsonl(
        self, body: _Rewind, result: ParseResult
    ) -> tuple[pa.Table, tuple[np.ndarray, np.ndarray, np.ndarray, bytes] | None]:
        cols: dict[str, list[Any]] = {}
        n = 0
        bad = 0
        line_no = 0
        row_lines: list[int] = []
        raw_rows: list[bytes] | None = []  # dropped past MAX_JSONL_RAW bytes
        raw_bytes = 0
        for raw in body:
            line_no += 1
            text = raw.rstrip(b"\r")
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
            row_lines.append(line_no)
            if raw_rows is not None:
                raw_rows.append(text)
                raw_bytes += len(text)
                if raw_bytes > MAX_JSONL_RAW:
                    raw_rows = None
                    result.warn("large JSON-lines metrics: evidence lists row values")
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
        out = _arrow_columns(cols)
        out["_line"] = pa.array(row_lines, pa.int64())
        lines = None
        if raw_rows is not None and raw_rows:
            lens = np.array([len(r) for r in raw_rows], dtype=np.int64)
            ends = np.cumsum(lens + 1) - 1
            starts = ends - lens
            # index 0 stands for a header (none in JSON lines); _samples/_raw_rows use line numbers
            numbers = np.concatenate(([0], np.array(row_lines, dtype=np.int64)))
            lines = (
                numbers,
                np.concatenate(([0], starts)),
                np.concatenate(([0], ends)),
                b"\n".join(raw_rows),
            )
        return pa.table(out), lines


_TELEMETRY = {"gpu_temp", "sm_clock", "power", "gpu_util", "throttle", "straggler_score"}
_LONG_KEY = ("key", "metric", "metric_name", "name", "tag", "field", "field_name", "measure")


def _capped(batches: Any, result: ParseResult) -> list[Any]:
    """Record batches read until ``MAX_ROWS`` rows are in (the cut is warned about)."""
    out = []
    rows = 0
    for batch in batches:
        out.append(batch)
        rows += batch.num_rows
        if rows >= MAX_ROWS:
            result.warn(f"metrics cut at {MAX_ROWS} rows")
            break
    return out


def _arrow_columns(cols: dict[str, list[Any]]) -> dict[str, Any]:
    """Python columns as Arrow arrays; a column of mixed types is kept as text."""
    out = {}
    for n, v in cols.items():
        try:
            out[n] = pa.array(v)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            out[n] = pa.array([None if x is None else str(x) for x in v], pa.string())
    return out


def _tensorboard_value(table: pa.Table, name: str) -> pa.Table:
    """TensorBoard's scalar CSV (``Wall time,Step,Value``) names its measure only in the
    file name (``run-x-tag-train_loss.csv``): the ``Value`` column takes that name."""
    keys = {c.strip().lower(): c for c in table.column_names}
    if "value" not in keys or "step" not in keys or len(keys) > 4:
        return table
    base = re.sub(r"\.(csv|tsv|json|jsonl)$", "", name.rsplit("/", 1)[-1], flags=re.I)
    tag = base.split("-tag-", 1)[1] if "-tag-" in base else base
    return table.rename_columns([tag if c == keys["value"] else c for c in table.column_names])


def _pivot_long(table: pa.Table, result: ParseResult) -> pa.Table:
    """Long exports — one row per (measure, step): MLflow's ``key,value,step,timestamp``,
    Prometheus/DCGM ``__name__,value,Hostname,gpu,timestamp`` — → one column per measure.
    Rows sharing every other column (step, rank, host, gpu, time) become one row; it
    keeps the line of its first record."""
    lower = {c.strip().lower().strip("_"): c for c in table.column_names}
    key = next((lower[k] for k in _LONG_KEY if k in lower), None)
    value = lower.get("value")
    if key is None or value is None or not pa.types.is_string(table.column(key).type):
        return table
    index = [c for c in table.column_names if c not in (key, value, "_line")]
    # a timestamp per record differs slightly between measures of one step: with a step
    # column, the step (and rank/host/gpu) is the row, and the first time is kept
    stepish = [c for c in index if c.strip().lower().strip("_") in ("step", "iteration", "iter")]
    idx_cols = [
        c
        for c in index
        if not (stepish and c.strip().lower().strip("_") in ("timestamp", "time", "wall_time"))
    ]
    keys_l = table.column(key).to_pylist()
    vals = table.column(value).to_pylist()
    lines = table.column("_line").to_pylist() if "_line" in table.column_names else None
    idx_vals = [table.column(c).to_pylist() for c in idx_cols]
    extra = [c for c in index if c not in idx_cols]
    extra_vals = [table.column(c).to_pylist() for c in extra]
    rows: dict[tuple, dict[str, Any]] = {}
    for i, k in enumerate(keys_l):
        if k is None:
            continue
        ident = tuple(v[i] for v in idx_vals)
        row = rows.get(ident)
        if row is None:
            row = rows[ident] = {c: v[i] for c, v in zip(idx_cols, idx_vals, strict=True)}
            row.update({c: v[i] for c, v in zip(extra, extra_vals, strict=True)})
            if lines is not None:
                row["_line"] = lines[i]
        row.setdefault(k, vals[i])
    names = list(
        dict.fromkeys(
            [
                *idx_cols,
                *extra,
                *(["_line"] if lines else []),
                *{k: 0 for k in keys_l if k is not None},
            ]
        )
    )
    cols = {n: [r.get(n) for r in rows.values()] for n in names}
    out = _arrow_columns(cols)
    result.facts["metrics_layout"] = "long"
    return pa.table(out)


def _melt_gpus(table: pa.Table, result: ParseResult) -> pa.Table:
    """W&B system metrics (``system/gpu.3.temp``, ``gpu.3.smClock``: a column per GPU)
    → one row per GPU with a ``gpu`` column."""
    per_gpu: dict[int, dict[str, str]] = {}
    shared: list[str] = []
    for c in table.column_names:
        m = _GPU_WIDE.match(_key(c))
        canonical = _WANDB_GPU.get(m.group(2).replace("_", "")) if m else None
        if m and canonical:
            per_gpu.setdefault(int(m.group(1)), {})[canonical] = c
        else:
            shared.append(c)
    if not per_gpu:
        return table
    parts = []
    for g in sorted(per_gpu):
        cols = {c: table.column(c) for c in shared}
        for canonical, c in per_gpu[g].items():
            cols[canonical] = table.column(c)
        cols["gpu"] = pa.array([g] * table.num_rows, pa.int64())
        parts.append(pa.table(cols))
    result.facts["metrics_layout"] = "wide by GPU"
    return pa.concat_tables(parts, promote_options="permissive")


def _melt_wide(table: pa.Table, result: ParseResult) -> pa.Table:
    """Wide metrics (one row per step, a column per rank: ``step_time_rank3``,
    ``rank3/loss``) → long rows (step, rank, metric…); each long row keeps its file line."""
    if any(c.lower() in ("rank", "global_rank", "rank_id") for c in table.column_names):
        return table
    per_rank: dict[int, dict[str, str]] = {}
    shared: list[str] = []
    for c in table.column_names:
        m = _WIDE.match(c.strip())
        if m and c != "_line":
            r = int(m.group("r1") or m.group("r2"))
            metric = (m.group("m1") or m.group("m2") or "").strip(" _./:-")
            if metric:
                per_rank.setdefault(r, {})[metric] = c
                continue
        shared.append(c)
    if len(per_rank) < 2:
        return table
    if len(per_rank) * table.num_rows > MAX_ROWS:
        result.warn(f"wide metrics cut to {MAX_ROWS} rank-rows")
    parts = []
    budget = MAX_ROWS
    for r in sorted(per_rank):
        if budget <= 0:
            break
        t = table.slice(0, min(table.num_rows, budget))
        cols = {c: t.column(c) for c in shared}
        for metric, c in per_rank[r].items():
            cols[metric] = t.column(c)
        cols["rank"] = pa.array([r] * t.num_rows, pa.int64())
        parts.append(pa.table(cols))
        budget -= t.num_rows
    result.facts["metrics_layout"] = "wide"
    return pa.concat_tables(parts, promote_options="permissive")


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
