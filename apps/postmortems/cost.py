# ruff: noqa: RUF001, RUF002, RUF003 — × and − are the symbols people read in a formula
"""The compute-cost model of an incident: pure functions over plain numbers (no Django).

    waste fraction      = 1 − degraded throughput / baseline throughput   (or entered)
    degraded GPU-hours  = GPUs × degraded hours × waste fraction
    downtime GPU-hours  = GPUs × downtime hours
    recompute GPU-hours = steps since the last good checkpoint × step time (s) / 3600 × GPUs
    GPU-hours lost      = degraded + downtime + recompute GPU-hours
    dollars             = GPU-hours lost × $ per GPU-hour
    if undetected       = GPUs × remaining run hours × waste fraction  (GPU-hours), × $ per GPU-hour

Every result is recomputed from the inputs; nothing is entered twice. A missing input counts
as zero for its term, and the result says which terms could not be computed, so a
half-filled form still gives an honest partial number rather than a made-up one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

FORMULA_LINES: list[str] = [
    "waste fraction = 1 − degraded throughput / baseline throughput (or entered)",
    "GPU-hours lost = GPUs × (degraded hours × waste fraction + downtime hours)"
    " + recomputed GPU-hours",
    "recomputed GPU-hours = steps since last good checkpoint × step time (s) / 3600 × GPUs",
    "cost = GPU-hours lost × $ per GPU-hour",
    "cost if undetected = GPUs × remaining run hours × waste fraction × $ per GPU-hour",
]

# (field name, label, unit) in the order the form and the markdown show them.
INPUT_LABELS: list[tuple[str, str, str]] = [
    ("gpu_count", "GPUs", ""),
    ("gpu_hour_usd", "$ per GPU-hour", "$"),
    ("degraded_hours", "Degraded hours", "h"),
    ("downtime_hours", "Downtime hours", "h"),
    ("baseline_throughput", "Baseline throughput", "/s"),
    ("degraded_throughput", "Degraded throughput", "/s"),
    ("waste_fraction", "Waste fraction (entered; overrides throughput)", ""),
    ("steps_since_checkpoint", "Steps recomputed since last good checkpoint", ""),
    ("step_time_seconds", "Step time", "s"),
    ("remaining_run_hours", "Remaining run hours", "h"),
]


class CostInputError(ValueError):
    """An input is out of range (negative, a fraction outside 0..1, zero baseline)."""


@dataclass(frozen=True)
class CostInputs:
    gpu_count: int | None = None
    gpu_hour_usd: float | None = None
    degraded_hours: float | None = None
    downtime_hours: float | None = None
    baseline_throughput: float | None = None
    degraded_throughput: float | None = None
    waste_fraction: float | None = None  # entered by hand; wins over the throughputs
    steps_since_checkpoint: int | None = None
    step_time_seconds: float | None = None
    remaining_run_hours: float | None = None

    def validate(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and value < 0:
                raise CostInputError(f"{f.name} cannot be negative (got {value}).")
        if self.waste_fraction is not None and self.waste_fraction > 1:
            raise CostInputError("waste_fraction is a fraction between 0 and 1.")
        if self.baseline_throughput == 0:
            raise CostInputError("baseline_throughput must be above zero.")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> CostInputs:
        data = data or {}
        kwargs: dict[str, Any] = {}
        for f in fields(cls):
            value = data.get(f.name)
            if value is None or value == "":
                continue
            number = float(value)
            kwargs[f.name] = (
                int(number) if f.name in {"gpu_count", "steps_since_checkpoint"} else number
            )
        return cls(**kwargs)


@dataclass(frozen=True)
class CostResult:
    inputs: CostInputs
    waste_fraction: float | None
    waste_fraction_source: str  # "entered" | "throughput" | "missing"
    degraded_gpu_hours: float
    downtime_gpu_hours: float
    recompute_gpu_hours: float
    gpu_hours_lost: float
    cost_usd: float | None
    undetected_gpu_hours: float | None
    undetected_cost_usd: float | None
    missing: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)  # the arithmetic, one line per term

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["inputs"] = self.inputs.to_json()
        return data


def _num(value: float) -> str:
    """A number as people write it: thousands separated, at most 4 significant decimals."""
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.4f}".rstrip("0").rstrip(".")


def cost_compute(inputs: CostInputs) -> CostResult:
    """Apply the formula to ``inputs``; raise CostInputError on out-of-range input.

    Each step appends its arithmetic to ``steps`` and what it lacked to ``missing``, in
    the order the report prints them.
    """
    inputs.validate()
    missing: list[str] = []
    steps: list[str] = []
    waste, source = _waste_fraction(inputs, steps, missing)
    gpus = inputs.gpu_count or 0
    if not inputs.gpu_count:
        missing.append("gpu_count")
    degraded = _degraded_gpu_hours(inputs, gpus, waste, steps, missing)
    downtime = _downtime_gpu_hours(inputs, gpus, steps)
    recompute = _recompute_gpu_hours(inputs, gpus, steps, missing)
    total = degraded + downtime + recompute
    steps.append(f"GPU-hours lost = {_num(round(total, 2))}")
    cost = _price(inputs, total, "cost", steps, missing)
    undetected_hours, undetected_cost = _undetected(inputs, gpus, waste, steps, missing)
    return CostResult(
        inputs=inputs,
        waste_fraction=waste,
        waste_fraction_source=source,
        degraded_gpu_hours=degraded,
        downtime_gpu_hours=downtime,
        recompute_gpu_hours=recompute,
        gpu_hours_lost=total,
        cost_usd=cost,
        undetected_gpu_hours=undetected_hours,
        undetected_cost_usd=undetected_cost,
        missing=missing,
        steps=steps,
    )


def _waste_fraction(
    inputs: CostInputs, steps: list[str], missing: list[str]
) -> tuple[float | None, str]:
    """The share of the GPUs' work wasted while degraded, and where it came from."""
    if inputs.waste_fraction is not None:
        steps.append(f"waste fraction = {_num(inputs.waste_fraction)} (entered)")
        return inputs.waste_fraction, "entered"
    if inputs.baseline_throughput and inputs.degraded_throughput is not None:
        # A "degraded" throughput above the baseline wastes nothing, not a negative amount.
        waste = max(0.0, 1 - inputs.degraded_throughput / inputs.baseline_throughput)
        steps.append(
            f"waste fraction = 1 − {_num(inputs.degraded_throughput)} / "
            f"{_num(inputs.baseline_throughput)} = {_num(round(waste, 4))}"
        )
        return waste, "throughput"
    missing.append("waste_fraction")
    return None, "missing"


def _degraded_gpu_hours(
    inputs: CostInputs, gpus: int, waste: float | None, steps: list[str], missing: list[str]
) -> float:
    if not inputs.degraded_hours:
        return 0.0
    if waste is None:
        missing.append("degraded_hours × waste fraction")
        return 0.0
    degraded = gpus * inputs.degraded_hours * waste
    steps.append(
        f"degraded GPU-hours = {gpus:,} × {_num(inputs.degraded_hours)} h × "
        f"{_num(round(waste, 4))} = {_num(round(degraded, 2))}"
    )
    return degraded


def _downtime_gpu_hours(inputs: CostInputs, gpus: int, steps: list[str]) -> float:
    downtime = gpus * (inputs.downtime_hours or 0.0)
    if inputs.downtime_hours:
        steps.append(
            f"downtime GPU-hours = {gpus:,} × {_num(inputs.downtime_hours)} h = "
            f"{_num(round(downtime, 2))}"
        )
    return downtime


def _recompute_gpu_hours(
    inputs: CostInputs, gpus: int, steps: list[str], missing: list[str]
) -> float:
    """GPU-hours spent again on the steps since the last checkpoint."""
    if not inputs.steps_since_checkpoint:
        return 0.0
    if inputs.step_time_seconds is None:
        missing.append("step_time_seconds")
        return 0.0
    recompute = inputs.steps_since_checkpoint * inputs.step_time_seconds / 3600 * gpus
    steps.append(
        f"recomputed GPU-hours = {inputs.steps_since_checkpoint:,} steps × "
        f"{_num(inputs.step_time_seconds)} s / 3600 × {gpus:,} = "
        f"{_num(round(recompute, 2))}"
    )
    return recompute


def _price(
    inputs: CostInputs, total: float, label: str, steps: list[str], missing: list[str] | None
) -> float | None:
    """``total`` GPU-hours at the GPU-hour price (None without a price)."""
    if inputs.gpu_hour_usd is None:
        if missing is not None:
            missing.append("gpu_hour_usd")
        return None
    cost = total * inputs.gpu_hour_usd
    steps.append(f"{label} = {_num(round(total, 2))} × ${_num(inputs.gpu_hour_usd)} = ${cost:,.2f}")
    return cost


def _undetected(
    inputs: CostInputs, gpus: int, waste: float | None, steps: list[str], missing: list[str]
) -> tuple[float | None, float | None]:
    """GPU-hours and cost had the job run degraded for the rest of its planned time."""
    if inputs.remaining_run_hours is None:
        missing.append("remaining_run_hours")
        return None, None
    if waste is None or not inputs.gpu_count:
        return None, None
    hours = gpus * inputs.remaining_run_hours * waste
    steps.append(
        f"GPU-hours if undetected = {gpus:,} × {_num(inputs.remaining_run_hours)} h × "
        f"{_num(round(waste, 4))} = {_num(round(hours, 2))}"
    )
    return hours, _price(inputs, hours, "cost if undetected", steps, None)
