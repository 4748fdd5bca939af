"""``first_lines`` (the iteration side reader's sampling of a dense chunk) answers what
``first_line`` answers segment by segment, with Hyperscan and with ``re``."""

from __future__ import annotations

import contextlib
import random
import re
from itertools import pairwise

import pytest

from rankscope.parsers import iterations
from rankscope.scan import HyperscanScanner, ReScanner

LINES = (
    b"[rank3]:[2026-03-01 12:00:02] iteration 7 | lm loss 2.1 | tokens/s 101000",
    b"plain text without any of them",
    b"",
    b"epoch 1 step 40: loss 0.25 (1.2 s/it)",
    b"\r",
    b"NCCL INFO Channel 00/02 : 0 1 2 3",
    b"throughput 5.1 TFLOPs per second",
)


def _scanners() -> list[object]:
    pats = [re.escape(p.decode()) for p in iterations.LITERALS]
    out: list[object] = [ReScanner(pats)]
    with contextlib.suppress(Exception):  # no Hyperscan here: the fallback alone
        out.append(HyperscanScanner(pats))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_first_lines_equal_first_line_per_segment(seed: int) -> None:
    rng = random.Random(seed)
    data = b"\n".join(rng.choice(LINES) for _ in range(400)) + (b"\n" if seed % 2 else b"")
    size = len(data)
    n = rng.choice([1, 7, 50, 399, 800])
    cuts = [data.rfind(b"\n", 0, k * size // n) + 1 for k in range(n)] + [size]
    bounds = [(lo, hi) for lo, hi in pairwise(cuts) if hi > lo]
    for sc in _scanners():
        want = [g for lo, hi in bounds if (g := sc.first_line(data, lo, hi)) is not None]
        assert sc.first_lines(data, bounds) == want
