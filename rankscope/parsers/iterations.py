"""Iteration lines of a training log → a per-step metrics series, like an uploaded CSV.

Training loops print their speed every N steps; read together these lines are the
run's step-time series, so a slowdown can be told from one log. Recognised (each by
its own fields, whatever the wrapper — ``[rank3]:``, ``[default0]:``, ``srun -l``,
date stamps):

- Megatron-LM: ``iteration 100/ 5000 | … | elapsed time per iteration (ms): 1234.5 |
  throughput per GPU (TFLOP/s/GPU): 180.3 | … | lm loss: 2.3E+00 |`` (and the
  Megatron-DeepSpeed ``samples per second: 12.3 | TFLOPs: 123.4 |`` fields);
- tqdm bars (HF Trainer, Lightning, NeMo, accelerate): ``| 450/1000 [07:30<09:10,
  1.00s/it]`` / ``2.50it/s]`` with their postfix (``loss=2.3``, ``train_step_timing
  in s=0.6``, ``global_step=99``); a bar redrawn with carriage returns is one update
  per ``\\r`` segment;
- HF Trainer dicts ``{'loss': 2.3, …}`` only add the loss;
- DeepSpeed ``RunningAvgSamplesPerSec=…, CurrSamplesPerSec=…`` and ``step=N``;
- torchtitan ``step: 10  loss: 9.12 … tps: 3,456  tflops: 180.2``; nanoGPT ``iter
  100: loss 2.34, time 123.45ms``; and generic ``step N … tokens/s 1234`` /
  ``samples/s`` / ``step_time 1.2s`` lines.

Columns produced: ``step``, ``rank`` (from the line's prefix or the file), ``time``
(the line's stamp), ``step_time`` (s; from ms per iteration, s/it, 1 / it/s),
``throughput`` (one kind per file: tokens/s, else samples/s, else TFLOP/s — named in
``facts["iteration_throughput_unit"]``) and ``loss``.

Memory: at most ``MAX_ROWS`` rows per file; past that every other row is dropped and
the stride doubles (the series stays evenly spaced). The raw text of up to
``MAX_TEXT_ROWS`` rows (evenly spaced, plus each rank's slowest and fastest) is kept
for evidence, exactly as the metrics parser keeps CSV rows.
"""

from __future__ import annotations

import re
from typing import Any

from ..envelope import peel
from ..model import ParseResult

MAX_ROWS = 200_000
FULL_LINES = 1_000  # candidate lines always read
BYTES_PER_LINE = 256 << 10  # then about one per this many bytes of log
MAX_TEXT_ROWS = 4_000
MIN_ROWS = 12  # fewer iteration lines than this are not a series

# candidate lines: a literal of every format above, found with bytes.find (memchr speed;
# a regex alternation over whole 8 MiB chunks is ~100x slower)
LITERALS: tuple[bytes, ...] = (
    b"/s",  # it/s, tokens/s, samples/s, TFLOP/s, tok/s
    b"s/it",
    b"per iteration",
    b"PerSec",
    b"per second",
    b"FLOP",
    b"flops",
    b"tps: ",
    b"wps: ",
    b"step_tim",
    b": loss ",
)

_NUM = r"([-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
_NUM_END = re.compile(_NUM + r"\s*$")
# every pattern is tried only when its literal is in the line (regexes that start with a
# number are slow to search: they are matched backwards from the unit instead)
_STEP: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("iteration", re.compile(r"iteration\s+(\d+)\s*/\s*\d+")),
    ("global_step", re.compile(r"global_step[=:]\s*(\d+)")),
    ("step", re.compile(r"step[=:]\s*(\d+)\b")),
    ("step", re.compile(r"step\s+(\d+)\b(?!\s*/\s*\d+\s*\])")),
    ("iter ", re.compile(r"iter\s+(\d+)\b")),
    ("|", re.compile(r"\|\s*(\d+)/\d+\s*\[")),  # tqdm n/total [
    ("it [", re.compile(r"(\d+)it\s*\[")),  # tqdm without a total
)
# (literal, pattern or None for "the number before the literal", scale to s, is a rate)
_STEP_TIME: tuple[tuple[str, re.Pattern[str] | None, float, bool], ...] = (
    (
        "elapsed time per iteration",
        re.compile(r"elapsed time per iteration \(ms\):\s*" + _NUM),
        1e-3,
        False,
    ),
    ("train_step_timing", re.compile(r"train_step_timing in s=\s*" + _NUM), 1.0, False),
    ("step_time", re.compile(r"step_time[=:\s]\s*" + _NUM + r"\s*ms\b"), 1e-3, False),
    ("step_time", re.compile(r"step_time[=:\s]\s*" + _NUM), 1.0, False),
    ("time ", re.compile(r"time\s+" + _NUM + r"\s*ms\b"), 1e-3, False),  # nanoGPT
    ("s/it", None, 1.0, False),
    ("it/s", None, 1.0, True),
)
_THROUGHPUT: tuple[tuple[str, str, re.Pattern[str] | None], ...] = (
    (
        "tokens/s",
        "tokens per second",
        re.compile(r"tokens per second(?: per gpu)?\)?[:=]?\s*" + _NUM),
    ),
    ("tokens/s", "tokens/s", re.compile(r"tokens/s(?:ec)?(?:/gpu)?\)?[:=]\s*" + _NUM)),
    ("tokens/s", "tokens/s", None),
    ("tokens/s", "token/s", None),
    ("tokens/s", "tok/s", None),
    ("tokens/s", "tps:", re.compile(r"tps:\s*" + _NUM)),
    ("tokens/s", "wps:", re.compile(r"wps:\s*" + _NUM)),
    ("samples/s", "currsamplespersec", re.compile(r"currsamplespersec=\s*" + _NUM)),
    ("samples/s", "samples per second", re.compile(r"samples? per second[:=]?\s*" + _NUM)),
    ("samples/s", "samples/s", re.compile(r"samples?/s(?:ec)?[:=]\s*" + _NUM)),
    ("samples/s", "samples/s", None),
    ("samples/s", "sample/s", None),
    ("TFLOP/s", "tflop/s/gpu", re.compile(r"tflop/s/gpu\):\s*" + _NUM)),
    ("TFLOP/s", "tflops:", re.compile(r"tflops:\s*" + _NUM)),
    ("TFLOP/s", "tflops", re.compile(r"tflops[:=]\s*" + _NUM)),
)
_LOSS = (
    ("lm loss", re.compile(r"lm loss:\s*" + _NUM)),
    ("'loss'", re.compile(r"'loss':\s*" + _NUM)),
    ("loss", re.compile(r"loss[=:]\s*" + _NUM)),
    ("loss", re.compile(r"loss\s+" + _NUM)),
)


_MEGATRON = re.compile(
    r"iteration\s+(\d+)\s*/\s*\d+\s*\|.*?elapsed time per iteration \(ms\): ([\d.]+)"
    r"(?:.*?tflop/s/gpu\): ([\d.]+))?(?:.*?lm loss: ([\d.e+-]+))?"
)


def _f(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def _before(msg: str, lit: str) -> float | None:
    """The number written just before ``lit`` (``1.25s/it``, ``3,456 tokens/s``)."""
    at = msg.find(lit)
    if at <= 0:
        return None
    m = _NUM_END.search(msg, max(0, at - 32), at)
    return _f(m.group(1)) if m else None


def read_fields(msg: str) -> dict[str, Any]:
    """The iteration fields of one message (no envelope): step, step_time, throughput, loss.

    Every pattern is lower-case and runs on the lower-cased message, only when its
    literal is in it."""
    out: dict[str, Any] = {}
    low = msg.lower()
    if "elapsed time per iteration (ms): " in low:  # Megatron: the most common, one regex
        m = _MEGATRON.search(low)
        if m:
            out["step"] = int(m.group(1))
            out["step_time"] = float(m.group(2)) * 1e-3
            if m.group(3):
                out["throughput"], out["unit"] = float(m.group(3)), "TFLOP/s"
            if m.group(4):
                out["loss"] = _f(m.group(4))
            return out
    for lit, rx in _STEP:
        if lit in low:
            m = rx.search(low)
            if m:
                out["step"] = int(m.group(1))
                break
    for lit, rx, scale, rate in _STEP_TIME:
        if lit not in low:
            continue
        if rx is None:
            v = _before(low, lit)
        else:
            m = rx.search(low)
            v = _f(m.group(1)) if m else None
        if v is not None and v > 0:
            out["step_time"] = 1.0 / v if rate else v * scale
            break
    for unit, lit, rx in _THROUGHPUT:
        if lit not in low:
            continue
        if rx is None:
            v = _before(low, lit)
        else:
            m = rx.search(low)
            v = _f(m.group(1)) if m else None
        if v is not None and v > 0:
            out["throughput"] = v
            out["unit"] = unit
            break
    if "loss" in low:
        for lit, rx in _LOSS:
            if lit in low:
                m = rx.search(low)
                if m:
                    v = _f(m.group(1))
                    if v is not None:
                        out["loss"] = v
                    break
    return out


class IterationReader:
    """Fed the text parser's chunks; ``finish`` turns what it read into ``result.metrics``."""

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []  # (line, step, rank, time, step_time, tput, loss)
        self.texts: dict[int, str] = {}  # evenly spaced raw rows, for evidence
        self.extremes: dict[tuple[int, int, int], tuple[float, int, str]] = {}
        self.stride = 1
        self.text_stride = 1
        self.seen = 0
        self.unit: str | None = None
        self.ordinal: dict[int | None, int] = {}
        self.allowance = float(FULL_LINES)
        self.sampled = False

    def pick(self, spans: list[tuple[int, int]], nbytes: int) -> list[tuple[int, int]]:
        """The candidate lines of ``nbytes`` of log that the work budget lets us read:
        every one of the first ``FULL_LINES``, then about one per ``BYTES_PER_LINE`` of
        log, evenly spread — a long log's series stays fine enough for an onset, and the
        parse stays near the prefilter's speed."""
        self.allowance += nbytes / BYTES_PER_LINE
        if len(spans) > self.allowance:
            step = len(spans) / max(1.0, self.allowance)
            spans = [spans[int(i * step)] for i in range(int(len(spans) / step))]
            self.sampled = True
        self.allowance -= len(spans)
        return spans

    def take(self, lines: list[tuple[bytes, int]]) -> None:
        """Candidate lines (raw bytes, 1-based number), already picked."""
        for raw, ln in lines:
            self._line(raw.decode("utf-8", errors="replace"), ln)

    def _line(self, raw: str, line: int) -> None:
        # a tqdm bar redrawn in place: one update per carriage-return segment
        segments = [s for s in raw.split("\r") if s.strip()] if "\r" in raw else [raw]
        for seg in segments:
            env = peel(seg)
            f = read_fields(env.message)
            if "step_time" not in f and "throughput" not in f:
                continue
            rank = env.rank if env.rank is not None else env.task
            if f.get("unit"):
                if self.unit is None:
                    self.unit = f["unit"]
                elif f["unit"] != self.unit:
                    f.pop("throughput", None)
            step = f.get("step")
            if step is None:
                step = self.ordinal.get(rank, 0) + 1
            self.ordinal[rank] = step
            self.seen += 1
            if self.seen % self.stride:
                continue
            row = (
                line,
                step,
                rank,
                env.time,
                f.get("step_time"),
                f.get("throughput"),
                f.get("loss"),
            )
            self.rows.append(row)
            text = seg.strip("\r\n")[:2000]
            key = rank if rank is not None else -1
            for i in (4, 5):
                v = row[i]
                if v is None:
                    continue
                hi = self.extremes.get((key, i, 1))
                if hi is None or v > hi[0]:
                    self.extremes[(key, i, 1)] = (v, line, text)
                lo = self.extremes.get((key, i, -1))
                if lo is None or v < lo[0]:
                    self.extremes[(key, i, -1)] = (v, line, text)
            if len(self.rows) % self.text_stride == 0:
                self.texts[line] = text
                if len(self.texts) > MAX_TEXT_ROWS:
                    self.texts = dict(list(self.texts.items())[::2])
                    self.text_stride *= 2
            if len(self.rows) >= MAX_ROWS:
                self.rows = self.rows[::2]
                self.stride *= 2

    def finish(self, result: ParseResult, file_rank: int | None) -> None:
        if len(self.rows) < MIN_ROWS or result.metrics is not None:
            return
        import pyarrow as pa

        from ..metrics import MetricsTable

        rows = self.rows
        ranks = [r[2] if r[2] is not None else file_rank for r in rows]
        cols: dict[str, Any] = {
            "step": pa.array([r[1] for r in rows], pa.int64()),
            "line": pa.array([r[0] for r in rows], pa.int64()),
        }
        if any(x is not None for x in ranks):
            cols["rank"] = pa.array(ranks, pa.int64())
        for i, name in ((3, "time"), (4, "step_time"), (5, "throughput"), (6, "loss")):
            vals = [r[i] for r in rows]
            if any(v is not None for v in vals):
                cols[name] = pa.array(vals, pa.string() if name == "time" else pa.float64())
        result.metrics = MetricsTable(pa.table(cols))
        result.facts["metrics_source"] = "iteration lines"
        if self.sampled:
            result.facts["iteration_lines_sampled"] = True
        if self.unit:
            result.facts["iteration_throughput_unit"] = self.unit
        # the rows a finding may quote: evenly spaced ones, and each rank's extremes
        keep = dict(self.texts)
        for _, ln, text in list(self.extremes.values())[: 4 * MAX_TEXT_ROWS]:
            keep[ln] = text
        result.facts["metrics_rows"] = {str(k): v for k, v in sorted(keep.items())}
