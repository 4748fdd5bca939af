"""The generator's per-rank step metrics agree with the job's logs and its scenario."""

from __future__ import annotations

import numpy as np

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
