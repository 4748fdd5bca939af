# ruff: noqa: RUF001, RUF002, RUF003 — × and − are the symbols people read in a formula
"""The cost formula on known inputs, including the worked example of the playbook (seed 000).

The playbook's example: 256 H100s, throughput 142K → 89K tokens/s for 80 min, then a
30 min pause, $4 per GPU-hour, 12 days (288 h) of the run left. It states ≈360 GPU-hours /
$1,440 and ~$86K if undetected; those figures do not follow from its own inputs. Our
formula gives:
    waste = 1 − 89,000 / 142,000 = 0.373239…
    GPU-hours = 256 × (80/60 × 0.373239 + 0.5) = 255.3990 → $1,021.60
    undetected = 256 × 288 × 0.373239 = 27,518.20 GPU-hours → $110,072.79
"""

import pytest

from apps.postmortems.cost import CostInputError, CostInputs, cost_compute

PLAYBOOK = CostInputs(
    gpu_count=256,
    gpu_hour_usd=4.0,
    degraded_hours=80 / 60,
    downtime_hours=0.5,
    baseline_throughput=142_000,
    degraded_throughput=89_000,
    remaining_run_hours=12 * 24,
)


def test_the_playbook_example_follows_our_formula_not_its_stated_totals():
    result = cost_compute(PLAYBOOK)
    waste = 1 - 89_000 / 142_000
    assert result.waste_fraction == pytest.approx(waste)
    assert result.waste_fraction_source == "throughput"
    assert result.degraded_gpu_hours == pytest.approx(256 * (80 / 60) * waste)
    assert result.downtime_gpu_hours == pytest.approx(128.0)
    assert result.gpu_hours_lost == pytest.approx(255.3990, abs=1e-3)
    assert result.cost_usd == pytest.approx(1021.596, abs=1e-2)
    assert result.undetected_gpu_hours == pytest.approx(27518.197, abs=1e-2)
    assert result.undetected_cost_usd == pytest.approx(110072.79, abs=1e-2)
    # The playbook's own totals are not what its inputs give.
    assert round(result.gpu_hours_lost) != 360
    assert round(result.cost_usd) != 1440
    assert result.missing == []


def test_recomputed_steps_since_the_last_checkpoint_are_added():
    inputs = CostInputs(
        gpu_count=64,
        gpu_hour_usd=2.5,
        downtime_hours=1.0,
        waste_fraction=1.0,
        steps_since_checkpoint=450,
        step_time_seconds=8.0,
    )
    result = cost_compute(inputs)
    # 450 steps × 8 s = 1 h of the whole job redone on 64 GPUs.
    assert result.recompute_gpu_hours == pytest.approx(64.0)
    assert result.gpu_hours_lost == pytest.approx(64.0 + 64.0)
    assert result.cost_usd == pytest.approx(128 * 2.5)
    assert any("recomputed GPU-hours = 450 steps × 8 s / 3600 × 64" in s for s in result.steps)


def test_an_entered_waste_fraction_wins_over_throughputs():
    inputs = CostInputs(
        gpu_count=8,
        gpu_hour_usd=1.0,
        degraded_hours=10,
        baseline_throughput=100,
        degraded_throughput=50,
        waste_fraction=0.25,
        remaining_run_hours=100,
    )
    result = cost_compute(inputs)
    assert result.waste_fraction == 0.25 and result.waste_fraction_source == "entered"
    assert result.gpu_hours_lost == pytest.approx(8 * 10 * 0.25)
    assert result.undetected_cost_usd == pytest.approx(8 * 100 * 0.25)


def test_missing_inputs_are_named_and_their_terms_left_out():
    result = cost_compute(CostInputs(gpu_count=16, downtime_hours=2))
    assert result.gpu_hours_lost == pytest.approx(32)
    assert result.cost_usd is None
    assert result.undetected_cost_usd is None
    assert {"waste_fraction", "gpu_hour_usd", "remaining_run_hours"} <= set(result.missing)


def test_a_faster_degraded_throughput_wastes_nothing_rather_than_a_negative_amount():
    result = cost_compute(
        CostInputs(gpu_count=8, degraded_hours=1, baseline_throughput=100, degraded_throughput=120)
    )
    assert result.waste_fraction == 0.0
    assert result.gpu_hours_lost == 0.0


@pytest.mark.parametrize(
    "inputs",
    [
        CostInputs(gpu_count=-1),
        CostInputs(waste_fraction=1.5),
        CostInputs(baseline_throughput=0, degraded_throughput=1),
        CostInputs(downtime_hours=-0.5),
    ],
)
def test_out_of_range_inputs_are_refused_with_a_clear_error(inputs):
    with pytest.raises(CostInputError):
        cost_compute(inputs)


def test_inputs_round_trip_through_json_and_blank_form_values():
    data = PLAYBOOK.to_json()
    assert CostInputs.from_json(data) == PLAYBOOK
    assert CostInputs.from_json({"gpu_count": "256", "downtime_hours": ""}) == CostInputs(
        gpu_count=256
    )
