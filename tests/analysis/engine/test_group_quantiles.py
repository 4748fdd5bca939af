"""The per-key medians and percentiles computed for all keys at once give, key for key, the
floats ``np.percentile`` and ``np.median`` give for that key's values alone."""

from __future__ import annotations

import numpy as np

from rankscope.analyzers.metrics import _median_by
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
