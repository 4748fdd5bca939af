import numpy as np
import pytest

from rankscope.analyzers.memory import shape_of
from rankscope.testing import scenarios_isolation as S

from ._iso_helpers import analyze, assert_evidence_exact, kinds


@pytest.mark.parametrize(
    ("shape", "kind"), [("staircase", "memory_staircase"), ("slope", "memory_slope")]
)
def test_memory_curve_shapes_become_findings(shape, kind):
    files = {"metrics.csv": S.metrics_csv(ranks=4, steps=160, mem_shape=shape)}
    doc = analyze(files)
    (f,) = kinds(doc)[kind]
    assert f["ranks"] == [0, 1, 2, 3]
    ev = f["evidence"][0]
    assert files["metrics.csv"].decode().split("\n")[ev["line"] - 1] == ev["text"]
    assert_evidence_exact(doc, files)


def test_flat_memory_is_healthy():
    doc = analyze({"metrics.csv": S.metrics_csv(ranks=2, steps=100, mem_shape="flat")})
    assert not [f for f in doc["findings"] if f["kind"].startswith("memory_")]
    assert doc["isolation"]["memory"]["shapes"] == {"flat": 2}


def test_shape_of_classifies_noisy_curves():
    rng = np.random.default_rng(1)
    assert shape_of(50 + rng.normal(0, 0.01, 200)) == "flat"
    assert (
        shape_of(np.repeat([10.0, 14.0, 18.0, 22.0], 50) + rng.normal(0, 0.001, 200)) == "staircase"
    )
    assert shape_of(np.linspace(10, 30, 200) + rng.normal(0, 0.05, 200)) == "slope"


def test_headroom_uses_the_capacity_from_an_oom_message():
    files = {
        "metrics.csv": S.metrics_csv(ranks=1, steps=100, mem_shape="slope"),
        **S.worker_cascade(rank=0),
    }
    doc = analyze(files)
    entry = doc["isolation"]["memory"]["ranks"][0]
    assert entry["capacity_gib"] == pytest.approx(79.1) and entry["headroom"] == pytest.approx(
        79.1 - entry["peak"], abs=1e-3
    )
    assert entry["full_at_step"] > 100
