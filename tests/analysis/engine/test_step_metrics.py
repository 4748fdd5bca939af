"""The generator's per-rank step metrics agree with the job's logs and its scenario."""

from __future__ import annotations

import io

import numpy as np
import pytest

import rankscope as engine
from rankscope.testing.generate import generate
from rankscope.testing.step_metrics import FILE_NAME, main, write_step_metrics


def _table(path):
    with path.open("rb") as f:
        result = engine.parse_artifact(f, name=path.name)
    assert result.kind == "metrics" and result.error is None
    return result.metrics


def test_the_stalled_rank_slows_down_before_it_stops_and_the_parser_reads_every_column(tmp_path):
    manifest = generate("data_stall", tmp_path, ranks=32)
    culprit = manifest["expected"]["culprit_ranks"][0]
    path = write_step_metrics(manifest, tmp_path / FILE_NAME)
    m = _table(path)
    assert len(m) == 32 * manifest["spec"]["steps"]
    for col in ("step_time", "compute_time", "comm_time", "loss", "grad_norm", "mem_reserved"):
        assert m.has(col)
    step, rank, st = (m.numpy(c).astype(float) for c in ("step", "rank", "step_time"))
    last = step.max()
    mine = st[(rank == culprit) & (step == last)][0]
    others = np.median(st[(rank != culprit) & (step == last)])
    early = np.median(st[step <= 10])
    assert mine > 2 * early and mine > others > early
    hosts = dict(zip(m.numpy("rank").tolist(), m.column("host"), strict=True))
    assert hosts[culprit] == manifest["expected"]["culprit_hosts"][0]


def test_a_healthy_job_has_flat_step_times_and_the_cli_writes_beside_the_manifest(tmp_path):
    generate("healthy", tmp_path, ranks=16)
    assert main([str(tmp_path)]) == 0
    m = _table(tmp_path / FILE_NAME)
    st = m.numpy("step_time").astype(float)
    assert st.max() < 1.1 * np.median(st)


@pytest.mark.parametrize(
    "line",
    [
        "step {i} | loss 2.1 | 1234 token/s",
        "step {i} | loss 2.1 | 1234 tok/s",
        "step {i} | loss 2.1 | samples/s: 88.5",
        "step {i} | loss 2.1 | 88.5 sample/s",
        "Epoch 0: {i}it [00:01, 2.50it/s, loss=2.3]",
        "step {i}, loss = 2.17 (25.3 examples/sec; 10.102 sec/batch)",
        "{i}\timages/sec: 186.6 +/- 0.5 (jitter = 14.8)\t7.268",
        "ep 29 train, step {i}, ce 5.396, 3.249 sec/step",
    ],
)
def test_every_rate_unit_the_readers_know_makes_a_line_an_iteration_line(line: str) -> None:
    # each rate unit is a prefilter literal of its own: a unit left out of the scan would
    # leave its logs without a step-time or throughput series
    data = "".join(line.format(i=i * 10) + "\n" for i in range(1, 31)).encode()
    r = engine.parse_artifact(io.BytesIO(data), name="rank_0.log")
    assert r.metrics is not None and len(r.metrics) == 30
    assert {"step_time", "throughput"} & set(r.metrics.columns)
