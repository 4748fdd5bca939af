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
- the declared table ``FORMATS`` (one entry per format seen in public logs: TF
  ``examples/sec``/``sec/batch``, tf_cnn_benchmarks ``images/sec``, ``This epoch took N s``,
  ImageNet ``Time``/``Data``, DeepSpeed micro-step timers, ``rtime``/``itime``, a timedelta
  ``time delta: 0:00:02.54``, …); the
  generic readers fill only what it left.

Columns produced: ``step``, ``rank`` (from the line's prefix or the file), ``time``
(the line's stamp), ``step_time`` (s; from ms per iteration, s/it, 1 / it/s),
``throughput`` (one kind per file: tokens/s, else samples/s, else TFLOP/s — named in
``facts["iteration_throughput_unit"]``), ``loss``, and where a format gives them
``data_time``, ``comm_time``, ``compute_time`` (s).

Speed: within a file, a line whose lower-cased text differs from an earlier one only in
its digits is read by replaying where that line's numbers were (``FieldReader``): the
same fields as ``read_fields``, without its literal tests and regex searches.

Memory: at most ``MAX_ROWS`` rows per file; past that every other row is dropped and
the stride doubles (the series stays evenly spaced). The raw text of up to
``MAX_TEXT_ROWS`` rows (evenly spaced, plus each rank's slowest and fastest) is kept
for evidence, exactly as the metrics parser keeps CSV rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .._lazy import lazy_compile
from ..envelope import peel
from ..model import ParseResult

MAX_ROWS = 200_000
FULL_LINES = 1_000  # candidate lines always read
BYTES_PER_LINE = 256 << 10  # then about one per this many bytes of log
MAX_TEXT_ROWS = 4_000
MIN_ROWS = 4  # fewer iteration lines than this are not a series (bug reports paste a few)

# candidate lines: a literal of every format above, found with bytes.find (memchr speed;
# a regex alternation over whole 8 MiB chunks is ~100x slower)
LITERALS: tuple[bytes, ...] = (
    # the rates the readers know, each by a literal of its own: "/s" alone occurs in paths
    # and units nobody reads, and as a two-byte literal it slowed the whole prefilter scan
    # by ~30 %
    b"it/s",
    b"ens/s",  # tokens/s
    b"en/s",  # token/s
    b"tok/s",
    b"les/s",  # samples/s, examples/sec
    b"le/s",  # sample/s
    b"LOP/s",  # TFLOP/s
    b"lop/s",
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
_NUM_END = lazy_compile(_NUM + r"\s*$")
# every pattern is tried only when its literal is in the line (regexes that start with a
# number are slow to search: they are matched backwards from the unit instead)
_STEP: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("iteration", lazy_compile(r"iteration\s+(\d+)\s*/\s*\d+")),
    ("global_step", lazy_compile(r"global_step[=:]\s*(\d+)")),
    ("step", lazy_compile(r"\bstep[=:]\s*(\d+)\b")),
    ("step", lazy_compile(r"step\s+(\d+)\b(?!\s*/\s*\d+\s*\])")),
    ("iter ", lazy_compile(r"iter\s+(\d+)\b")),
    ("|", lazy_compile(r"\|\s*(\d+)/\d+\s*\[")),  # tqdm n/total [
    ("it [", lazy_compile(r"(\d+)it\s*\[")),  # tqdm without a total
)
# (literal, pattern or None for "the number before the literal", scale to s, is a rate)
_STEP_TIME: tuple[tuple[str, re.Pattern[str] | None, float, bool], ...] = (
    (
        "elapsed time per iteration",
        lazy_compile(r"elapsed time per iteration \(ms\):\s*" + _NUM),
        1e-3,
        False,
    ),
    ("train_step_timing", lazy_compile(r"train_step_timing in s=\s*" + _NUM), 1.0, False),
    ("step_time", lazy_compile(r"step_time[=:\s]\s*" + _NUM + r"\s*ms\b"), 1e-3, False),
    ("step_time", lazy_compile(r"step_time[=:\s]\s*" + _NUM), 1.0, False),
    ("time ", lazy_compile(r"time\s+" + _NUM + r"\s*ms\b"), 1e-3, False),  # nanoGPT
    ("s/it", None, 1.0, False),
    ("it/s", None, 1.0, True),
)
_THROUGHPUT: tuple[tuple[str, str, re.Pattern[str] | None], ...] = (
    (
        "tokens/s",
        "tokens per second",
        lazy_compile(r"tokens per second(?: per gpu)?\)?[:=]?\s*" + _NUM),
    ),
    ("tokens/s", "tokens/s", lazy_compile(r"tokens/s(?:ec)?(?:/gpu)?\)?[:=]\s*" + _NUM)),
    ("tokens/s", "tokens/s", None),
    ("tokens/s", "token/s", None),
    ("tokens/s", "tok/s", None),
    ("tokens/s", "tps:", lazy_compile(r"tps:\s*" + _NUM)),
    ("tokens/s", "wps:", lazy_compile(r"wps:\s*" + _NUM)),
    ("samples/s", "currsamplespersec", lazy_compile(r"currsamplespersec=\s*" + _NUM)),
    ("samples/s", "samples per second", lazy_compile(r"samples? per second[:=]?\s*" + _NUM)),
    ("samples/s", "samples/s", lazy_compile(r"samples?/s(?:ec)?[:=]\s*" + _NUM)),
    ("samples/s", "samples/s", None),
    ("samples/s", "sample/s", None),
    ("TFLOP/s", "tflop/s/gpu", lazy_compile(r"tflop/s/gpu\):\s*" + _NUM)),
    ("TFLOP/s", "tflops:", lazy_compile(r"tflops:\s*" + _NUM)),
    ("TFLOP/s", "tflops", lazy_compile(r"tflops[:=]\s*" + _NUM)),
)
_LOSS = (
    ("lm loss", lazy_compile(r"lm loss:\s*" + _NUM)),
    ("'loss'", lazy_compile(r"'loss':\s*" + _NUM)),
    ("loss", lazy_compile(r"loss[=:]\s*" + _NUM)),
    ("loss", lazy_compile(r"loss\s+" + _NUM)),
)


@dataclass(frozen=True)
class IterFormat:
    """One iteration-line format, as data: who prints it, the literal that makes a line a
    candidate (``prefilter``: bytes as printed, for the sidecar scan; ``literal``: the
    lower-cased text gating the regex per line), the regex (on the lower-cased message),
    and the columns it feeds: ``(column, groups summed, scale to the column's unit)``
    (a group ending in ``?`` may be absent; the others must be there).
    Every time column is in seconds, lower is better; ``throughput`` is in ``unit``,
    higher is better (``better`` says which, for the reader of the table). A step given
    as ``[epoch][i/n]`` comes from the groups ``epoch``, ``i``, ``n``."""

    name: str
    prefilter: bytes
    literal: str
    regex: re.Pattern[str]
    fields: tuple[tuple[str, tuple[str, ...], float], ...]
    unit: str | None = None
    better: str = "lower"
    example: str = ""
    running: bool = False  # the throughput is a mean since timing began, step = steps timed


_S = r"(?:s|sec|secs|seconds)\b"
# formats seen in public logs that the generic readers below do not place
FORMATS: tuple[IterFormat, ...] = (
    IterFormat(  # TensorFlow models/tutorials (cifar10_train.py)
        "tf cifar10 examples/sec",
        b"les/s",
        "examples/sec",
        lazy_compile(_NUM + r"\s*examples/sec"),
        (("throughput", ("1",), 1.0),),
        unit="examples/s",
        better="higher",
        example="step 3300, loss = 2.17 (25.3 examples/sec; 10.102 sec/batch)",
    ),
    IterFormat(
        "tf cifar10 sec/batch",
        b"sec/batch",
        "sec/batch",
        lazy_compile(_NUM + r"\s*sec/batch"),
        (("step_time", ("1",), 1.0),),
        example="step 3300, loss = 2.17 (25.3 examples/sec; 10.102 sec/batch)",
    ),
    IterFormat(  # tf_cnn_benchmarks: the mean since warm-up ± its uncertainty (a running mean)
        "tf_cnn_benchmarks images/sec",
        b"ges/s",
        "images/sec:",
        lazy_compile(r"(?:(?P<step>\d+)\s+)?images/sec:\s*(?P<v>" + _NUM[1:-1] + ")"),
        (("throughput", ("v",), 1.0),),
        unit="images/s",
        better="higher",
        example="1010\timages/sec: 186.6 +/- 0.5 (jitter = 14.8)\t7.268",
        running=True,
    ),
    IterFormat(  # RETURNN and others: "…, 3.249 sec/step"
        "sec/step",
        b"sec/step",
        "sec/step",
        lazy_compile(_NUM + r"\s*sec/step"),
        (("step_time", ("1",), 1.0),),
        example="ep 29 train, step 1, ce 5.396, mem_usage:cuda:1 6.2GB, 3.249 sec/step",
    ),
    IterFormat(
        "<unit> took N ms",
        b" took ",
        " took ",
        lazy_compile(r"\b(?:iteration|epoch|step|batch|iter)\s+took\s+" + _NUM + r"\s*ms\b"),
        (("step_time", ("1",), 1e-3),),
        example="Iteration took 850 ms",
    ),
    IterFormat(  # nnU-Net "This epoch took 109.1 s", "Iteration took 32.7 s."
        "<unit> took N s",
        b" took ",
        " took ",
        lazy_compile(r"\b(?:iteration|epoch|step|batch|iter)\s+took\s+" + _NUM + r"\s*" + _S),
        (("step_time", ("1",), 1.0),),
        example="This epoch took 109.110585 s",
    ),
    IterFormat(  # PyTorch ImageNet example and its forks (DALI, apex): current (average)
        "imagenet Time/Data",
        b"\tData ",
        "data ",
        lazy_compile(
            r"(?:\[(?P<epoch>\d+)\]\s*)?\[\s*(?P<i>\d+)\s*/\s*(?P<n>\d+)\]\s*.*?"
            r"\btime\s+(?P<t>"
            + _NUM[1:-1]
            + r")\s*\(\s*[\d.]+\s*\)\s+data\s+(?P<d>"
            + _NUM[1:-1]
            + r")\s*\("
        ),
        (("step_time", ("t",), 1.0), ("data_time", ("d",), 1.0)),
        example="Epoch: [1][100/5005]\tTime 8.719 (0.361)\tData 8.597 (0.230)\tLoss 1.2987 (1.2753)",
    ),
    IterFormat(
        "<unit> duration ms",
        b"duration: ",
        "duration:",
        lazy_compile(r"\b(?:iteration|step|batch|iter)\s+duration:\s*" + _NUM + r"\s*ms\b"),
        (("step_time", ("1",), 1e-3),),
        example="step duration: 120.5 ms",
    ),
    IterFormat(  # "Iteration duration: 0.0496", "step duration: 120 ms"
        "<unit> duration",
        b"duration: ",
        "duration:",
        lazy_compile(
            r"\b(?:iteration|step|batch|iter)\s+duration:\s*" + _NUM + r"(?:\s*" + _S + r")?"
        ),
        (("step_time", ("1",), 1.0),),
        example="Iteration duration: 0.049581050872802734 gc.get_count(): (11, 7, 0)",
    ),
    IterFormat(  # "Epoch   2 time  13.0 lr = 0.700" (seconds per epoch)
        "Epoch N time T",
        b"poch ",
        "epoch",
        lazy_compile(
            r"\bepoch\s+(?P<step>\d+)\s*(?:/\s*\d+\s*)?[,:|]?\s*time[:=]?\s+(?P<t>"
            + _NUM[1:-1]
            + r")\s*(?:s\b|sec\b|(?=\s)|$)(?!\s*ms)"
        ),
        (("step_time", ("t",), 1.0),),
        example="INFO:__main__:Epoch   2 time  13.0 lr = 0.700 avg_loss = 0.0107 acc = 99.0",
    ),
    IterFormat(  # a Python timedelta printed per block of epochs/steps
        "time delta H:MM:SS",
        b"time delta: ",
        "time delta:",
        lazy_compile(
            r"(?:\b(?:epoch|step|iter|iteration)[:\s]\s*(?P<step>\d+)\b.*?)?"
            r"time delta:\s*(?P<t>\d+:\d{2}:\d{2}(?:\.\d+)?)"
        ),
        (("step_time", ("t",), 1.0),),
        example="epoch:  90,     loss: 0.1194,   time previous: 33:38.436041 time now: "
        "33:40.978748  time delta: 0:00:02.542707",
    ),
    IterFormat(  # DeepSpeed wall-clock breakdown (wall_clock_breakdown: true), per micro-step
        "deepspeed timers",
        b"_microstep: ",
        "_microstep:",
        lazy_compile(
            r"(?:forward|fwd)_microstep:\s*(?P<f>[\d.]+)\s*\|\s*(?:backward|bwd)_microstep:\s*(?P<b>[\d.]+)"
            r"(?:.*?(?:backward|bwd)_inner_microstep:\s*(?P<bi>[\d.]+))?"
            r"(?:.*?(?:backward|bwd)_allreduce_microstep:\s*(?P<ar>[\d.]+))?"
            r"(?:.*?\bstep_microstep:\s*(?P<o>[\d.]+))?"
        ),
        (
            ("step_time", ("f", "b", "o?"), 1e-3),
            ("compute_time", ("f", "bi", "o?"), 1e-3),
            ("comm_time", ("ar",), 1e-3),
        ),
        example="rank=0 time (ms) | forward_microstep: 1286.00 | backward_microstep: 4702.61 | "
        "backward_inner_microstep: 4215.88 | backward_allreduce_microstep: 486.68 | step_microstep: 0.05",
    ),
    IterFormat(  # PIPs and similar: read time and whole-iteration time
        "rtime/itime",
        b"itime ",
        "itime",
        lazy_compile(r"\brtime\s+(?P<r>[\d.]+)[;,]?\s*itime\s+(?P<i>[\d.]+)"),
        (("step_time", ("i",), 1.0), ("data_time", ("r",), 1.0)),
        example="run3_09:12:44; step 000032/200000; rtime 210.16; itime 212.36; loss = 76.14967",
    ),
)
LITERALS = LITERALS + tuple(
    dict.fromkeys(f.prefilter for f in FORMATS if f.prefilter not in LITERALS)
)
TIME_COLUMNS = ("step_time", "data_time", "comm_time", "compute_time")


# A recipe replays how one line's fields were read on a line of the same shape: entries
# ``(op, column, spans, scale, flag)`` in the order the columns were set.
_CONST, _INT, _FLOAT, _F, _LOSS_V, _SUM, _EPOCH_STEP, _RULE = range(8)
_DEPENDS = (-1, "", (), 0.0, False)  # a value decided which rule won: never replayed
Recipe = list[tuple[int, str, Any, float, Any]]


def _declared(low: str, out: dict[str, Any], rec: Recipe | None = None) -> None:
    """The columns the declared ``FORMATS`` read from one lower-cased message."""
    for fmt in FORMATS:
        if fmt.literal not in low or all(c in out for c, _, _ in fmt.fields):
            continue
        m = fmt.regex.search(low)
        if not m:
            continue
        got = {k: v for k, v in m.groupdict().items() if v is not None} or {"1": m.group(1)}
        for col, groups, scale in fmt.fields:
            need = [g for g in groups if not g.endswith("?")]
            if col in out or any(g not in got for g in need):
                continue
            names = [g.rstrip("?") for g in groups if g.rstrip("?") in got]
            vals = [_f(got[g]) for g in names]
            if None in vals:
                continue
            v = sum(vals) * scale  # type: ignore[arg-type]
            zero_ok = col in TIME_COLUMNS and col != "step_time"
            if v > 0 or (v == 0 and zero_ok):
                out[col] = v
                if rec is not None:
                    spans = tuple(m.span(g if g != "1" else 1) for g in names)
                    rec.append((_SUM, col, spans, scale, zero_ok))
                if col == "throughput":
                    out["unit"] = fmt.unit
                    if rec is not None:
                        rec.append((_CONST, "unit", fmt.unit, 0.0, None))
                    if fmt.running:
                        out["running"] = True
                        if rec is not None:
                            rec.append((_CONST, "running", True, 0.0, None))
            elif rec is not None:
                rec.append(_DEPENDS)
        if "step" not in out:
            if got.get("step"):
                out["step"] = int(got["step"])
                if rec is not None:
                    rec.append((_INT, "step", m.span("step"), 0.0, None))
            elif got.get("i") and got.get("n"):
                out["step"] = int(got.get("epoch") or 0) * int(got["n"]) + int(got["i"])
                if rec is not None:
                    epoch = m.span("epoch") if got.get("epoch") else None
                    rec.append((_EPOCH_STEP, "step", (epoch, m.span("n"), m.span("i")), 0.0, None))


_MEGATRON = lazy_compile(
    r"iteration\s+(\d+)\s*/\s*\d+\s*\|.*?elapsed time per iteration \(ms\): ([\d.]+)"
    r"(?:.*?tflop/s/gpu\): ([\d.]+))?(?:.*?lm loss: ([\d.e+-]+))?"
)


def _f(text: str) -> float | None:
    """A number as printed (``3,456``, ``1.2e-3``), or a clock duration ``H:MM:SS[.ffffff]``
    (Python's timedelta) in seconds."""
    if ":" in text:
        h, _, rest = text.partition(":")
        m, _, sec = rest.partition(":")
        try:
            return int(h) * 3600 + int(m) * 60 + float(sec)
        except ValueError:
            return None
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def _before(msg: str, lit: str) -> re.Match[str] | None:
    """The number written just before ``lit`` (``1.25s/it``, ``3,456 tokens/s``): its match."""
    at = msg.find(lit)
    if at <= 0:
        return None
    return _NUM_END.search(msg, max(0, at - 32), at)


def _rule_match(low: str, lit: str, rx: re.Pattern[str] | None) -> re.Match[str] | None:
    """Where a ``_STEP_TIME``/``_THROUGHPUT`` rule reads its number (group 1): its regex's
    match, or the number just before its literal when it has no regex; None when the
    literal is absent."""
    if lit not in low:
        return None
    if rx is None:
        return _before(low, lit)
    return rx.search(low)


def read_fields(msg: str) -> dict[str, Any]:
    """The iteration fields of one message (no envelope): step, step_time, throughput, loss.

    Every pattern is lower-case and runs on the lower-cased message, only when its
    literal is in it."""
    return _read(msg.lower(), None)


def _megatron(low: str, m: re.Match[str], rec: Recipe | None) -> dict[str, Any]:
    out: dict[str, Any] = {"step": int(m.group(1)), "step_time": float(m.group(2)) * 1e-3}
    if rec is not None:
        rec += [(_INT, "step", m.span(1), 0.0, None), (_FLOAT, "step_time", m.span(2), 1e-3, None)]
    if m.group(3):
        out["throughput"], out["unit"] = float(m.group(3)), "TFLOP/s"
        if rec is not None:
            rec += [
                (_FLOAT, "throughput", m.span(3), 1.0, None),
                (_CONST, "unit", "TFLOP/s", 0.0, None),
            ]
    if m.group(4):
        out["loss"] = _f(m.group(4))
        if rec is not None:
            rec.append((_F, "loss", m.span(4), 0.0, None))
    return out


def _read(low: str, rec: Recipe | None) -> dict[str, Any]:
    """``read_fields`` of a lower-cased message; with ``rec``, also the recipe that reads
    a message of the same shape (``_replay``)."""
    if "elapsed time per iteration (ms): " in low:  # Megatron: the most common, one regex
        m = _MEGATRON.search(low)
        if m:
            return _megatron(low, m, rec)
    out: dict[str, Any] = {}
    _declared(low, out, rec)
    for lit, rx in _STEP if "step" not in out else ():
        if lit in low:
            m = rx.search(low)
            if m:
                out["step"] = int(m.group(1))
                if rec is not None:
                    rec.append((_INT, "step", m.span(1), 0.0, None))
                break
    for col, rules in (("step_time", _STEP_TIME_RULES), ("throughput", _THROUGHPUT_RULES)):
        if col in out:
            continue
        for lit, rx, scale, rate, unit in rules:
            m = _rule_match(low, lit, rx)
            v = _f(m.group(1)) if m else None
            if v is None:
                continue
            if v > 0:
                out[col] = 1.0 / v if rate else v * scale
                if rec is not None:
                    rec.append((_RULE, col, m.span(1), scale, rate))  # type: ignore[union-attr]
                if unit:
                    out["unit"] = unit
                    if rec is not None:
                        rec.append((_CONST, "unit", unit, 0.0, None))
                break
            if rec is not None:
                rec.append(_DEPENDS)
    if "loss" in low:
        for lit, rx in _LOSS:
            if lit in low:
                m = rx.search(low)
                if m:
                    v = _f(m.group(1))
                    if v is not None:
                        out["loss"] = v
                        if rec is not None:
                            rec.append((_LOSS_V, "loss", m.span(1), 0.0, None))
                    break
    return out


# the rules above as (literal, regex, scale, is a rate, unit): step time first, then throughput
_STEP_TIME_RULES = tuple((lit, rx, scale, rate, "") for lit, rx, scale, rate in _STEP_TIME)
_THROUGHPUT_RULES = tuple((lit, rx, 1.0, False, unit) for unit, lit, rx in _THROUGHPUT)


def _replay(low: str, recipe: Recipe) -> dict[str, Any] | None:
    """The fields of ``low`` read as ``recipe`` says, or None when one of its values would
    have made ``_read`` take another rule (then read the line in full)."""
    out: dict[str, Any] = {}
    for op, col, at, scale, flag in recipe:
        if op == _CONST:
            out[col] = at
        elif op == _INT:
            out[col] = int(low[at[0] : at[1]])
        elif op == _RULE:
            v = _f(low[at[0] : at[1]])
            if v is None or not v > 0:
                return None
            out[col] = 1.0 / v if flag else v * scale
        elif op == _FLOAT:
            v = float(low[at[0] : at[1]])
            out[col] = v * scale if scale != 1.0 else v
        elif op in (_F, _LOSS_V):
            v = _f(low[at[0] : at[1]])
            if v is None and op == _LOSS_V:
                return None
            out[col] = v
        elif op == _SUM:
            vals = [_f(low[a:b]) for a, b in at]
            if None in vals:
                return None
            v = sum(vals) * scale  # type: ignore[arg-type]
            if not (v > 0 or (v == 0 and flag)):
                return None
            out[col] = v
        elif op == _EPOCH_STEP:
            epoch, n, i = at
            e = int(low[epoch[0] : epoch[1]]) if epoch else 0
            out[col] = e * int(low[n[0] : n[1]]) + int(low[i[0] : i[1]])
        else:
            return None
    return out


_ZEROS = bytes.maketrans(b"123456789", b"000000000")
MAX_RECIPES = 512  # shapes kept per file (then forgotten and learnt again)
MAX_SHAPE_CHARS = 1024  # longer lines are always read in full: the cache stays < 1 MB


class FieldReader:
    """``read_fields`` for the lines of one file, fast on the lines it has seen the shape of.

    Two lines whose lower-cased text differs only in its ASCII digits are read by the
    same rules at the same places: no pattern names a digit (``\\d`` matches all of them
    alike), so every literal test and every regex match falls the same way. The first
    line of a shape is read in full and what it did is kept as a recipe; the next lines
    of that shape only convert their numbers. A shape whose rule depended on a value (a
    zero rate passed over for the next rule) is always read in full, as is a replay
    whose values would have made ``read_fields`` choose otherwise. The result is the
    same as ``read_fields``'s, line for line."""

    def __init__(self) -> None:
        self.recipes: dict[bytes, Recipe | None] = {}

    def __call__(self, msg: str) -> dict[str, Any]:
        low = msg.lower()
        if len(low) > MAX_SHAPE_CHARS or not low.isascii():
            return _read(low, None)
        shape = low.encode().translate(_ZEROS)
        if shape in self.recipes:
            recipe = self.recipes[shape]
            got = None if recipe is None else _replay(low, recipe)
            return _read(low, None) if got is None else got
        rec: Recipe = []
        out = _read(low, rec)
        if len(self.recipes) >= MAX_RECIPES:
            self.recipes.clear()
        self.recipes[shape] = None if _DEPENDS in rec else rec
        return out


def _interval_rates(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Throughput printed as a mean since timing began (``N`` steps at ``S``/s each) →
    the rate over each interval between printed steps: ``(N₂-N₁) / (N₂/S₂ - N₁/S₁)``.
    A running mean hides a drop (1,000 steps at full speed dilute ten slow ones); the
    interval rate shows it. Per rank, the median of the rows at each step; the first
    printed step's interval is every step since timing began: its rate is the mean itself."""
    by: dict[tuple[Any, int], list[float]] = {}
    for r in rows:
        if r[5] is not None and r[1] is not None and r[1] > 0:
            by.setdefault((r[2], r[1]), []).append(r[5])
    rate: dict[tuple[Any, int], float] = {}
    last: dict[Any, tuple[int, float]] = {}
    for rank, step in sorted(by, key=lambda k: (str(k[0]), k[1])):
        vals = sorted(by[(rank, step)])
        mean = vals[len(vals) // 2]
        prev = last.get(rank)
        if prev is None and mean > 0:
            rate[(rank, step)] = mean
        elif prev is not None and mean > 0 and prev[1] > 0:
            dt = step / mean - prev[0] / prev[1]
            if dt > 0:
                rate[(rank, step)] = (step - prev[0]) / dt
        last[rank] = (step, mean)
    return [(*r[:5], rate.get((r[2], r[1])), *r[6:]) for r in rows]


class IterationReader:
    """Fed the text parser's chunks; ``finish`` turns what it read into ``result.metrics``."""

    def __init__(self) -> None:
        # (line, step, rank, time, step_time, tput, loss, data_time, comm_time, compute_time)
        self.rows: list[tuple[Any, ...]] = []
        self.texts: dict[int, str] = {}  # evenly spaced raw rows, for evidence
        self.extremes: dict[tuple[int, int, int], tuple[float, int, str]] = {}
        self.stride = 1
        self.text_stride = 1
        self.seen = 0
        self.unit: str | None = None
        self.ordinal: dict[int | None, int] = {}
        self.allowance = float(FULL_LINES)
        self.sampled = False
        self.running = False  # the throughput read is a running mean (``IterFormat.running``)
        self.read_fields = FieldReader()

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
            f = self.read_fields(env.message)
            if "step_time" not in f and "throughput" not in f:
                continue
            rank = env.rank if env.rank is not None else env.task
            if f.get("running"):
                self.running = True
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
                f.get("data_time"),
                f.get("comm_time"),
                f.get("compute_time"),
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
        from ..metrics import Columns, MetricsTable

        rows = _interval_rates(self.rows) if self.running else self.rows
        ranks = [r[2] if r[2] is not None else file_rank for r in rows]
        cols: Columns = {
            "step": ("int64", [r[1] for r in rows]),
            "line": ("int64", [r[0] for r in rows]),
        }
        if any(x is not None for x in ranks):
            cols["rank"] = ("int64", ranks)
        for i, name in (
            (3, "time"),
            (4, "step_time"),
            (5, "throughput"),
            (6, "loss"),
            (7, "data_time"),
            (8, "comm_time"),
            (9, "compute_time"),
        ):
            vals = [r[i] for r in rows]
            if any(v is not None for v in vals):
                cols[name] = ("string" if name == "time" else "float64", vals)
        # the Arrow table is built where it is first read (the analysis), not here
        result.metrics = MetricsTable(columns=cols)
        result.facts["metrics_source"] = "iteration lines"
        if self.sampled:
            result.facts["iteration_lines_sampled"] = True
        if self.running:
            result.facts["iteration_throughput_from_running_mean"] = True
        if self.unit:
            result.facts["iteration_throughput_unit"] = self.unit
        # the rows a finding may quote: evenly spaced ones, and each rank's extremes
        keep = dict(self.texts)
        for _, ln, text in list(self.extremes.values())[: 4 * MAX_TEXT_ROWS]:
            keep[ln] = text
        result.facts["metrics_rows"] = {str(k): v for k, v in sorted(keep.items())}
