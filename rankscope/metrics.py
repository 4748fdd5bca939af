"""Per-step metrics as a columnar table (Arrow), with one normalised set of column names.

Input files name their columns many ways (``iteration_time_ms``, ``step_time``,
``elapsed time per iteration (ms)``…); ``normalise_columns`` maps them onto
``CANONICAL`` and converts milliseconds to seconds, so analyzers read one shape.
Stored with ``MetricsTable.write`` as Arrow IPC, never as JSON.
"""

from __future__ import annotations

import io
import re
from typing import Any, BinaryIO

from ._lazy import LazyModule

pa = LazyModule("pyarrow")
pc = LazyModule("pyarrow.compute")
ipc = LazyModule("pyarrow.ipc")


# canonical column → pyarrow type name (names, not types: building a pyarrow type imports
# pyarrow, ~0.2 s that a job of text logs alone should not pay)
CANONICAL: dict[str, str] = {
    "rank": "int64",
    "step": "int64",
    "host": "string",
    "time": "string",
    "step_time": "float64",  # seconds
    "compute_time": "float64",  # seconds
    "comm_time": "float64",  # seconds
    "loss": "float64",
    "throughput": "float64",  # tokens or samples per second, as given
    "grad_norm": "float64",
    "mem_allocated": "float64",  # GiB
    "mem_reserved": "float64",  # GiB (allocator reserved / cached)
    "mem_peak": "float64",  # GiB (max_memory_allocated)
    "line": "int64",  # 1-based line of the row in its file
}


def canonical_type(name: str) -> pa.DataType:
    return getattr(pa, CANONICAL[name])()


# alias (lower-cased, non-alphanumerics collapsed to "_") → (canonical, scale to seconds)
_ALIASES: dict[str, tuple[str, float]] = {}


def _alias(canonical: str, scale: float, *names: str) -> None:
    for n in names:
        _ALIASES[n] = (canonical, scale)


_alias("line", 1, "line", "_line")
_alias("rank", 1, "rank", "global_rank", "rank_id", "worker", "gpu_rank")
_alias("step", 1, "step", "iteration", "iter", "global_step", "trainer_global_step", "it")
_alias("host", 1, "host", "hostname", "node", "node_name", "nodename")
_alias("time", 1, "time", "timestamp", "ts", "wall_time", "datetime", "date")
_alias("step_time", 1, "step_time", "step_time_s", "step_time_sec", "iteration_time", "iter_time")
_alias(
    "step_time",
    1e-3,
    "step_time_ms",
    "iteration_time_ms",
    "iter_time_ms",
    "elapsed_time_per_iteration_ms",
    "train_step_timing_ms",
)
_alias("step_time", 1, "train_step_timing", "train_step_timing_in_s", "train_step_time")
_alias("compute_time", 1, "compute_time", "compute_time_s", "fwd_bwd_time", "compute")
_alias("compute_time", 1e-3, "compute_time_ms", "compute_ms", "forward_backward_ms", "fwd_bwd_ms")
_alias("comm_time", 1, "comm_time", "comm_time_s", "allreduce_time", "all_reduce_time", "comm")
_alias(
    "comm_time",
    1e-3,
    "comm_time_ms",
    "comm_ms",
    "allreduce_ms",
    "allreduce_time_ms",
    "all_reduce_ms",
    "all_reduce_time_ms",
    "grads_all_reduce_ms",
)
_alias("loss", 1, "loss", "lm_loss", "train_loss", "reduced_train_loss", "train_loss_step")
_alias(
    "throughput",
    1,
    "throughput",
    "tokens_per_sec",
    "tokens_per_second",
    "tok_s",
    "samples_per_sec",
    "samples_per_second",
    "tflops",
)
_alias("grad_norm", 1, "grad_norm", "gradient_norm")
_alias("mem_allocated", 1, "mem_allocated", "memory_allocated", "mem_allocated_gb", "max_memory")
_alias(
    "mem_allocated",
    1,
    "mem_allocated_gib",
    "allocated_gb",
    "allocated_gib",
    "memory_allocated_gb",
    "cuda_memory_allocated",
    "torch_cuda_memory_allocated",
    "gpu_mem_allocated",
)
_alias("mem_allocated", 1 / 1024, "mem_allocated_mb", "mem_allocated_mib", "memory_allocated_mb")
_alias("mem_allocated", 2**-30, "mem_allocated_bytes", "allocated_bytes", "memory_allocated_bytes")
_alias(
    "mem_reserved",
    1,
    "mem_reserved",
    "memory_reserved",
    "mem_reserved_gb",
    "mem_reserved_gib",
    "reserved_gb",
    "reserved_gib",
    "memory_reserved_gb",
    "cuda_memory_reserved",
    "torch_cuda_memory_reserved",
    "gpu_mem_reserved",
    "memory_cached",
    "mem_cached",
    "max_memory_reserved",
    "max_memory_reserved_gb",
)
_alias("mem_reserved", 1 / 1024, "mem_reserved_mb", "mem_reserved_mib", "memory_reserved_mb")
_alias("mem_reserved", 2**-30, "reserved_bytes", "mem_reserved_bytes", "memory_reserved_bytes")
_alias(
    "mem_peak",
    1,
    "mem_peak",
    "peak_memory",
    "peak_mem",
    "mem_peak_gb",
    "peak_memory_gb",
    "peak_mem_gb",
    "max_memory_allocated",
    "max_memory_allocated_gb",
    "max_mem_allocated",
    "max_allocated_gb",
)
_alias("mem_peak", 1 / 1024, "max_memory_allocated_mb", "peak_memory_mb", "mem_peak_mb")
_alias("mem_peak", 2**-30, "max_memory_allocated_bytes", "peak_memory_bytes", "mem_peak_bytes")
_MEMORY = ("mem_allocated", "mem_reserved", "mem_peak")

_NON_ALNUM = re.compile(r"[^a-z0-9]+")
MAX_ROWS = 2_000_000


def _key(name: str) -> str:
    return _NON_ALNUM.sub("_", name.strip().lower()).strip("_")


# "step_time_rank3" / "rank3_loss" (wide files: a column per rank) name the same measure
_RANK_PART = re.compile(r"(?:^|_)rank_?\d+(?:_|$)")


def looks_like_metrics_header(header: str) -> bool:
    """True when a CSV/JSON header names a step and at least one per-step measure."""
    keys = {
        _ALIASES.get(_RANK_PART.sub("", _key(k)), ("", 1))[0]
        for k in re.split(r"[,\t;\"{}:]+", header)
    }
    return "step" in keys and bool(keys & {"step_time", "comm_time", "loss", "throughput"})


def _looks_like_bytes(col: pa.ChunkedArray) -> bool:
    """GPU memory in GiB is below 10,000; a median above 1e6 can only be bytes."""
    try:
        med = pc.approximate_median(col).as_py()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return med is not None and med > 1e6


def normalise_columns(table: pa.Table) -> tuple[pa.Table, list[str]]:
    """Rename/convert known columns; drop the rest. Returns (table, notes)."""
    cols: dict[str, pa.Array] = {}
    notes: list[str] = []
    for name in table.column_names:
        target = _ALIASES.get(_key(name))
        if target is None or target[0] in cols:
            continue
        canonical, scale = target
        col = table.column(name)
        want = canonical_type(canonical)
        try:
            if pa.types.is_string(want):
                col = pc.cast(col, pa.string())
            else:
                col = pc.cast(col, pa.float64(), safe=False)
                if scale != 1:
                    col = pc.multiply(col, scale)
                elif canonical in _MEMORY and _looks_like_bytes(col):
                    # a unit-less memory column (torch.cuda.memory_reserved()) holds bytes
                    col = pc.multiply(col, 2**-30)
                    notes.append(f"column {name!r} read as bytes and converted to GiB")
                col = pc.cast(col, want, safe=False)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            notes.append(f"column {name!r} not understood as {canonical}: {exc}")
            continue
        cols[canonical] = col
    return pa.table(cols) if cols else pa.table({}), notes


class MetricsTable:
    """A thin wrapper around a ``pyarrow.Table`` with canonical column names."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table

    def __len__(self) -> int:
        return self.table.num_rows

    @property
    def columns(self) -> list[str]:
        return list(self.table.column_names)

    def has(self, *names: str) -> bool:
        return all(n in self.table.column_names for n in names)

    def column(self, name: str) -> list[Any]:
        return self.table.column(name).to_pylist()

    def numpy(self, name: str) -> Any:
        return self.table.column(name).to_numpy(zero_copy_only=False)

    def write(self, fp: BinaryIO) -> None:
        """Arrow IPC stream; read back with ``MetricsTable.read``."""
        with ipc.new_stream(fp, self.table.schema) as writer:
            writer.write_table(self.table)

    @classmethod
    def read(cls, fp: BinaryIO) -> MetricsTable:
        return cls(ipc.open_stream(fp).read_all())

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        self.write(buf)
        return buf.getvalue()

    @classmethod
    def concat(cls, tables: list[MetricsTable]) -> MetricsTable | None:
        tables = [t for t in tables if t is not None and len(t)]
        if not tables:
            return None
        names = sorted({c for t in tables for c in t.columns})
        parts = []
        for t in tables:
            cols = {}
            for n in names:
                if n in t.columns:
                    cols[n] = t.table.column(n)
                else:
                    cols[n] = pa.nulls(len(t), canonical_type(n))
            parts.append(pa.table(cols))
        return cls(pa.concat_tables(parts))
