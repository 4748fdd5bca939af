import pytest

from apps.investigation.verification import (
    FIXED,
    INCONCLUSIVE,
    NOT_FIXED,
    REGRESSION,
    compare_metric,
    metric_direction,
    parse_trials,
    verify_fix,
)


def test_step_time_and_memory_are_lower_is_better_throughput_higher():
    assert metric_direction("step_time") == "lower"
    assert metric_direction("mem_peak") == "lower"
    assert metric_direction("throughput") == "higher"
    assert metric_direction("tokens_per_sec") == "higher"
    assert metric_direction("mfu") == "higher"


def test_it_averages_trials_and_signs_the_improvement_by_direction():
    c = compare_metric("step_time", [10.0, 12.0], [8.0, 8.2])
    assert c.baseline_mean == pytest.approx(11.0)
    assert c.post_mean == pytest.approx(8.1)
    assert c.change == pytest.approx(-2.9 / 11.0)
    assert c.improvement == pytest.approx(2.9 / 11.0)
    assert c.outcome == "improved"
    t = compare_metric("throughput", [100.0], [90.0])
    assert t.improvement == pytest.approx(-0.10)
    assert t.outcome == "worse"


def test_a_faster_step_with_nothing_worse_is_fixed():
    r = verify_fix(
        {"step_time": [11.2, 11.0, 11.3], "mem_peak": [70, 70, 70]},
        {"step_time": [7.1, 7.0, 7.2], "mem_peak": [71, 70, 71]},
        target="step_time",
    )
    assert r.verdict == FIXED
    assert r.regressions == []
    assert r.side_effects == []


def test_peak_memory_up_ten_percent_is_a_regression_and_a_side_effect():
    r = verify_fix(
        {"step_time": [11.0, 11.0], "mem_peak": [70.0, 70.0]},
        {"step_time": [7.0, 7.0], "mem_peak": [77.0, 77.0]},
        target="step_time",
    )
    assert r.verdict == REGRESSION
    assert r.regressions == ["mem_peak +10.0 % (70 → 77)"]
    assert r.side_effects == r.regressions


def test_a_change_within_tolerance_is_not_fixed():
    r = verify_fix({"step_time": [10.0]}, {"step_time": [9.7]}, target="step_time")
    assert r.verdict == NOT_FIXED
    r2 = verify_fix({"step_time": [10.0]}, {"step_time": [9.7]}, target="step_time", tolerance=0.02)
    assert r2.verdict == FIXED


def test_a_change_smaller_than_the_spread_between_trials_is_inconclusive():
    r = verify_fix(
        {"step_time": [8.0, 14.0, 11.0]}, {"step_time": [7.0, 13.0, 10.0]}, target="step_time"
    )
    assert r.metrics[0].outcome == "noisy"
    assert r.verdict == INCONCLUSIVE


def test_missing_post_fix_values_are_inconclusive():
    r = verify_fix({"step_time": [10.0]}, {}, target="step_time")
    assert r.verdict == INCONCLUSIVE
    assert any("both sides" in n for n in r.notes)


def test_a_recurring_problem_is_not_fixed_whatever_the_numbers():
    r = verify_fix(
        {"step_time": [10.0]}, {"step_time": [5.0]}, target="step_time", problem_resolved=False
    )
    assert r.verdict == NOT_FIXED


def test_without_a_target_any_metric_getting_worse_is_a_regression():
    r = verify_fix(
        {"throughput": [100.0], "step_time": [1.0]}, {"throughput": [120.0], "step_time": [1.2]}
    )
    assert r.verdict == REGRESSION
    assert r.regressions == ["step_time +20.0 % (1 → 1.2)"]


def test_an_unknown_target_is_rejected():
    with pytest.raises(ValueError, match="not measured"):
        verify_fix({"step_time": [1.0]}, {"step_time": [1.0]}, target="loss")


def test_it_parses_entered_trials_and_names_bad_lines():
    assert parse_trials("step_time: 1.0, 1.2 1.1\n\nmem peak = 70;71") == {
        "step_time": [1.0, 1.2, 1.1],
        "mem_peak": [70.0, 71.0],
    }
    with pytest.raises(ValueError, match="line 2"):
        parse_trials("step_time: 1\nstep_time: fast")
    with pytest.raises(ValueError, match="line 1"):
        parse_trials("just words")
