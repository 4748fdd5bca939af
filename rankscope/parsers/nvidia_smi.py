"""nvidia-smi uploads → per-GPU readings: ECC, retired/remapped rows, temperature, power, clocks.

Three shapes are read, in one pass:
- ``nvidia-smi -q`` (``==============NVSMI LOG==============``): sections per
  ``GPU 00000000:18:00.0``; readings by their labels (``DRAM Uncorrectable``,
  ``Double Bit ECC``, ``GPU Current Temp``, ``Power Draw``, ``SM`` clocks, the
  ``Clocks (Event|Throttle) Reasons`` that are ``Active``…);
- the default table (``| NVIDIA-SMI 535…``): ``|   0  NVIDIA H100 … | Bus-Id | ECC |``
  followed by ``| N/A 34C P0 71W / 700W | 4MiB / 81559MiB | …``;
- ``--query-gpu=… --format=csv`` with a header naming the fields.

Each GPU becomes one ``gpu_reading`` event (its first line) whose fields hold
the readings and, under ``lines``, the (line, text) of each reading so a
finding can quote the exact line that shows, e.g., the uncorrectable count.
The host comes from a hostname line, a ``host: …`` prefix or the file name.
"""

from __future__ import annotations

import csv
import re
from typing import Any, BinaryIO

from .._lazy import lazy_compile
from ..detect import Head, Recognizer, host_from_name
from ..model import Event, ParseResult
from . import ParseError, Progress, register_parser
from ._lines import clip, iter_lines

_GPU_HDR = lazy_compile(r"^GPU (?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)\s*$")
_KV = lazy_compile(r"^(?P<k>[A-Za-z][\w /().-]*?)\s*:\s*(?P<v>.*)$")
_TABLE_GPU = lazy_compile(
    r"^\|\s+(?P<i>\d+)\s+(?P<name>.+?)\s+(?:On|Off)\s+\|\s*(?P<bus>[0-9A-Fa-f:.]+)\s+\S+\s+\|\s*(?P<ecc>\S+)\s*\|"
)
_TABLE_USE = lazy_compile(
    r"^\|\s*(?P<fan>\S+)\s+(?P<temp>\d+)C\s+(?P<perf>P\d+)\s+(?:\S+\s+)?(?P<pw>[\d.]+|N/A)W?\s*/\s*(?P<cap>[\d.]+|N/A)W?\s*\|"
    r"\s*(?P<used>\d+)MiB\s*/\s*(?P<total>\d+)MiB\s*\|\s*(?P<util>\d+)%"
)
_NUM = lazy_compile(r"-?\d+(?:\.\d+)?")
# nvidia-smi could not reach a GPU: it is missing from the table/-q/CSV that follows
_BUS = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d"
_LOST = lazy_compile(
    rf"Unable to determine the device handle for GPU\s*(?:(?P<bus>{_BUS})|(?P<i>\d+)"
    rf"(?::\s*(?P<bus2>{_BUS}))?)?:?\s*(?P<why>.*)$"
)
# the table's usage row when the driver cannot read the GPU: "| ERR!  ERR!  ERR!  ERR! / ERR! |"
_TABLE_ERR = lazy_compile(r"^\|\s*(?:\S+\s+)?ERR!\s+ERR!")
# a GPU seen several times (nvidia-smi -l, --query-gpu -l, several snapshots) keeps its worst
_WORST_MAX = ("temp_c", "mem_temp_c", "power_w", "ecc_", "retired_", "remapped_", "mem_used_mib")
_FLAGS = (
    "pending_retirement",
    "remap_pending",
    "remap_failure",
    "reset_required",
    "drain_and_reset",
    "sram_threshold_exceeded",
    "lost",
)
_HOST_LINE = lazy_compile(
    r"^(?:=+\s*)?(?:host(?:name)?\s*[:=]\s*|#+\s*)(?P<h>[A-Za-z][\w.-]*\d[\w.-]*)\s*=*\s*$", re.I
)

# -q labels → reading names; values are numbers unless noted
_Q_LABELS = {
    "product name": "name",
    "gpu current temp": "temp_c",
    "gpu slowdown temp": "slowdown_temp_c",
    "gpu shutdown temp": "shutdown_temp_c",
    "gpu max operating temp": "max_operating_temp_c",
    "memory current temp": "mem_temp_c",
    "power draw": "power_w",
    "average power draw": "power_w",
    "instantaneous power draw": "power_w_instant",
    "power limit": "power_limit_w",
    "current power limit": "power_limit_w",
    "enforced power limit": "enforced_power_limit_w",
    "pending page blacklist": "pending_retirement",
    "pending page retirement": "pending_retirement",
    "remapping failure occurred": "remap_failure",
    "minor number": "index",
    "serial number": "serial",
    "gpu t.limit temp": "t_limit_margin_c",  # degrees left below T.Limit (H100+, driver ≥ 530)
    "gpu slowdown t.limit temp": "slowdown_t_limit_c",  # margin at which clocks slow down
    "reset required": "reset_required",
    "drain and reset recommended": "drain_and_reset",
}
_THROTTLE_SECTIONS = ("clocks throttle reasons", "clocks event reasons", "clocks_event_reasons")
_CSV_FIELDS = {
    "index": "index",
    "name": "name",
    "pci.bus_id": "bus",
    "serial": "serial",
    "temperature.gpu": "temp_c",
    "temperature.memory": "mem_temp_c",
    "power.draw": "power_w",
    "power.draw.average": "power_w",
    "power.limit": "power_limit_w",
    "clocks.sm": "sm_clock_mhz",
    "clocks.current.sm": "sm_clock_mhz",
    "clocks.max.sm": "sm_clock_max_mhz",
    "clocks.max.graphics": "gr_clock_max_mhz",
    "clocks.gr": "gr_clock_mhz",
    "memory.total": "mem_total_mib",
    "memory.used": "mem_used_mib",
    "ecc.errors.uncorrected.volatile.total": "ecc_uncorrected_volatile",
    "ecc.errors.uncorrected.aggregate.total": "ecc_uncorrected_aggregate",
    "ecc.errors.corrected.volatile.total": "ecc_corrected_volatile",
    "ecc.errors.corrected.aggregate.total": "ecc_corrected_aggregate",
    "retired_pages.double_bit.count": "retired_dbe",
    "retired_pages.pending": "pending_retirement",
    "remapped_rows.uncorrectable": "remapped_uncorrectable",
    "remapped_rows.pending": "remap_pending",
    "remapped_rows.failure": "remap_failure",
    "clocks_throttle_reasons.hw_slowdown": "throttle_hw_slowdown",
    "clocks_event_reasons.hw_slowdown": "throttle_hw_slowdown",
    "clocks_throttle_reasons.hw_thermal_slowdown": "throttle_hw_thermal",
    "clocks_event_reasons.hw_thermal_slowdown": "throttle_hw_thermal",
    "clocks_throttle_reasons.sw_thermal_slowdown": "throttle_sw_thermal",
    "clocks_event_reasons.sw_thermal_slowdown": "throttle_sw_thermal",
    "clocks_throttle_reasons.sw_power_cap": "throttle_sw_power_cap",
    "clocks_event_reasons.sw_power_cap": "throttle_sw_power_cap",
}
MAX_GPUS = 512


def _num(v: str) -> float | str | None:
    m = _NUM.search(v)
    if m and not v.strip().lower().startswith(("n/a", "[n/a", "not")):
        x = float(m.group(0))
        return int(x) if x.is_integer() else x
    v = v.strip()
    return v or None


class _Gpu:
    def __init__(self, key: str, line: int, text: str) -> None:
        self.key = key
        self.line = line
        self.text = text
        self.r: dict[str, Any] = {}
        self.lines: dict[str, list[Any]] = {}

    def set(self, name: str, value: Any, line: int, text: str) -> None:
        self.r[name] = value
        self.lines[name] = [line, clip(text)]


def _has_query_header(h: Head) -> bool:
    return "temperature.gpu" in h.first_line or "ecc.errors." in h.first_line


_UNREACHABLE = "Unable to determine the device handle for GPU"
_SMI_LITERALS = ("NVIDIA-SMI", "==============NVSMI LOG", _UNREACHABLE)


def _is_smi_output(h: Head) -> bool:
    return (
        h.has("NVIDIA-SMI")
        or h.has("==============NVSMI LOG")
        # nvidia-smi's whole output when it cannot reach any GPU
        or (h.has(_UNREACHABLE) and h.text.lstrip().startswith(_UNREACHABLE))
    )


def _lost_gpu(s: str, line_no: int, text: str) -> _Gpu | None:
    """``Unable to determine the device handle for GPU …``: a GPU nvidia-smi could not reach."""
    ml = _LOST.search(s)
    if not ml:
        return None
    bus = ml.group("bus") or ml.group("bus2")
    g = _Gpu(bus or f"lost-{ml.group('i')}", line_no, text)
    if ml.group("i") is not None:
        g.r["index"] = int(ml.group("i"))
    if bus:
        g.r["bus"] = bus
    g.set("lost", (ml.group("why") or "unreachable").strip()[:120], line_no, text)
    return g


def _is_csv_header(s: str) -> bool:
    return "," in s and (
        "temperature.gpu" in s or "ecc.errors" in s or "pci.bus_id" in s or s.startswith("index,")
    )


def _sensor_errors(s: str) -> str:
    """The sensors of a table usage row that read ``ERR!`` (``|ERR!   54C    P2   ERR! / 225W |``)."""
    cell = s.split("|")[1].split()
    names = {0: "fan", 1: "temp", 2: "perf"}
    bad = [names.get(i, "power") for i, tok in enumerate(cell) if tok.startswith("ERR!")]
    if "/" in cell and cell.index("/") > 0 and cell[cell.index("/") - 1] == "ERR!":
        bad = [b for b in bad if b != "power"] + ["power"]
    return ", ".join(dict.fromkeys(bad))


class _Scan:
    """One pass over an nvidia-smi upload: the GPUs read so far and the shape being read."""

    def __init__(self, result: ParseResult) -> None:
        self.gpus: list[_Gpu] = []
        self.host = host_from_name(result.name)
        self.cur: _Gpu | None = None  # the -q section being read
        self.path: list[tuple[int, str]] = []  # (indent, section) stack for -q
        self.csv_header: list[str] | None = None
        self.series_header: list[str] = []
        self.series: list[tuple[int, list[str], str]] = []  # a looping --query-gpu log
        self.table_gpu: _Gpu | None = None  # the table GPU whose usage row comes next
        # tried in order on each non-blank line; True: the line is read
        self.steps = (
            self._lost,
            self._host_line,
            self._csv_header,
            self._csv_row,
            self._q_header,
            self._q_line,
            self._table_gpu,
            self._table_err,
            self._table_sensor_err,
        )

    def feed(self, line_no: int, text: str) -> bool:
        """Read one line; False when it was a line no step took (the GPU cap is checked then)."""
        s = text.strip()
        if not s:
            return True
        for step in self.steps:
            if step(s, line_no, text):
                return True
        self._table_use(s, line_no, text)
        return False

    def _lost(self, s: str, line_no: int, text: str) -> bool:
        if "Unable to determine the device handle" not in s:
            return False
        g = _lost_gpu(s, line_no, text)
        if g is not None:
            self.gpus.append(g)
        return g is not None

    def _host_line(self, s: str, line_no: int, text: str) -> bool:
        if self.host is None:
            mh = _HOST_LINE.match(s)
            if mh:
                self.host = mh.group("h")
                return True
        return False

    def _csv_header(self, s: str, line_no: int, text: str) -> bool:
        if self.csv_header is not None or not _is_csv_header(s):
            return False
        self.csv_header = [
            _CSV_FIELDS.get(h.strip().split(" ")[0].lower(), "") for h in s.split(",")
        ]
        self.series_header = [h.strip() for h in s.split(",")]
        return True

    def _csv_row(self, s: str, line_no: int, text: str) -> bool:
        if self.csv_header is None or "," not in s:
            return False
        vals = next(csv.reader([s]))
        if len(self.series) < MAX_SERIES_ROWS:
            self.series.append((line_no, vals, text))
        g = _Gpu(str(len(self.gpus)), line_no, text)
        for name, v in zip(self.csv_header, vals, strict=False):
            if name:
                value = _num(v) if name not in ("name", "bus", "serial") else v.strip()
                g.set(name, value, line_no, text)
        self.gpus.append(g)
        return True

    def _q_header(self, s: str, line_no: int, text: str) -> bool:
        m = _GPU_HDR.match(s)
        if not m:
            return False
        self.cur = _Gpu(m.group("bus"), line_no, text)
        self.cur.r["bus"] = m.group("bus")
        self.gpus.append(self.cur)
        self.path = []
        return True

    def _q_line(self, s: str, line_no: int, text: str) -> bool:
        """Inside a -q GPU section: a section title or a ``label : value`` reading."""
        if self.cur is None:
            return False
        path = self.path
        indent = len(text) - len(text.lstrip())
        while path and path[-1][0] >= indent:
            path.pop()
        kv = _KV.match(s)
        if not kv or not kv.group("v").strip():
            path.append((indent, s.lower().rstrip(":")))
            return True
        _q_reading(
            self.cur,
            [p for _, p in path],
            kv.group("k").strip().lower(),
            kv.group("v"),
            line_no,
            text,
        )
        return True

    def _table_gpu(self, s: str, line_no: int, text: str) -> bool:
        m = _TABLE_GPU.match(s)
        if not m:
            return False
        g = self.table_gpu = _Gpu(m.group("bus"), line_no, text)
        g.set("index", int(m.group("i")), line_no, text)
        g.set("name", m.group("name").strip(), line_no, text)
        g.r["bus"] = m.group("bus")
        ecc = _num(m.group("ecc"))
        if isinstance(ecc, int):
            g.set("ecc_uncorrected_volatile", ecc, line_no, text)
        self.gpus.append(g)
        return True

    def _table_err(self, s: str, line_no: int, text: str) -> bool:
        if self.table_gpu is None or not _TABLE_ERR.match(s):
            return False
        self.table_gpu.set("lost", "ERR! in the nvidia-smi table", line_no, text)
        self.table_gpu = None
        return True

    def _table_sensor_err(self, s: str, line_no: int, text: str) -> bool:
        """A usage row with some sensors nvidia-smi cannot read."""
        if (
            self.table_gpu is None
            or "ERR!" not in s
            or not s.startswith("|")
            or _TABLE_USE.match(s)
        ):
            return False
        self.table_gpu.set("sensor_errors", _sensor_errors(s), line_no, text)
        self.table_gpu = None
        return True

    def _table_use(self, s: str, line_no: int, text: str) -> None:
        """The table's usage row under a GPU row: temperature, power, memory."""
        m = _TABLE_USE.match(s)
        g = self.table_gpu
        if not m or g is None:
            return
        g.set("temp_c", int(m.group("temp")), line_no, text)
        g.set("perf_state", m.group("perf"), line_no, text)
        if m.group("pw") != "N/A":
            g.set("power_w", float(m.group("pw")), line_no, text)
        if m.group("cap") != "N/A":
            g.set("power_limit_w", float(m.group("cap")), line_no, text)
        g.set("mem_used_mib", int(m.group("used")), line_no, text)
        g.set("mem_total_mib", int(m.group("total")), line_no, text)
        self.table_gpu = None


class NvidiaSmiParser:
    name = "nvidia_smi"
    kinds = ("nvidia_smi",)
    recognizers = (
        Recognizer("nvidia_smi", 42, _has_query_header),
        # after nccl-tests, whose output quotes the nvidia-smi banner
        Recognizer("nvidia_smi", 55, _is_smi_output, _SMI_LITERALS),
    )

    def parse(self, stream: BinaryIO, result: ParseResult, progress: Progress | None) -> None:
        scan = _Scan(result)
        for line_no, text in iter_lines(stream, result):
            if not scan.feed(line_no, text) and len(scan.gpus) > MAX_GPUS and not scan.series:
                result.warn(f"more than {MAX_GPUS} GPUs; the rest were skipped")
                break
        if not scan.gpus:
            raise ParseError(
                "no GPU readings found (expected nvidia-smi -q, the nvidia-smi table or --format=csv)"
            )
        host = scan.host
        if host:
            result.hosts = [host]
        gpus = _merge_samples(scan.gpus)
        _sensor_errors_unlike_peers(gpus)
        for i, g in enumerate(gpus):
            g.r.setdefault("index", i)
            result.events.append(
                Event(
                    kind="gpu_reading",
                    line=g.line,
                    text=clip(g.text),
                    host=host,
                    fields={"gpu": g.r.get("index", i), "readings": g.r, "lines": g.lines},
                    file=result.name,
                )
            )
        result.event_counts["gpu_reading"] = len(gpus)
        if len(scan.series) > 1 and scan.series_header:
            _as_metrics(scan.series_header, scan.series, host, result)
        result.facts["nvidia_smi"] = {"host": host, "gpus": len(gpus)}


def _q_reading(g: _Gpu, path: list[str], key: str, value: str, line: int, text: str) -> None:
    """One ``label : value`` of a -q GPU section, read by the section it stands in."""
    sect = " / ".join(path)
    v = _num(value)
    if any(t in sect for t in _THROTTLE_SECTIONS):
        if value.strip().lower() == "active" and key not in (
            "idle",
            "applications clocks setting",
        ):
            g.set("throttle_" + re.sub(r"\W+", "_", key).strip("_"), "Active", line, text)
        return
    if "ecc errors" in sect:
        if key == "sram threshold exceeded":
            g.set("sram_threshold_exceeded", value.strip(), line, text)
            return
        if not isinstance(v, int):
            return
        scope = "aggregate" if "aggregate" in sect else "volatile"
        where = f"{sect} {key}"
        if "uncorrectable" in key or "double bit" in where:
            kind = "uncorrected"
        elif "correctable" in key or "single bit" in where:
            kind = "corrected"
        else:
            return
        if ("single bit" in where or "double bit" in where) and key != "total":
            return  # old layout: only the per-type Total counts
        name = f"ecc_{kind}_{scope}"
        total = int(g.r.get(name) or 0) + v
        if v or name not in g.r:
            g.set(name, total, line, text)
        return
    if "retired pages" in sect:
        if "double bit" in key and isinstance(v, int):
            g.set("retired_dbe", v, line, text)
        elif "single bit" in key and isinstance(v, int):
            g.set("retired_sbe", v, line, text)
        elif "pending" in key:
            g.set("pending_retirement", value.strip(), line, text)
        return
    if "remapped rows" in sect:
        if key.startswith("uncorrectable") and isinstance(v, int):
            g.set("remapped_uncorrectable", v, line, text)
        elif key.startswith("correctable") and isinstance(v, int):
            g.set("remapped_correctable", v, line, text)
        elif key == "pending":
            g.set("remap_pending", value.strip(), line, text)
        elif "failure" in key:
            g.set("remap_failure", value.strip(), line, text)
        return
    if sect.endswith("max clocks") and key in ("sm", "graphics"):
        g.set(f"{'sm' if key == 'sm' else 'gr'}_clock_max_mhz", v, line, text)
        return
    if (
        sect.endswith("clocks")
        and "max" not in sect
        and "application" not in sect
        and key in ("sm", "graphics")
    ):
        g.set(f"{'sm' if key == 'sm' else 'gr'}_clock_mhz", v, line, text)
        return
    if "fb memory usage" in sect and key in ("total", "used"):
        g.set(f"mem_{key}_mib", v, line, text)
        return
    if key == "performance state":
        g.set("perf_state", value.strip(), line, text)
        return
    name = _Q_LABELS.get(key)
    if name and "power" in name and "module" in sect:
        return
    if name and name not in g.r:
        keep_text = name in ("name", "serial", "reset_required", "drain_and_reset")
        g.set(name, value.strip() if keep_text else v, line, text)


def _is_yes(v: Any) -> bool:
    return str(v).strip().lower() in ("yes", "1", "true", "active") or (
        isinstance(v, str)
        and bool(v)
        and v.lower() not in ("no", "0", "false", "n/a", "not active")
    )


def _loaded(r: dict[str, Any]) -> bool:
    pw, cap = r.get("power_w"), r.get("power_limit_w")
    return (
        isinstance(pw, int | float) and isinstance(cap, int | float) and cap > 0 and pw > 0.5 * cap
    )


def _bus_key(bus: Any) -> str | None:
    """``00000000:3B:00.0`` and ``0000:3b:00.0`` are the same GPU."""
    if not isinstance(bus, str) or ":" not in bus:
        return None
    dom, rest = bus.strip().split(":", 1)
    try:
        return f"{int(dom, 16):x}:{rest.lower()}"
    except ValueError:
        return bus.lower()


def _sensor_errors_unlike_peers(gpus: list[_Gpu]) -> None:
    """A board whose sensors read ``ERR!`` while a GPU of the same model in the same output
    reads them: that board's sensors or management controller failed (one ``ERR!`` on every
    board of a model is how some boards report a sensor they lack)."""
    for g in gpus:
        if "sensor_errors" not in g.r:
            continue
        peers = [
            p
            for p in gpus
            if p is not g and p.r.get("name") == g.r.get("name") and "sensor_errors" not in p.r
        ]
        if any("power_w" in p.r or "temp_c" in p.r for p in peers):
            g.r["sensor_errors_unlike_peers"] = True


def _merge_samples(gpus: list[_Gpu]) -> list[_Gpu]:
    """One reading per GPU: samples of the same GPU (by bus id, else index) keep their worst
    value of each reading, with that sample's line; the SM clock keeps its lowest sample taken
    under load (with that sample's power as ``sm_clock_power_w``)."""
    by_key: dict[str, _Gpu] = {}
    out: list[_Gpu] = []
    for g in gpus:
        r = g.r
        if "sm_clock_mhz" in r and _loaded(r):
            g.set("sm_clock_power_w", r["power_w"], *g.lines.get("sm_clock_mhz", [g.line, g.text]))
        key = _bus_key(r.get("bus")) or (f"#{r['index']}" if "index" in r else f"@{g.line}")
        first = by_key.get(key)
        if first is None:
            by_key[key] = g
            out.append(g)
            continue
        first.r["samples"] = int(first.r.get("samples", 1)) + 1
        for name, v in r.items():
            old = first.r.get(name)
            line, text = g.lines.get(name, [g.line, g.text])
            if name == "sm_clock_mhz":
                if "sm_clock_power_w" in r and (
                    "sm_clock_power_w" not in first.r or (isinstance(old, int | float) and v < old)
                ):
                    first.set(name, v, line, text)
                    first.set("sm_clock_power_w", r["sm_clock_power_w"], line, text)
            elif name.startswith(_WORST_MAX) and isinstance(v, int | float):
                if not isinstance(old, int | float) or v > old:
                    first.set(name, v, line, text)
            elif name in _FLAGS:
                if old is None or (_is_yes(v) and not _is_yes(old)):
                    first.set(name, v, line, text)
            elif name not in first.r:
                first.set(name, v, line, text)
    return out


register_parser(NvidiaSmiParser())


MAX_SERIES_ROWS = 500_000


def _as_metrics(
    header: list[str], rows: list[tuple[int, list[str], str]], host: str | None, result: ParseResult
) -> None:
    """A looping ``--query-gpu=timestamp,index,temperature.gpu,clocks.sm,… -l N`` log is a
    time series per GPU: kept as a metrics table (canonical columns, e.g. ``gpu_temp``,
    ``sm_clock``) beside the worst-sample readings, so the slowdown decomposition can see
    a GPU's clock fall while its temperature climbs."""
    from ..metrics import MetricsTable, normalise_columns

    pa = __import__("pyarrow")
    cols: dict[str, list[Any]] = {h: [] for h in header if h}
    for _, vals, _ in rows:
        for i, h in enumerate(header):
            if h:
                cols[h].append(vals[i].strip() if i < len(vals) else None)
    cols["_line"] = [ln for ln, _, _ in rows]
    table, _ = normalise_columns(pa.table({k: pa.array(v) for k, v in cols.items()}))
    if "time" not in table.column_names or "gpu" not in table.column_names:
        return
    if host and "host" not in table.column_names:
        table = table.append_column("host", pa.array([host] * table.num_rows, pa.string()))
    result.metrics = MetricsTable(table)
    meta = table.schema.metadata or {}
    result.facts["metrics_unplaced"] = [
        n for n in __import__("json").loads(meta.get(b"unplaced", b"[]")) if n
    ]
    result.facts["metrics_columns"] = table.column_names
    result.facts["metrics_placed"] = __import__("json").loads(meta.get(b"placed", b"{}"))
    step = max(1, len(rows) // 2000)
    result.facts["metrics_rows"] = {str(ln): text for ln, _, text in rows[::step]}
