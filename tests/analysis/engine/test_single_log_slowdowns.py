"""Slowdowns read from one log: the declared iteration-line formats, the onset patterns
(shift, growth, recurring stretches, a data stall), nccl-tests judged without a fabric
rate, and NCCL's socket fallback."""

from __future__ import annotations

import numpy as np
import pytest

from rankscope.analyzers.slowdown import find_onset
from rankscope.parsers.iterations import FORMATS, LITERALS, FieldReader, read_fields
from rankscope.parsers.nccl_tests import parse_v1_row
from rankscope.parsers.sidecar import TransportReader


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_every_declared_format_reads_its_example(fmt) -> None:
    got = read_fields(fmt.example)
    for col, _, _ in fmt.fields:
        if col == "throughput":
            assert got.get("unit") == fmt.unit
        assert got.get(col) is not None and got[col] >= 0, (fmt.name, got)
    assert fmt.prefilter in LITERALS
    assert fmt.prefilter.decode() in fmt.example or fmt.prefilter == b"\tData "


@pytest.mark.parametrize(
    ("line", "want"),
    [
        (
            "2017-02-14 15:17:56.483761: step 3300, loss = 2.17 (25.3 examples/sec; 10.102 sec/batch)",
            {"step": 3300, "step_time": 10.102, "throughput": 25.3},
        ),
        (
            "1010\timages/sec: 186.6 +/- 0.5 (jitter = 14.8)\t7.268",
            {"step": 1010, "throughput": 186.6},
        ),
        ("2023-03-20 09:19:29.944061: This epoch took 109.110585 s", {"step_time": 109.110585}),
        ("2019-03-09 05:59:51,511: Iteration took 108.539 s.", {"step_time": 108.539}),
        (
            "    Epoch: [1][100/5005]\tTime 8.719 (0.361)\tData 8.597 (0.230)\tLoss 1.2987 (1.2753)",
            {"step": 5105, "step_time": 8.719, "data_time": 8.597},
        ),
        (
            "Epoch: [3][ 10/500]\tTime  0.414 ( 0.414)\tData  0.001 ( 0.001)\tLoss 1.0",
            {"step": 1510, "step_time": 0.414, "data_time": 0.001},
        ),
        ("Iteration duration: 0.0496 gc.get_count(): (11, 7, 0)", {"step_time": 0.0496}),
        ("step duration: 120.5 ms", {"step_time": 0.1205}),
        (
            "ep 29 train, step 1, ce 5.396, fer 0.832, 3.249 sec/step",
            {"step": 1, "step_time": 3.249},
        ),
        (
            "INFO:__main__:Epoch   2 time  13.0 lr = 0.700 avg_loss = 0.0107",
            {"step": 2, "step_time": 13.0},
        ),
        (
            "[Rank 0] rank=0 time (ms) | forward_microstep: 1000.00 | backward_microstep: 3000.00 | "
            "backward_inner_microstep: 2500.00 | backward_allreduce_microstep: 500.00 | step_microstep: 10.00",
            {"step_time": 4.01, "compute_time": 3.51, "comm_time": 0.5},
        ),
        (
            "run3; step 000032/200000; rtime 210.16; itime 212.36; loss = 76.1",
            {"step": 32, "step_time": 212.36, "data_time": 210.16},
        ),
        (
            "epoch:  10,     loss: 0.2568,   time now: 33:28.830665  time delta: 1:02:03.500000",
            {"step": 10, "step_time": 3723.5},
        ),
    ],
)
def test_format_examples(line: str, want: dict) -> None:
    got = read_fields(line)
    for k, v in want.items():
        assert got.get(k) == pytest.approx(v), (k, got)


def test_deepspeed_short_timer_names() -> None:
    got = read_fields(
        "time (ms) | fwd_microstep: 100.5 | bwd_microstep: 300.0 | bwd_inner_microstep: 250.0 "
        "| bwd_allreduce_microstep: 50.0 | step_microstep: 5.0"
    )
    assert got["comm_time"] == pytest.approx(0.05) and got["compute_time"] == pytest.approx(0.3555)


def test_deepspeed_microstep_is_not_a_step_number() -> None:
    got = read_fields("time (ms) | forward_microstep: 1286.00 | backward_microstep: 4702.61")
    assert "step" not in got and got["step_time"] == pytest.approx(5.98861)


_SAME_SHAPE = [
    # a line of each shape first, then lines of the same shape with other numbers
    "iteration 1200/ 5000 | elapsed time per iteration (ms): 1234.5 | "
    "throughput per gpu (tflop/s/gpu): 180.3 | lm loss: 2.345e+00 |",
    "iteration 9876/ 5000 | elapsed time per iteration (ms): 9999.9 | "
    "throughput per gpu (tflop/s/gpu): 111.1 | lm loss: 9.999e+00 |",
    " 45%|####5     | 450/1000 [07:30<09:10,  2.50s/it, loss=2.3]",
    " 46%|####6     | 460/1000 [07:40<09:00,  0.00s/it, loss=2.3]",  # 0 s/it: no step time
    "step 12 | step_time 0.000s | 2.50it/s | tokens/s 1234",  # a zero: the next rule
    "step 13 | step_time 0.250s | 4.00it/s | tokens/s 5678",
    "step 14 | step_time 0.000s | 2.00it/s | tokens/s 0000",
    "epoch: [1][100/5005]\ttime 8.719 (0.361)\tdata 8.597 (0.230)\tloss 1.2987 (1.2753)",
    "epoch: [2][200/5005]\ttime 0.000 (0.361)\tdata 0.000 (0.230)\tloss 0.0000 (1.2753)",
    "1010\timages/sec: 186.6 +/- 0.5 (jitter = 14.8)\t7.268",
    "2020\timages/sec: 000.0 +/- 0.5 (jitter = 14.8)\t7.268",
    "rank=0 time (ms) | forward_microstep: 1286.00 | backward_microstep: 4702.61 | "
    "backward_inner_microstep: 4215.88 | backward_allreduce_microstep: 486.68 | step_microstep: 0.05",
    "rank=0 time (ms) | forward_microstep: 0000.00 | backward_microstep: 0000.00 | "
    "backward_inner_microstep: 0000.00 | backward_allreduce_microstep: 000.00 | step_microstep: 0.00",
    "step 7, loss = 2.17 (25.3 examples/sec; 10.102 sec/batch) tokens/s 12",
    "step 8, loss = 2.17 (00.0 examples/sec; 00.000 sec/batch) tokens/s 00",
]


def test_a_file_reads_each_line_as_read_fields_does_whatever_its_numbers() -> None:
    """The per-file reader reuses how a line of the same shape was read; a value that makes
    another rule win (a zero rate, a zero time) must still be read as on its own."""
    reader = FieldReader()
    for _ in range(2):
        for line in _SAME_SHAPE:
            assert reader(line) == read_fields(line), line
    assert reader("step 15 | step_time 0.000s | 2.00it/s | tokens/s 0000")["step_time"] == 0.5


def _onset(ys: list[float], start: int = 1) -> dict | None:
    return find_onset(np.arange(start, start + len(ys)), np.array(ys, float), 0.2)


def test_short_shift_needs_every_later_row_slower() -> None:
    got = _onset([0.2, 0.17, 0.17, 0.17, 8.7, 8.9, 8.6])
    assert got["pattern"] == "shift" and got["step"] == 5 and got["factor"] > 20
    assert _onset([0.2, 0.17, 0.9, 0.17, 0.18, 0.9, 0.17]) is None


def test_linear_growth() -> None:
    got = _onset([27.4, 84.6, 142.5, 202.4], start=5)
    assert got["pattern"] == "growth"
    assert _onset([10, 10.1, 9.9, 10, 30, 31, 30.5])["pattern"] == "shift"


def test_recurring_slow_stretches_start_at_the_first() -> None:
    ys = [3.6, 10.1, 10.3, 9.9, 9.2, 3.8, 3.6, 10.0, 9.6, 3.7, 3.6, 3.7]
    got = _onset(ys, start=3290)
    assert got["pattern"] == "recurring" and got["step"] == 3291 and got["stretches"] == 2


def test_one_slow_row_or_noise_is_not_a_slowdown() -> None:
    assert (
        _onset([0.008, 0.05, 0.0086, 0.0081, 0.0082, 0.008, 0.0081, 0.0078, 0.0102, 0.0093]) is None
    )
    rng = np.random.default_rng(0)
    assert _onset(list(1.0 + 0.05 * rng.standard_normal(200))) is None


def test_nccl1_row() -> None:
    row = parse_v1_row("10000000    char     sum    5.650   1.77   1.77")
    assert row is not None and row["busbw"] == 1.77 and row["time_us"] == pytest.approx(5650)


def test_transport_reader_keeps_the_first_line_of_each_fact() -> None:
    r = TransportReader()
    r.take("[0] NCCL INFO NET/IB : No device found.", 3)
    r.take("[0] NCCL INFO Using network Socket", 6)
    r.take("[1] NCCL INFO Using network Socket", 9)
    assert r.facts["net"][:2] == ["Socket", 6] and r.facts["no_ib_device"][1] == 3


def _engine(tmp_path, name: str, text: str) -> dict:
    from rankscope import analyze
    from rankscope.cli import parse_paths

    p = tmp_path / name
    p.write_text(text)
    return analyze(parse_paths([p], jobs=1))


def test_socket_on_one_node_is_not_a_slowdown(tmp_path) -> None:
    text = (
        "gpu1:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
        "gpu1:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n"
        "gpu1:1:1 [0] NCCL INFO Using network Socket\n"
    )
    assert _engine(tmp_path, "train.log", text)["triage"]["shape"] == "none"
    # a file named after a node is no proof that other nodes took part
    assert _engine(tmp_path, "node1.log", text)["triage"]["shape"] == "none"
    # IB was asked for: the job meant to leave the node, and NCCL fell back to sockets
    asked = "gpu1:1:1 [0] NCCL INFO NCCL_IB_HCA set to mlx5_0\n" + text
    doc = _engine(tmp_path, "node1.log", asked)
    assert doc["triage"]["shape"] == "slow" and doc["triage"]["category"] == "NETWORK"


def test_data_stall_is_data(tmp_path) -> None:
    rows = [f"step {i:06d}/1000; rtime 0.05; itime 2.0{i % 3}; loss = 1.0" for i in range(10, 20)]
    rows.insert(5, "step 000099/1000; rtime 300.1; itime 302.2; loss = 1.0")
    doc = _engine(tmp_path, "train.log", "\n".join(rows) + "\n")
    assert doc["triage"]["shape"] == "slow" and doc["triage"]["category"] == "DATA"


def test_hot_gpu_in_nvidia_smi_makes_an_unlocated_slowdown_hardware() -> None:
    from rankscope.testing import scenarios_isolation as S

    from ._iso_helpers import analyze

    rows = [
        f"step {i}, loss = 1.0 ({v} examples/sec; {128 / v:.3f} sec/batch)"
        for i, v in enumerate([9000] * 8 + [4000] * 8, start=100)
    ]
    log = {"train.log": ("\n".join(rows) + "\n").encode()}
    assert analyze(log)["triage"]["category"] == "UNKNOWN"
    doc = analyze({**log, **S.nvidia_smi_csv(host="node-12", temps=(92, 93))})
    assert doc["triage"]["shape"] == "slow" and doc["triage"]["category"] == "HARDWARE"
    assert doc["localization"]["culprit_hosts"] == ["node-12"]
    cool = analyze({**log, **S.nvidia_smi_csv(host="node-12", temps=(40, 44))})
    assert cool["triage"]["category"] == "UNKNOWN"


def test_running_mean_images_per_sec_becomes_interval_rates(tmp_path) -> None:
    """tf_cnn_benchmarks prints images/sec as the mean since warm-up: 200 steps at 200/s
    then 100 at 50/s only bring the mean to ~133, but each interval's rate is 50."""
    lines, t = [], 0.0
    for n in range(10, 310, 10):
        t += 10 / (200.0 if n <= 200 else 50.0)
        lines.append(f"{n}\timages/sec: {n / t:.1f} +/- 0.5 (jitter = 1.0)\t7.2")
    doc = _engine(tmp_path, "benchmark.log", "\n".join(lines) + "\n")
    assert doc["triage"]["shape"] == "slow"
    sd = doc["localization"]["slowdown"]
    assert sd["onset_step"] == 210 and sd["factor"] >= 3.5


def test_a_tenfold_throughput_drop_is_told_in_the_logs_unit_not_in_seconds(tmp_path) -> None:
    speeds = [2200.0, 2180.5, 2230.1, 2210.7, 2190.2, 151.3, 149.8, 150.4, 152.1, 148.9]
    lines = [
        f"Epoch[0] Batch [{50 * (i + 1)}]\tSpeed: {v:.2f} samples/sec\tTrain-mae=20.1"
        for i, v in enumerate(speeds)
    ]
    doc = _engine(tmp_path, "train.log", "\n".join(lines) + "\n")
    assert doc["triage"]["shape"] == "slow"
    summary = doc["triage"]["summary"]
    assert "fell from 2" in summary and " s to " not in summary, summary


def test_socket_does_not_mask_a_failure(tmp_path) -> None:
    text = (
        "gpu1:1:1 [0] NCCL INFO NET/IB : No device found.\n"
        "gpu1:1:1 [0] NCCL INFO Using network Socket\n"
        "[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
        "ran for 600123 milliseconds before timing out.\n"
    )
    doc = _engine(tmp_path, "node0.log", text)
    assert doc["triage"]["shape"] != "slow"


def test_nccl_tests_across_nodes_over_sockets_is_slow(tmp_path) -> None:
    text = "\n".join(
        [
            "# nThread 1 nGpus 1 minBytes 8 maxBytes 536870912 step: 2(factor) warmup iters: 5 iters: 20",
            "#  Rank  0 Group  0 Pid   101 on      nodea device  0 [0x07] NVIDIA A100-SXM4-80GB",
            "#  Rank  1 Group  0 Pid   202 on      nodeb device  0 [0x07] NVIDIA A100-SXM4-80GB",
            "nodea:101:101 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>",
            "nodea:101:101 [0] NCCL INFO Using network Socket",
            "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
            "   268435456      67108864     float     sum      -1   250000    1.07    1.07      0   250000    1.07    1.07      0",
            "   536870912     134217728     float     sum      -1   500000    1.07    1.07      0   500000    1.07    1.07      0",
            "# Out of bounds values : 0 OK",
            "# Avg bus bandwidth    : 1.07",
        ]
    )
    doc = _engine(tmp_path, "all_reduce_perf.log", text + "\n")
    assert doc["triage"]["shape"] == "slow" and doc["triage"]["category"] == "NETWORK"
    assert "sockets" in doc["triage"]["summary"]


def _engine_files(tmp_path, files: dict[str, str]) -> dict:
    from rankscope import analyze
    from rankscope.cli import parse_paths

    paths = []
    for name, text in files.items():
        p = tmp_path / name
        p.write_text(text)
        paths.append(p)
    return analyze(parse_paths(paths, jobs=1))


def _running(points: list[tuple[int, float]]) -> str:
    """Eight ranks print the same running-mean images/sec line at each step."""
    return "".join(
        f"{n}\timages/sec: {v:.1f} +/- 0.5 (jitter = 15.0)\t7.1\n"
        for n, v in points
        for _ in range(8)
    )


def test_a_running_mean_that_falls_at_the_end_of_a_short_excerpt_is_slow(tmp_path) -> None:
    """Three prints are enough when the throughput is a mean since timing began: 500 steps
    at 200/s, then a mean of 190 ten steps later means those ten ran ~3.7x slower."""
    doc = _engine(tmp_path, "bench.log", _running([(500, 200.0), (510, 200.0), (520, 190.0)]))
    assert doc["triage"]["shape"] == "slow"
    sd = doc["localization"]["slowdown"]
    assert sd["onset_step"] == 520 and 3.5 < sd["factor"] < 4
    # the run recovered: one slow interval (a checkpoint, an evaluation) is not a slowdown
    back = [(500, 200.0), (510, 200.0), (520, 190.0), (530, 192.0), (540, 193.5)]
    assert _engine(tmp_path, "bench.log", _running(back))["triage"]["shape"] == "none"
    # a mean that moves by its rounding only is steady
    flat = [(500, 200.0), (510, 200.0), (520, 199.9)]
    assert _engine(tmp_path, "bench.log", _running(flat))["triage"]["shape"] == "none"


def _epochs(times: list[float], stamp: str | None = None) -> str:
    out = ""
    for i, t in enumerate(times, start=1):
        pre = f"{stamp}:{i:02d}:00 " if stamp else ""
        out += f"{pre}INFO:train:Epoch {i:3d} time {t:5.1f} lr = 0.1 avg_loss = 0.1 acc = 99.0\n"
    return out


def test_two_runs_of_one_workload_one_slower_at_every_epoch(tmp_path) -> None:
    fast, slow = [16.0, 10.0, 10.2, 10.1, 10.0], [19.0, 12.6, 12.5, 12.7, 12.6]
    doc = _engine_files(tmp_path, {"run_a.log": _epochs(fast), "run_b.log": _epochs(slow)})
    assert doc["triage"]["shape"] == "slow" and doc["triage"]["category"] == "UNKNOWN"
    assert "run_b.log" in doc["triage"]["summary"]
    # the names differ only in a version: that version is what differs between the runs
    (tmp_path / "v").mkdir()
    doc = _engine_files(
        tmp_path / "v", {"train_torch2.1.log": _epochs(fast), "train_torch2.2.log": _epochs(slow)}
    )
    assert doc["triage"]["shape"] == "slow" and doc["triage"]["category"] == "SOFTWARE"
    assert "2.1 → 2.2" in doc["triage"]["summary"]


def test_two_files_that_are_not_two_runs_are_not_compared(tmp_path) -> None:
    fast, slow = [16.0, 10.0, 10.2, 10.1, 10.0], [19.0, 12.6, 12.5, 12.7, 12.6]
    # not slower at every shared epoch: noise between two runs
    noisy = [19.0, 12.6, 10.1, 12.7, 12.6]
    doc = _engine_files(tmp_path, {"run_a.log": _epochs(fast), "run_b.log": _epochs(noisy)})
    assert doc["triage"]["shape"] == "none"
    # the same hours in both files: processes of one job, not two runs
    (tmp_path / "t").mkdir()
    doc = _engine_files(
        tmp_path / "t",
        {
            "a.log": _epochs(fast, "2024-05-01 10"),
            "b.log": _epochs(slow, "2024-05-01 10"),
        },
    )
    assert doc["triage"]["shape"] == "none"


def test_a_long_running_mean_slow_only_at_its_last_print_is_not_a_trend(tmp_path) -> None:
    """Twenty prints at full speed, then one slow interval: the end of the log, not a
    trend; two slow intervals are."""
    pts, t = [], 0.0
    for n in range(100, 2100, 100):
        t += 100 / 200.0
        pts.append((n, n / t))
    t += 100 / 40.0
    last = [(2100, 2100 / t)]
    assert _engine(tmp_path, "bench.log", _running(pts + last))["triage"]["shape"] == "none"
    t += 100 / 40.0
    both = [*last, (2200, 2200 / t)]
    doc = _engine(tmp_path, "bench.log", _running(pts + both))
    assert doc["triage"]["shape"] == "slow"
