"""Per-step metrics as a columnar table (Arrow), with one normalised set of column names.

Input files name their columns many ways (``iteration_time_ms``, ``step_time``,
``elapsed time per iteration (ms)``…); ``normalise_columns`` maps them onto
``CANONICAL`` and converts milliseconds to seconds, so analyzers read one shape.
Stored with ``MetricsTable.write`` as Arrow IPC, never as JSON.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass
from typing import Any, BinaryIO

from ._lazy import LazyModule, lazy_compile

pa = LazyModule("pyarrow")
pc = LazyModule("pyarrow.compute")
ipc = LazyModule("pyarrow.ipc")
np = LazyModule("numpy")


# canonical column → pyarrow type name (names, not types: building a pyarrow type imports
# pyarrow, ~0.2 s that a job of text logs alone should not pay)
CANONICAL: dict[str, str] = {
    "rank": "int64",
    "step": "int64",
    "host": "string",
    "gpu": "int64",  # device index on its host (nvidia-smi ``index``, DCGM ``gpu``)
    "time": "string",  # ISO-8601; a zoned or epoch time is converted to UTC
    "step_time": "float64",  # seconds
    "compute_time": "float64",  # seconds (forward + backward when only those are given)
    "comm_time": "float64",  # seconds (the sum of the collective timers given)
    "data_time": "float64",  # seconds waiting for the next batch
    "forward_time": "float64",  # seconds
    "backward_time": "float64",  # seconds, without the gradient reduction
    "loss": "float64",
    "throughput": "float64",  # tokens or samples per second, as given
    "grad_norm": "float64",
    "mem_allocated": "float64",  # GiB
    "mem_reserved": "float64",  # GiB (allocator reserved / cached / device memory used)
    "mem_peak": "float64",  # GiB (max_memory_allocated)
    "gpu_temp": "float64",  # °C
    "sm_clock": "float64",  # MHz
    "power": "float64",  # W
    "power_limit": "float64",  # W
    "gpu_util": "float64",  # %
    "throttle": "float64",  # NVML clocks-event-reason bit mask
    "straggler_score": "float64",  # relative performance, 1 = the peers' median
    "line": "int64",  # 1-based line of the row in its file
}


def canonical_type(name: str) -> pa.DataType:
    return getattr(pa, CANONICAL[name])()


UNITS: dict[str, str] = {
    "step_time": "s",
    "compute_time": "s",
    "comm_time": "s",
    "data_time": "s",
    "forward_time": "s",
    "backward_time": "s",
    "mem_allocated": "GiB",
    "mem_reserved": "GiB",
    "mem_peak": "GiB",
    "gpu_temp": "°C",
    "sm_clock": "MHz",
    "power": "W",
    "power_limit": "W",
    "gpu_util": "%",
}


@dataclass(frozen=True)
class Alias:
    canonical: str
    scale: float = 1.0
    part: bool = False  # one part of a sum (Megatron's several collective timers)
    source: str = ""  # the exporter that writes this name


# alias (lower-cased, non-alphanumerics collapsed to "_") → Alias
_ALIASES: dict[str, Alias] = {}


def _alias(canonical: str, scale: float, *names: str, part: bool = False, source: str = "") -> None:
    for n in names:
        _ALIASES[n] = Alias(canonical, scale, part, source)


# Sources of the names below: W&B run history exports (``_step``, ``_timestamp``,
# ``system/gpu.N.temp|smClock|powerWatts|enforcedPowerLimitWatts|gpu``), MLflow metric
# history (``key,value,step,timestamp`` in epoch ms), TensorBoard scalar CSV
# (``Wall time,Step,Value``), Megatron-LM timers (``forward-backward``,
# ``forward-compute``, ``backward-compute``, ``grads-all-reduce``, ``batch-generator``;
# ms in the log, ``<name>-time`` in s in TensorBoard), DeepSpeed's monitor
# (``Train/Samples/elapsed_time_ms_forward|backward_inner|backward_allreduce``) and
# wall-clock breakdown (``fwd_microstep``, ``bwd_inner_microstep``,
# ``bwd_allreduce_microstep``, ms), NeMo (``train_step_timing in s``), NVRx straggler
# reports (relative GPU performance scores), DCGM fields (``DCGM_FI_DEV_GPU_TEMP`` °C,
# ``DCGM_FI_DEV_SM_CLOCK`` MHz, ``DCGM_FI_DEV_POWER_USAGE`` W, ``DCGM_FI_DEV_FB_USED``
# MiB, ``DCGM_FI_PROF_*`` ratios 0-1) and nvidia-smi ``--query-gpu`` names
# (``temperature.gpu``, ``clocks.sm [MHz]``, ``power.draw [W]``, ``memory.used [MiB]``).
_alias("line", 1, "line", "_line")
_alias(
    "rank", 1, "rank", "global_rank", "rank_id", "worker", "gpu_rank", "process_rank", "proc_rank"
)
_alias(
    "step",
    1,
    "step",
    "_step",
    "iteration",
    "iter",
    "iters",
    "global_step",
    "trainer_global_step",
    "train_global_step",
    "it",
    "step_num",
    "iteration_number",
    "consumed_steps",
)
_alias(
    "host", 1, "host", "hostname", "node", "node_name", "nodename", "slurmd_nodename", "instance"
)
_alias("gpu", 1, "gpu", "gpu_index", "gpu_id", "index", "device_index", "local_rank", "device")
_alias("gpu", 1, "dcgm_fi_dev_minor_number", "minor_number")
_alias(
    "time",
    1,
    "time",
    "timestamp",
    "ts",
    "wall_time",
    "walltime",
    "datetime",
    "date",
    "_timestamp",
    "time_utc",
)
_alias(
    "step_time",
    1,
    "step_time",
    "iteration_time",
    "iter_time",
    "batch_time",
    "time_per_step",
    "time_per_iteration",
    "step_duration",
    "train_step_time",
    "train_step_timing",
    "train_step_timing_in_s",
    "elapsed_time_per_iteration",
    "iteration_time_s",
    "seconds_per_step",
    "sec_per_iter",
    "s_it",
    source="generic, NeMo, Megatron TensorBoard",
)
_alias("step_time", 1e-3, "elapsed_time_per_iteration_ms", "step_ms", "iter_ms", "iteration_ms")
_alias("compute_time", 1, "compute_time", "compute", "fwd_bwd_time", "fwd_bwd", "gpu_time")
_alias(
    "compute_time",
    1,
    "forward_backward",
    "forward_backward_time",
    source="Megatron forward-backward timer",
)
_alias("compute_time", 1e-3, "forward_backward_ms")
_alias(
    "forward_time",
    1,
    "forward_time",
    "forward_compute",
    "forward_compute_time",
    "fwd_time",
    "fwd",
    "forward",
)
_alias(
    "forward_time",
    1e-3,
    "elapsed_time_ms_forward",
    "fwd_microstep",
    source="DeepSpeed (ms)",
)
_alias(
    "backward_time", 1, "backward_time", "backward_compute", "backward_compute_time", "bwd_inner"
)
_alias(
    "backward_time",
    1e-3,
    "elapsed_time_ms_backward_inner",
    "bwd_inner_microstep",
    source="DeepSpeed (ms)",
)
_alias(
    "comm_time",
    1,
    "comm_time",
    "comm",
    "communication_time",
    "collective_time",
    "nccl_time",
    "comm_wait",
    "allreduce_time",
    "all_reduce_time",
    "allreduce",
    "all_reduce",
    "bwd_allreduce",
)
_alias(
    "comm_time",
    1,
    "grads_all_reduce",
    "grads_all_reduce_time",
    "grads_reduce_scatter",
    "grads_reduce_scatter_time",
    "params_all_gather",
    "params_all_gather_time",
    part=True,
    source="Megatron collective timers (summed)",
)
_alias(
    "comm_time",
    1e-3,
    "elapsed_time_ms_backward_allreduce",
    "bwd_allreduce_microstep",
    source="DeepSpeed (ms)",
)
_alias(
    "data_time",
    1,
    "data_time",
    "data_wait",
    "data_wait_time",
    "dataloader_time",
    "data_loading_time",
    "data_load_time",
    "batch_generator",
    "batch_generator_time",
    "get_batch",
    "get_batch_time",
    "input_wait",
    "io_wait_time",
    source="generic, Megatron batch-generator timer",
)
_alias("loss", 1, "loss", "lm_loss", "train_loss", "reduced_train_loss", "train_loss_step")
_alias("loss", 1, "training_loss", "loss_value")
_alias(
    "throughput",
    1,
    "throughput",
    "tokens_per_sec",
    "tokens_per_second",
    "tokens_per_sec_per_gpu",
    "tokens_per_second_per_gpu",
    "tok_s",
    "tokens_s",
    "samples_per_sec",
    "samples_per_second",
    "train_samples_per_second",
    "samples_s",
    "it_s",
    "iters_per_sec",
    "iterations_per_second",
    "tflops",
    "tflops_per_gpu",
    "throughput_per_gpu",
)
_alias("grad_norm", 1, "grad_norm", "gradient_norm", "global_grad_norm", "total_grad_norm")
_alias("mem_allocated", 1, "mem_allocated", "memory_allocated", "max_memory")
_alias(
    "mem_allocated",
    1,
    "allocated",
    "cuda_memory_allocated",
    "torch_cuda_memory_allocated",
    "gpu_mem_allocated",
)
_alias(
    "mem_reserved",
    1,
    "mem_reserved",
    "memory_reserved",
    "reserved",
    "cuda_memory_reserved",
    "torch_cuda_memory_reserved",
    "gpu_mem_reserved",
    "memory_cached",
    "mem_cached",
    "max_memory_reserved",
)
_alias(
    "mem_reserved",
    1 / 1024,
    "dcgm_fi_dev_fb_used",
    "memory_used",
    "fb_used",
    source="DCGM / nvidia-smi device memory used (MiB)",
)
_alias(
    "mem_peak",
    1,
    "mem_peak",
    "peak_memory",
    "peak_mem",
    "max_memory_allocated",
    "max_mem_allocated",
    "max_allocated",
)
_alias(
    "gpu_temp",
    1,
    "dcgm_fi_dev_gpu_temp",
    "temperature_gpu",
    "gpu_temp",
    "gpu_temperature",
    "temp",
    "temperature",
    "nv_temp",
)
_alias(
    "sm_clock",
    1,
    "dcgm_fi_dev_sm_clock",
    "clocks_sm",
    "clocks_current_sm",
    "sm_clock",
    "smclock",
    "clock_sm",
    "sm_clk",
    "smclk",
    "nv_sm_clock_report",
)
_alias(
    "power",
    1,
    "dcgm_fi_dev_power_usage",
    "power_draw",
    "power_draw_instant",
    "power_draw_average",
    "power_usage",
    "power",
    "powerwatts",
    "gpu_power",
)
_alias(
    "power_limit",
    1,
    "dcgm_fi_dev_power_mgmt_limit",
    "dcgm_fi_dev_enforced_power_limit",
    "power_limit",
    "enforced_power_limit",
    "enforcedpowerlimitwatts",
    "power_management_limit",
)
_alias(
    "gpu_util",
    1,
    "dcgm_fi_dev_gpu_util",
    "utilization_gpu",
    "gpu_util",
    "gpu_utilization",
    "util",
)
_alias(
    "gpu_util",
    100,
    "dcgm_fi_prof_gr_engine_active",
    "dcgm_fi_prof_sm_active",
    source="DCGM profiling ratio 0-1 → %",
)
_alias(
    "throttle",
    1,
    "dcgm_fi_dev_clock_throttle_reasons",
    "dcgm_fi_dev_clocks_event_reasons",
    "clocks_throttle_reasons_active",
    "clocks_event_reasons_active",
    "throttle_reasons",
    "clock_throttle_reasons",
)
# nvidia-smi's per-reason flags ("Active"/"Not Active") become the NVML bits they stand for
for _name, _bit in (
    ("sw_power_cap", 0x4),
    ("hw_slowdown", 0x8),
    ("sw_thermal_slowdown", 0x20),
    ("hw_thermal_slowdown", 0x40),
    ("hw_power_brake_slowdown", 0x80),
):
    _alias(
        "throttle",
        _bit,
        f"clocks_throttle_reasons_{_name}",
        f"clocks_event_reasons_{_name}",
        part=True,
        source="nvidia-smi clocks_event_reasons.* flags",
    )
_alias(
    "straggler_score",
    1,
    "straggler_score",
    "relative_perf_score",
    "gpu_relative_perf_score",
    "relative_gpu_perf_score",
    "gpu_relative_perf",
    "relative_perf",
    "perf_score",
    source="NVRx straggler report",
)
# NVML throttle bits that mean "slowed by heat or power" (nvml.h clocksEventReasons)
THROTTLE_THERMAL = 0x20 | 0x40 | 0x08
THROTTLE_POWER = 0x04 | 0x80

_TIME_CANON = {
    "step_time",
    "compute_time",
    "comm_time",
    "data_time",
    "forward_time",
    "backward_time",
}
_MEMORY = ("mem_allocated", "mem_reserved", "mem_peak")
# a unit written into the name (``_ms``, ``[MiB]``, ``(ms)``) → scale for time and memory columns
_TIME_UNITS = {
    "ms": 1e-3,
    "msec": 1e-3,
    "milliseconds": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "secs": 1.0,
    "seconds": 1.0,
    "in_s": 1.0,
    "us": 1e-6,
    "usec": 1e-6,
    "ns": 1e-9,
}
_MEM_UNITS = {"gb": 1.0, "gib": 1.0, "mb": 1 / 1024, "mib": 1 / 1024, "bytes": 2**-30, "b": 2**-30}
_OTHER_UNITS: dict[str, set[str]] = {
    "c": {"gpu_temp"},
    "celsius": {"gpu_temp"},
    "mhz": {"sm_clock"},
    "w": {"power", "power_limit"},
    "watts": {"power", "power_limit"},
    "pct": {"gpu_util"},
    "percent": {"gpu_util"},
}
_UNIT_SUFFIX = lazy_compile(
    r"^(?P<base>.+?)_(?P<unit>"
    + "|".join(
        sorted({*_TIME_UNITS, *_MEM_UNITS, *_OTHER_UNITS, "mhz", "w"}, key=len, reverse=True)
    )
    + r")$"
)

_NON_ALNUM = lazy_compile(r"[^a-z0-9]+")
MAX_ROWS = 2_000_000


def _key(name: str) -> str:
    return _NON_ALNUM.sub("_", name.strip().lower()).strip("_")


# names too generic alone, a measure only with a unit: "data_ms", "dataloader_s", "wait_ms"
_WITH_UNIT_ONLY: dict[str, Alias] = {
    n: Alias("data_time")
    for n in ("data", "dataloader", "data_loader", "loader", "input", "wait", "data_loading")
}


def _lookup(key: str) -> Alias | None:
    a = _ALIASES.get(key)
    if a is not None:
        return a
    m = _UNIT_SUFFIX.match(key)
    if not m:
        return None
    base, unit = m.group("base"), m.group("unit")
    a = _ALIASES.get(base) or _WITH_UNIT_ONLY.get(base)
    if a is None:
        return None
    if a.canonical in _TIME_CANON and unit in _TIME_UNITS:
        return Alias(a.canonical, _TIME_UNITS[unit], a.part, a.source)
    if a.canonical in _MEMORY and unit in _MEM_UNITS:
        return Alias(a.canonical, _MEM_UNITS[unit], a.part, a.source)
    if a.canonical in _OTHER_UNITS.get(unit, ()):
        return a
    return None


def place(name: str) -> Alias | None:
    """The canonical column a source column feeds, with the scale to the canonical unit.

    Tries the whole name, then its last path segments (``Train/Samples/…``,
    ``train/loss``, ``system.gpu.0.temp``), each with a unit suffix peeled off."""
    key = _key(name)
    a = _lookup(key)
    if a is not None:
        return a
    segs = [s for s in re.split(r"[/|]", name) if s.strip()]
    for i in range(1, len(segs)):
        a = _lookup(_key("_".join(segs[i:])))
        if a is not None:
            return a
    # "train.loss" / "perf.step_time": the last dotted segment
    if "." in name and not re.search(r"\d\.\d", name):
        return _lookup(_key(name.rsplit(".", 1)[1]))
    return None


# "step_time_rank3" / "rank3_loss" (wide files: a column per rank) name the same measure
_RANK_PART = lazy_compile(r"(?:^|_)rank_?\d+(?:_|$)")


def looks_like_metrics_header(header: str) -> bool:
    """True when a CSV/JSON header names a step (or a time) and a per-step or GPU measure."""
    keys = set()
    for k in re.split(r"[,\t;\"{}:]+", header):
        k = _RANK_PART.sub("", _key(k))
        a = place(k) if k else None
        if a is not None:
            keys.add(a.canonical)
        elif _GPU_WIDE.match(k):
            keys.add("gpu_temp")
    raw = {_key(k) for k in re.split(r"[,\t;\"{}:]+", header)}
    if "value" in raw and raw & {"key", "metric", "metric_name", "name", "tag", "field"}:
        # MLflow / Prometheus long exports: one row per (measure, step or sample time)
        keys.add("loss")
        keys.add("gpu_temp")
    if {"wall_time", "step", "value"} <= raw:
        keys.add("loss")  # TensorBoard scalar CSV: the measure is named by the file
    if "step" not in keys and ("temperature_gpu" in raw or any("ecc_errors" in k for k in raw)):
        return False  # an nvidia-smi --query-gpu log: the nvidia_smi parser reads it
    measures = {"step_time", "comm_time", "compute_time", "data_time", "loss", "throughput"}
    gpu = {"gpu_temp", "sm_clock", "power", "gpu_util", "throttle", "straggler_score"}
    return bool(
        ("step" in keys and keys & (measures | gpu)) or ("time" in keys and len(keys & gpu) >= 1)
    )


# W&B system metrics: "system/gpu.3.temp", "gpu.3.smClock" (a column per GPU)
_GPU_WIDE = lazy_compile(r"^(?:system_)?gpu_(\d+)_([a-z_]+)$")
_WANDB_GPU = {
    "temp": "gpu_temp",
    "smclock": "sm_clock",
    "powerwatts": "power",
    "enforcedpowerlimitwatts": "power_limit",
    "gpu": "gpu_util",
}


def _looks_like_bytes(col: pa.ChunkedArray) -> bool:
    """GPU memory in GiB is below 10,000; a median above 1e6 can only be bytes."""
    try:
        med = pc.approximate_median(col).as_py()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return med is not None and med > 1e6


_NUMBER = r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"


def _numeric(col: pa.ChunkedArray) -> pa.ChunkedArray:
    """Numbers from a column: as is, or from text such as ``250.31 W``, ``1410 MHz``,
    ``0x0000000000000040`` (a bit mask), ``Active``/``Not Active``, ``[N/A]`` (null)."""
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
        return pc.cast(col, pa.float64(), safe=False)
    text = pc.utf8_lower(pc.utf8_trim_whitespace(col))
    if pc.any(pc.starts_with(text, "0x")).as_py():
        vals = [int(v, 16) if v and v.startswith("0x") else None for v in text.to_pylist()]
        return pa.chunked_array([pa.array(vals, pa.float64())])
    if pc.any(pc.match_substring_regex(text, r"^(?:not )?active$")).as_py():
        return pc.cast(pc.equal(text, "active"), pa.float64())
    got = pc.extract_regex(text, _NUMBER.replace("(", "(?P<v>", 1))
    return pc.cast(pc.struct_field(got, [0]), pa.float64())


def _seconds(text: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.utf8_slice_codeunits(text, 0, 19)  # arrow's %S carries the fraction


def _iso_time(col: pa.ChunkedArray) -> tuple[pa.ChunkedArray, str | None]:
    """Times as ISO text; epoch numbers (s/ms/µs/ns) and zoned text → UTC. Naive text stays."""
    if pa.types.is_integer(col.type) or pa.types.is_floating(col.type):
        v = pc.cast(col, pa.float64())
        med = pc.approximate_median(v).as_py() or 0
        scale = 1.0 if med < 1e11 else 1e-3 if med < 1e14 else 1e-6 if med < 1e17 else 1e-9
        if med < 1e8:  # seconds since the start (a run time), not a clock
            raise ValueError("seconds since the start, not a clock time")
        us = pc.cast(pc.multiply(v, scale * 1e6), pa.int64(), safe=False)
        ts = pc.cast(us, pa.timestamp("us"))
        return _seconds(pc.strftime(ts, format="%Y-%m-%dT%H:%M:%S")), "epoch→UTC"
    if pa.types.is_timestamp(col.type):
        return _seconds(pc.strftime(col, format="%Y-%m-%dT%H:%M:%S")), None
    text = pc.cast(col, pa.string())
    fixed = pc.replace_substring_regex(text, r"^(\d{4})/(\d\d)/(\d\d)", r"\1-\2-\3")
    for tz, note in ((pa.timestamp("us", tz="UTC"), "zoned→UTC"), (pa.timestamp("us"), None)):
        try:
            ts = pc.cast(fixed, tz)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
        if tz.tz:
            ts = pc.cast(ts, pa.timestamp("us"))  # the UTC wall clock
        return _seconds(pc.strftime(ts, format="%Y-%m-%dT%H:%M:%S")), note
    return text, None


def normalise_columns(table: pa.Table) -> tuple[pa.Table, list[str]]:
    """Rename/convert known columns. Returns (table, notes).

    A column no alias places is named in a note ``unplaced column …`` (and in
    ``table.schema.metadata[b"unplaced"]``) instead of being dropped silently."""
    cols: dict[str, pa.ChunkedArray] = {}
    parts: dict[str, list[pa.ChunkedArray]] = {}
    notes: list[str] = []
    unplaced: list[str] = []
    placed: dict[str, str] = {}
    for name in table.column_names:
        target = place(name)
        if target is None:
            if name not in ("_file",):
                unplaced.append(name)
            continue
        canonical, scale = target.canonical, target.scale
        if canonical in cols and not (target.part and canonical in parts):
            notes.append(
                f"column {name!r} not used: {canonical} already read from {placed[canonical]!r}"
            )
            continue
        col = table.column(name)
        want = canonical_type(canonical)
        try:
            if canonical == "time":
                col, how = _iso_time(col)
                if how:
                    notes.append(f"column {name!r}: times read as {how}")
            elif canonical == "gpu" and not (
                pa.types.is_integer(col.type) or pa.types.is_floating(col.type)
            ):
                # "cuda:3", "nvidia3", "GPU 3" → 3
                got = pc.extract_regex(pc.cast(col, pa.string()), r"(?P<v>\d+)\s*$")
                col = pc.cast(pc.struct_field(got, [0]), pa.int64())
            elif canonical == "host":
                col = pc.replace_substring_regex(pc.cast(col, pa.string()), r":\d+$", "")
            elif pa.types.is_string(want):
                col = pc.cast(col, pa.string())
            else:
                col = _numeric(col)
                if scale != 1:
                    col = pc.multiply(col, scale)
                elif canonical in _MEMORY and _looks_like_bytes(col):
                    # a unit-less memory column (torch.cuda.memory_reserved()) holds bytes
                    col = pc.multiply(col, 2**-30)
                    notes.append(f"column {name!r} read as bytes and converted to GiB")
                col = pc.cast(col, want, safe=False)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, ValueError) as exc:
            notes.append(f"column {name!r} not understood as {canonical}: {exc}")
            unplaced.append(name)
            continue
        if target.part:
            parts.setdefault(canonical, []).append(col)
            total = parts[canonical][0]
            for c in parts[canonical][1:]:
                total = pc.add(pc.fill_null(total, 0), pc.fill_null(c, 0))
            cols[canonical] = total
            placed[canonical] = f"{placed.get(canonical, '')}+{name}".lstrip("+")
        else:
            cols[canonical] = col
            placed[canonical] = name
    if (
        "gpu" in cols
        and _key(placed["gpu"]) == "index"
        and pc.count_distinct(cols["gpu"]).as_py() > 64
    ):
        # a data frame's row index, not nvidia-smi's GPU index
        del cols["gpu"]
        unplaced.append(placed.pop("gpu"))
    if "compute_time" not in cols and "forward_time" in cols and "backward_time" in cols:
        cols["compute_time"] = pc.add(cols["forward_time"], cols["backward_time"])
        placed["compute_time"] = f"{placed['forward_time']}+{placed['backward_time']}"
    for name in unplaced:
        notes.append(f"unplaced column {name!r}")
    out = pa.table(cols) if cols else pa.table({})
    meta = {b"unplaced": json.dumps(unplaced).encode(), b"placed": json.dumps(placed).encode()}
    return out.replace_schema_metadata(meta), notes


# the Arrow types a table given as plain columns may have (``MetricsTable(columns=…)``)
_COLUMN_TYPES = frozenset({"int64", "float64", "string"})

Columns = dict[str, tuple[str, list[Any]]]  # name → (type name, values)


class MetricsTable:
    """A thin wrapper around a ``pyarrow.Table`` with canonical column names.

    Given as plain columns (``columns=``: name → type name and values, as a parser reads
    them), the Arrow table is built at its first use: a parse process that reads a log's
    iteration lines hands them to the parent as they are (``pending_columns``), and never
    imports pyarrow (~50-100 ms) for a table only the parent's analysis reads."""

    def __init__(self, table: pa.Table | None = None, *, columns: Columns | None = None) -> None:
        if (table is None) == (columns is None):
            raise ValueError("a MetricsTable is given either a table or columns")
        if columns is not None and not {kind for kind, _ in columns.values()} <= _COLUMN_TYPES:
            raise ValueError(f"column types are {sorted(_COLUMN_TYPES)}")
        self._table = table
        self._columns = columns

    @property
    def table(self) -> pa.Table:
        if self._table is None:
            assert self._columns is not None
            self._table = pa.table(
                {
                    name: pa.array(values, getattr(pa, kind)())
                    for name, (kind, values) in self._columns.items()
                }
            )
            self._columns = None
        return self._table

    @classmethod
    def from_columns(cls, columns: Columns) -> MetricsTable:
        """The table of plain columns, its Arrow table built now (where it will be read)."""
        made = cls(columns=columns)
        made.table  # noqa: B018  (the property builds it)
        return made

    @property
    def pending_columns(self) -> Columns | None:
        """The plain columns, while no Arrow table was built from them."""
        return self._columns

    def __len__(self) -> int:
        if self._columns is not None:
            return len(next(iter(self._columns.values()))[1]) if self._columns else 0
        return self.table.num_rows

    @property
    def columns(self) -> list[str]:
        if self._columns is not None:
            return list(self._columns)
        return list(self.table.column_names)

    def has(self, *names: str) -> bool:
        present = self.columns
        return all(n in present for n in names)

    def column(self, name: str) -> list[Any]:
        return self.table.column(name).to_pylist()

    def numpy(self, name: str) -> Any:
        return self.table.column(name).to_numpy(zero_copy_only=False)

    def valid(self, name: str) -> Any:
        """Which rows of ``name`` are not null, as a numpy bool array. A column without nulls
        is answered without Arrow's compute kernels, whose import costs ~30 ms."""
        col = self.table.column(name)
        if col.null_count == 0:
            return np.ones(len(col), dtype=bool)
        return col.is_valid().to_numpy(zero_copy_only=False)

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
