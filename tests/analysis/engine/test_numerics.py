from rankscope.testing import scenarios_isolation as S

from ._iso_helpers import analyze, kinds


def test_first_nan_step_and_the_grad_norm_spike_before_it():
    files = {"metrics.csv": S.metrics_csv(ranks=2, steps=120, nan_at=90, spike_at=85)}
    doc = analyze(files)
    (f,) = kinds(doc)["nan_onset"]
    assert f["first_nonfinite_step"] == 90 and f["grad_norm_spike_step"] == 85
    assert doc["isolation"]["numerics"]["first_nonfinite_step"] == 90
    lines = files["metrics.csv"].decode().split("\n")
    assert lines[f["evidence"][0]["line"] - 1].startswith("85,")


def test_plateau_and_rise_are_told_apart():
    assert "loss_plateau" in kinds(
        analyze({"m.csv": S.metrics_csv(ranks=1, steps=200, loss_shape="flat")})
    )
    assert "loss_rise" in kinds(
        analyze({"m.csv": S.metrics_csv(ranks=1, steps=200, loss_shape="rising")})
    )
    assert not {"loss_plateau", "loss_rise"} & set(
        kinds(analyze({"m.csv": S.metrics_csv(ranks=1, steps=200)}))
    )


def test_step_time_regression_against_own_and_given_baseline():
    k = kinds(analyze({"m.csv": S.metrics_csv(ranks=2, steps=100, slow_from=70)}))
    (f,) = k["step_time_regression"]
    assert f["ratio"] > 1.25
    assert (
        60
        <= analyze({"m.csv": S.metrics_csv(ranks=2, steps=100, slow_from=70)})["isolation"][
            "step_time"
        ]["regressed_at_step"]
        <= 72
    )
    assert "step_time_regression" not in kinds(
        analyze({"m.csv": S.metrics_csv(ranks=2, steps=100)})
    )
    k2 = kinds(analyze({"m.csv": S.metrics_csv(ranks=2, steps=100)}, baseline_step_time=5.0))
    assert k2["step_time_regression"][0]["ratio"] > 1.3


def test_pipeline_bubble_fraction():
    doc = analyze({"m.csv": S.metrics_csv(ranks=1, steps=30)}, pipeline_stages=4, micro_batches=8)
    assert doc["isolation"]["pipeline_bubble"]["fraction"] == round(3 / 11, 4)
