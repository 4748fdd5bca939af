"""Metrics as real exporters write them: names, units, layouts; and iteration lines of logs."""

from __future__ import annotations

import io
import json

import pytest

import rankscope as engine
from rankscope.metrics import place


def _parse(name: str, text: str | bytes) -> engine.ParseResult:
    data = text.encode() if isinstance(text, str) else text
    return engine.parse_artifact(io.BytesIO(data), name=name)


@pytest.mark.parametrize(
    ("name", "canonical", "scale"),
    [
        ("elapsed time per iteration (ms)", "step_time", 1e-3),
        ("Train/Samples/elapsed_time_ms_backward_allreduce", "comm_time", 1e-3),
        ("bwd_allreduce_microstep", "comm_time", 1e-3),
        ("forward-backward-time", "compute_time", 1),
        ("grads-all-reduce", "comm_time", 1),
        ("batch-generator-time", "data_time", 1),
        ("train_step_timing in s", "step_time", 1),
        ("DCGM_FI_DEV_GPU_TEMP", "gpu_temp", 1),
        ("DCGM_FI_DEV_SM_CLOCK", "sm_clock", 1),
        ("DCGM_FI_PROF_SM_ACTIVE", "gpu_util", 100),
        ("DCGM_FI_DEV_FB_USED", "mem_reserved", 1 / 1024),
        ("clocks.sm [MHz]", "sm_clock", 1),
        ("power.limit [W]", "power_limit", 1),
        ("memory.used [MiB]", "mem_reserved", 1 / 1024),
        ("gpu_temp_c", "gpu_temp", 1),
        ("dataloader_ms", "data_time", 1e-3),
        ("trainer/global_step", "step", 1),
        ("s/it", "step_time", 1),
        ("tokens/s", "throughput", 1),
        ("relative_perf_score", "straggler_score", 1),
    ],
)
def test_exporter_names_are_placed_with_their_unit(name: str, canonical: str, scale: float) -> None:
    a = place(name)
    assert a is not None and a.canonical == canonical and a.scale == pytest.approx(scale)


@pytest.mark.parametrize("name", ["lr", "epoch", "data", "wait", "Value", "modelName"])
def test_names_that_are_no_measure_are_not_placed(name: str) -> None:
    assert place(name) is None


def test_mlflow_long_history_becomes_one_row_per_step_in_seconds() -> None:
    text = "key,value,step,timestamp\n" + "".join(
        f"train_loss,{2 - s / 100},{s},{1_763_906_520_000 + s * 1000}\n"
        f"step_time_ms,{1000 + s},{s},{1_763_906_520_000 + s * 1000}\n"
        for s in range(1, 4)
    )
    r = _parse("mlflow-metrics.csv", text)
    assert r.kind == "metrics" and r.error is None
    assert r.metrics.column("step") == [1, 2, 3]
    assert r.metrics.column("step_time") == pytest.approx([1.001, 1.002, 1.003])
    assert r.metrics.column("time")[0] == "2025-11-23T14:02:01"  # epoch ms → UTC


def test_tensorboard_scalar_csv_is_named_by_its_file() -> None:
    r = _parse(
        "run-0-tag-iteration-time.csv",
        "Wall time,Step,Value\n1763906520.5,1,1.2\n1763906521.7,2,1.3\n",
    )
    assert r.kind == "metrics" and r.metrics.column("step_time") == [1.2, 1.3]


def test_wandb_system_metrics_become_one_row_per_gpu() -> None:
    head = "_timestamp,_step,system/gpu.0.temp,system/gpu.1.temp,system/gpu.0.smClock,system/gpu.1.smClock,lr\n"
    r = _parse("wandb_export.csv", head + "1763906520,1,60,88,1980,1300,0.1\n")
    rows = r.metrics.table.to_pylist()
    assert [(x["gpu"], x["gpu_temp"], x["sm_clock"]) for x in rows] == [
        (0, 60.0, 1980.0),
        (1, 88.0, 1300.0),
    ]
    assert r.facts["metrics_unplaced"] == ["lr"]


def test_nvidia_smi_loop_keeps_its_readings_and_gives_a_series() -> None:
    head = "timestamp, index, temperature.gpu, clocks.sm [MHz], power.draw [W], power.limit [W], clocks_event_reasons.hw_thermal_slowdown\n"
    rows = "".join(
        f"2026/03/04 09:00:{s:02d}.100, {g}, {60 + g * 25}, {1980 - g * 600} MHz, 650.00 W, 700.00 W, {'Active' if g else 'Not Active'}\n"
        for s in range(3)
        for g in range(2)
    )
    r = _parse("nvidia-smi-gpu-node-3.csv", head + rows)
    assert r.kind == "nvidia_smi" and r.events  # the hardware readings are still there
    t = r.metrics.table.to_pylist()
    assert len(t) == 6 and t[1]["throttle"] == 0x40 and t[0]["throttle"] == 0
    assert t[1]["host"] == "gpu-node-3" and t[1]["sm_clock"] == 1380.0


def test_a_zoned_time_is_utc_and_a_naive_one_is_kept() -> None:
    lines = [
        json.dumps({"iteration": i, "ts": f"2026-03-04T09:00:0{i}+02:00", "fwd_bwd_ms": 10})
        for i in range(1, 3)
    ]
    r = _parse("m.jsonl", "\n".join(lines))
    assert r.metrics.column("time") == ["2026-03-04T07:00:01", "2026-03-04T07:00:02"]
    r2 = _parse("m.csv", "step,time,step_time\n1,2026-03-04 09:00:01,1.0\n")
    assert r2.metrics.column("time") == ["2026-03-04T09:00:01"]


# -- iteration lines ---------------------------------------------------------------------


def _megatron(n: int, slow_from: int) -> str:
    out = []
    for i in range(1, n + 1):
        ms = 1500.0 * (1.7 if i >= slow_from else 1.0) + (i % 7)
        out.append(
            f"[2026-05-02 10:{i // 60:02d}:{i % 60:02d}] iteration {i * 10:8d}/  500000 | consumed samples: {i * 1280:10d} | "
            f"elapsed time per iteration (ms): {ms:.1f} | throughput per GPU (TFLOP/s/GPU): {270000 / ms:.1f} | "
            f"learning rate: 3.0E-04 | global batch size:   128 | lm loss: 2.1E+00 | loss scale: 1.0 | "
            "number of skipped iterations:   0 | number of nan iterations:   0 |"
        )
    return "\n".join(out) + "\n"


def test_megatron_iteration_lines_are_a_series_and_a_drop_is_a_slowdown() -> None:
    text = _megatron(120, 70)
    r = _parse("train-rank15.log", text)
    assert r.metrics is not None and len(r.metrics) == 120
    assert r.metrics.column("step_time")[0] == pytest.approx(1.501)
    assert r.facts["iteration_throughput_unit"] == "TFLOP/s"
    doc = engine.analyze([r])
    sd = doc["localization"]["slowdown"]
    assert doc["triage"]["shape"] == "slow" and sd["onset_step"] == 700
    assert sd["onset_time"] == "2026-05-02T10:01:10"
    assert sd["factor"] == pytest.approx(1.7, abs=0.05)
    f = next(f for f in doc["findings"] if f["kind"] == "slowdown_decomposed")
    lines = text.split("\n")
    assert all(lines[e["line"] - 1] == e["text"] for e in f["evidence"])


def test_a_steady_log_is_not_slow() -> None:
    doc = engine.analyze([_parse("train.log", _megatron(120, 10_000))])
    assert doc["triage"]["shape"] == "none" and "slowdown" not in doc["localization"]


@pytest.mark.parametrize(
    ("line", "want"),
    [
        (
            " 45%|████▌     | 450/1000 [07:30<09:10,  1.25s/it, loss=2.3]",
            {"step": 450, "step_time": 1.25},
        ),
        (
            "Epoch 0:  45%|███| 450/1000 [07:30<09:10, 2.50it/s, v_num=0]",
            {"step": 450, "step_time": 0.4},
        ),
        (
            "step: 10  loss:  9.1234  memory: 30.5GiB(38.2%)  tps: 3,456  tflops: 180.2  mfu: 45.2%",
            {"step": 10, "throughput": 3456.0},
        ),
        ("iter 100: loss 2.3456, time 123.45ms, mfu 45.67%", {"step": 100, "step_time": 0.12345}),
        (
            "epoch=0/micro_step=100/global_step=100, RunningAvgSamplesPerSec=123.4, CurrSamplesPerSec=120.1, MemAllocated=30.1GB",
            {"step": 100, "throughput": 120.1},
        ),
        (
            "Epoch 0: : 100it [01:00, 1.66it/s, reduced_train_loss=2.3, global_step=99, train_step_timing in s=0.6]",
            {"step": 99, "step_time": 0.6},
        ),
    ],
)
def test_iteration_line_wordings(line: str, want: dict[str, float]) -> None:
    from rankscope.parsers.iterations import read_fields

    got = read_fields(line)
    for k, v in want.items():
        assert got[k] == pytest.approx(v)


def test_a_tqdm_bar_redrawn_in_place_is_one_update_per_carriage_return() -> None:
    segs = [
        f"{n // 8:3d}%| | {n}/800 [00:10<01:40, {0.8 if n < 500 else 1.2:.2f}s/it]"
        for n in range(1, 801)
    ]
    r = _parse("hf.log", "start\n" + "\r".join(segs) + "\ndone\n")
    assert len(r.metrics) == 800 and r.metrics.column("step")[-1] == 800
    doc = engine.analyze([r])
    assert doc["localization"]["slowdown"]["onset_step"] == 500


def test_one_process_series_is_decomposed_without_naming_a_host() -> None:
    """A single series (no rank column): communication grew, compute did not."""
    text = "step,step_time,comm_time,compute_time\n" + "".join(
        f"{s},{1.0 if s < 30 else 2.0},{0.1 if s < 30 else 1.1},0.9\n" for s in range(1, 60)
    )
    doc = engine.analyze([_parse("train_metrics.csv", text)])
    assert doc["triage"]["shape"] == "slow" and doc["triage"]["category"] == "NETWORK"
    assert doc["localization"]["culprit_hosts"] == [] and doc["triage"]["scope"] == "all_ranks"
    assert doc["localization"]["slowdown"]["onset_step"] == 30
    assert "nccl-tests across the job's nodes" in doc["triage"]["summary"]
