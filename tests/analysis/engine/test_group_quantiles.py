"""The per-key medians and percentiles computed for all keys at once give, key for key, the
floats ``np.percentile`` and ``np.median`` give for that key's values alone."""

from __future__ import annotations

import numpy as np

from rankscope.analyzers.metrics import _median_by
from rankscope.analyzers.numerics import _series
from rankscope.analyzers.postmortem_inputs import _per_step
from rankscope.analyzers.slowdown import _group_median


def _values(rng: np.random.Generator, n: int, kind: int) -> np.ndarray:
    vals = [
        rng.random(n) * 10,
        np.round(rng.random(n) * 3, 1),  # many ties
        rng.lognormal(0, 3, n),
        rng.integers(0, 4, n).astype(float),
    ][kind % 4]
    vals[rng.random(n) < 0.1] = np.nan
    vals[rng.random(n) < 0.02] = np.inf
    return vals


def _same(got: dict, want: dict) -> bool:
    return list(got) == list(want) and all(
        type(got[k]) is float and got[k].hex() == want[k].hex() for k in want
    )


def test_group_percentile_is_numpy_percentile_per_key() -> None:
    rng = np.random.default_rng(7)
    for t in range(300):
        n = int(rng.integers(1, 300))
        keys = rng.integers(0, int(rng.integers(1, 50)), n).astype(float)
        keys[rng.random(n) < 0.05] = np.nan
        vals = _values(rng, n, t)
        ok = np.isfinite(vals) & np.isfinite(keys)
        for q in (50, 100.0, 90, 25):
            want = {
                int(k): float(np.percentile(vals[ok][keys[ok] == k], q))
                for k in sorted(set(keys[ok].tolist()))
            }
            assert _same(_group_median(keys, vals, q), want), (t, q)


def test_median_by_is_numpy_median_per_key() -> None:
    rng = np.random.default_rng(8)
    hosts = np.array([f"node-{i:02d}" for i in range(30)], dtype=object)
    for t in range(300):
        n = int(rng.integers(1, 300))
        keys = (
            hosts[rng.integers(0, int(rng.integers(1, 30)), n)] if t % 2 else rng.integers(0, 40, n)
        )
        vals = _values(rng, n, t)
        ok = ~np.isnan(vals)
        want = {}
        for k in sorted(set(keys[ok].tolist())):
            want[k] = float(np.median(vals[ok][keys[ok] == k]))
        assert _same(_median_by(keys, vals), want), t


def _steps_and_values(rng: np.random.Generator, t: int) -> tuple[np.ndarray, np.ndarray]:
    n = int(rng.integers(0, 120))
    steps = rng.integers(0, int(rng.integers(1, 60)), n).astype(float)
    steps[rng.random(n) < 0.05] = np.nan
    if t % 3 == 0:  # signed zeros, infinities, huge values: the sums' edge cases
        pool = [0.0, -0.0, 1.5, -2.25, np.inf, -np.inf, 1.7e308, 5e-324, np.nan]
        return steps, np.asarray(rng.choice(pool, n), dtype=float)
    return steps, _values(rng, n, t)


def test_per_step_median_is_numpy_median_per_step() -> None:
    rng = np.random.default_rng(9)
    for t in range(300):
        steps, vals = _steps_and_values(rng, t)
        ok = ~(np.isnan(steps) | np.isnan(vals))
        with np.errstate(all="ignore"):  # inf - inf: NaN either way
            want = {
                s: float(np.median(vals[ok][steps[ok] == s]))
                for s in sorted(set(steps[ok].tolist()))
            }
            us, med = _per_step(steps, vals)
        assert _same(dict(zip(us.tolist(), med.tolist(), strict=True)), want), t


class _Table:
    """The two columns ``_series`` reads, as ``MetricsTable`` gives them."""

    def __init__(self, steps: np.ndarray, vals: np.ndarray, valid: np.ndarray) -> None:
        self.cols, self.ok = {"step": steps, "v": vals}, valid

    def numpy(self, name: str) -> np.ndarray:
        return self.cols[name]

    def valid(self, name: str) -> np.ndarray:
        return self.ok


def test_series_is_numpy_mean_per_step_or_its_first_non_finite_value() -> None:
    rng = np.random.default_rng(10)
    for t in range(300):
        steps, vals = _steps_and_values(rng, t)
        valid = rng.random(steps.size) < 0.95
        keep = valid & ~np.isnan(steps)
        want = {}
        with np.errstate(all="ignore"):
            for s in sorted(set(steps[keep].tolist())):
                v = vals[keep & (steps == s)]
                want[s] = float(np.mean(v) if np.isfinite(v).all() else v[~np.isfinite(v)][0])
            us, means, _rows = _series(_Table(steps, vals, valid), "v")
        got = dict(zip(us.tolist(), means.tolist(), strict=True))
        assert list(got) == list(want), t
        assert all(got[k].hex() == want[k].hex() or np.isnan(want[k]) for k in want), t
        assert all(np.isnan(got[k]) for k in want if np.isnan(want[k])), t
