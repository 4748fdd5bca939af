"""Fix verification arithmetic: compare baseline and post-fix metrics over several trials.

Pure functions, no Django. The rule (also in docs/user-guide.md):

1. Per metric, the mean over trials on each side; the relative change is
   ``(post - base) / |base|``. Its *direction* comes from the name: throughput-like
   metrics (throughput, tokens/s, samples/s, MFU, TFLOPs, bandwidth) are
   higher-is-better; everything else (step time, memory, loss, grad norm, errors) is
   lower-is-better. ``improvement`` is the change signed so that positive is better.
2. A metric *improved* when improvement > tolerance, got *worse* when improvement <
   -tolerance, else it is *unchanged*. It is *noisy* when both sides have at least two
   trials and the difference of means is smaller than the larger standard deviation.
3. The verdict, for the target metric (the one the fix should move; without a target,
   every metric is a target):
   - INCONCLUSIVE: no target metric has values on both sides, a baseline mean is 0,
     or every changed target metric is noisy.
   - NOT_FIXED: the problem still occurs (``problem_resolved=False``), or no target
     metric improved (unchanged or worse).
   - REGRESSION: a target improved, but another metric got worse beyond tolerance.
   - FIXED: a target improved and nothing got worse beyond tolerance.
4. ``side_effects`` lists every non-target metric that moved beyond tolerance, either
   way ("mem_peak +10.0 %"); ``regressions`` is the subset that got worse.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

FIXED = "FIXED"
NOT_FIXED = "NOT_FIXED"
REGRESSION = "REGRESSION"
INCONCLUSIVE = "INCONCLUSIVE"

DEFAULT_TOLERANCE = 0.05

_HIGHER_IS_BETTER = re.compile(
    r"throughput|tokens?_?(per_?)?s|tok_?s|samples?_?(per_?)?s|mfu|tflops|busbw|bandwidth|"
    r"goodput|utili[sz]ation|accuracy|speed",
    re.IGNORECASE,
)


def metric_direction(name: str) -> str:
    """``"higher"`` for throughput-like metrics, ``"lower"`` for times, memory, loss."""
    return "higher" if _HIGHER_IS_BETTER.search(name) else "lower"


@dataclass
class MetricChange:
    metric: str
    direction: str
    baseline_mean: float | None
    post_mean: float | None
    baseline_trials: int
    post_trials: int
    change: float | None  # relative, (post - base) / |base|
    improvement: float | None  # change signed so that positive is better
    outcome: str  # improved | worse | unchanged | noisy | missing
    is_target: bool

    def describe(self) -> str:
        if self.change is None:
            return f"{self.metric}: not comparable"
        return (
            f"{self.metric} {self.change * 100:+.1f} % "
            f"({_fmt(self.baseline_mean)} → {_fmt(self.post_mean)})"
        )


@dataclass
class VerificationResult:
    verdict: str
    metrics: list[MetricChange]
    regressions: list[str] = field(default_factory=list)
    side_effects: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tolerance: float = DEFAULT_TOLERANCE
    target: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "tolerance": self.tolerance,
            "target": self.target,
            "metrics": [asdict(m) for m in self.metrics],
            "regressions": self.regressions,
            "side_effects": self.side_effects,
            "notes": self.notes,
        }


def _fmt(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.4g}"


def _clean(values: Sequence[Any] | None) -> list[float]:
    out = []
    for v in values or []:
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(f):
            out.append(f)
    return out


def compare_metric(
    name: str,
    baseline: Sequence[Any] | None,
    post_fix: Sequence[Any] | None,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    is_target: bool = False,
) -> MetricChange:
    """Compare one metric's trials (see the module docstring for the rule)."""
    direction = metric_direction(name)
    base, post = _clean(baseline), _clean(post_fix)
    base_mean = statistics.fmean(base) if base else None
    post_mean = statistics.fmean(post) if post else None
    change = improvement = None
    outcome = "missing"
    if base_mean is not None and post_mean is not None and base_mean != 0:
        change = (post_mean - base_mean) / abs(base_mean)
        improvement = change if direction == "higher" else -change
        if improvement > tolerance:
            outcome = "improved"
        elif improvement < -tolerance:
            outcome = "worse"
        else:
            outcome = "unchanged"
        if outcome != "unchanged" and len(base) >= 2 and len(post) >= 2:
            spread = max(statistics.stdev(base), statistics.stdev(post))
            if abs(post_mean - base_mean) < spread:
                outcome = "noisy"
    return MetricChange(
        metric=name,
        direction=direction,
        baseline_mean=base_mean,
        post_mean=post_mean,
        baseline_trials=len(base),
        post_trials=len(post),
        change=change,
        improvement=improvement,
        outcome=outcome,
        is_target=is_target,
    )


def verify_fix(
    baseline: Mapping[str, Sequence[Any]],
    post_fix: Mapping[str, Sequence[Any]],
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    target: str | Sequence[str] | None = None,
    problem_resolved: bool | None = None,
) -> VerificationResult:
    """Verdict for a fix from ``{metric: [value per trial]}`` before and after."""
    if tolerance < 0 or not math.isfinite(tolerance):
        raise ValueError("tolerance must be a non-negative number")
    names = list(dict.fromkeys([*baseline.keys(), *post_fix.keys()]))
    if isinstance(target, str):
        targets = [target] if target else []
    else:
        targets = [t for t in (target or []) if t]
    unknown = [t for t in targets if t not in names]
    if unknown:
        raise ValueError(f"target metric not measured: {', '.join(unknown)}")
    if not targets:
        targets = names
    changes = [
        compare_metric(
            n, baseline.get(n), post_fix.get(n), tolerance=tolerance, is_target=n in targets
        )
        for n in names
    ]
    target_changes = [c for c in changes if c.is_target]
    others = [c for c in changes if not c.is_target]
    notes: list[str] = []

    if len(targets) == len(names):
        # Without a target every metric is one: another metric getting worse is a regression.
        regressions = [c.describe() for c in changes if c.outcome == "worse"]
        side_effects = []
    else:
        regressions = [c.describe() for c in others if c.outcome == "worse"]
        side_effects = [c.describe() for c in others if c.outcome in ("worse", "improved")]
    for c in changes:
        if c.outcome == "missing":
            notes.append(f"{c.metric}: needs values on both sides (and a non-zero baseline)")
        elif c.outcome == "noisy":
            notes.append(f"{c.metric}: the change is within the spread between trials")
    if any(c.baseline_trials == 1 or c.post_trials == 1 for c in changes):
        notes.append("Single trials cannot show noise; run several trials to be sure.")

    comparable = [c for c in target_changes if c.outcome != "missing"]
    improved = [c for c in comparable if c.outcome == "improved"]
    if problem_resolved is False:
        verdict = NOT_FIXED
        notes.insert(0, "The original problem still occurs after the fix.")
    elif not comparable or all(c.outcome == "noisy" for c in comparable):
        verdict = INCONCLUSIVE
    elif not improved:
        verdict = NOT_FIXED
    elif regressions:
        verdict = REGRESSION
    else:
        verdict = FIXED
    return VerificationResult(
        verdict=verdict,
        metrics=changes,
        regressions=regressions,
        side_effects=side_effects,
        notes=notes,
        tolerance=tolerance,
        target=[t for t in targets if t in names] if len(targets) != len(names) else [],
    )


def parse_trials(text: str) -> dict[str, list[float]]:
    """Parse ``metric: v1, v2, v3`` lines (one metric a line) into ``{metric: [values]}``.

    Raises ValueError naming the first line that cannot be read.
    """
    out: dict[str, list[float]] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, rest = line.partition(":")
        if not sep:
            name, sep, rest = line.partition("=")
        name = name.strip()
        if not sep or not name or not re.fullmatch(r"[A-Za-z0-9_./ %-]{1,60}", name):
            raise ValueError(f"line {lineno}: write it as 'metric: value, value, …'")
        values = []
        for part in re.split(r"[,\s;]+", rest.strip()):
            if not part:
                continue
            try:
                v = float(part)
            except ValueError:
                raise ValueError(f"line {lineno}: {part[:20]!r} is not a number") from None
            if not math.isfinite(v):
                raise ValueError(f"line {lineno}: values must be finite numbers")
            values.append(v)
        if not values:
            raise ValueError(f"line {lineno}: no values for {name}")
        out.setdefault(name.replace(" ", "_"), []).extend(values)
    return out
