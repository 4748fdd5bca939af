"""The banner reader's NCCL host (``banners.nccl_host``) is what the regex it stands for
finds first, on real banner shapes and on random lines made of their pieces."""

from __future__ import annotations

import random

import pytest

from rankscope.parsers import banners

PIECES = (
    "node-01",
    "gpu_a.b",
    "ÅSØ9",
    "²",
    "_",
    ":",
    ":41077",
    ":41094",
    " ",
    "\t",
    "[3]",
    "[",
    "]",
    " NCCL ",
    "NCCL\t",
    "INFO",
    "[rank3]: ",
    "-",
    ".",
    "x",
    "7",
)
REAL = (
    "[rank10]: node-01:41070:41087 [2] NCCL INFO NCCL_IB_TIMEOUT set by environment to 22.",
    "gpu-q-13:2291:2291 [0] NCCL INFO NCCL version 2.18.1+cuda12.1",
    "[2026-01-02 03:04:05] x :1:2 [0] NCCL INFO y; host.a-b_c:77:78  [1]\tNCCL WARN z",
    "no banner here: 1:2 [3] NCCL",
)


def _want(raw: str) -> tuple[str, str] | None:
    m = banners._NCCL_HOST.search(raw)
    return (m.group("host"), m.group("pid")) if m else None


def _banner(rng: random.Random) -> str:
    """A banner head, maybe broken: host chars (or none), pid, tid, device, NCCL."""
    host = "".join(rng.choice("ab-_.9Å²: ") for _ in range(rng.randrange(0, 6)))
    ws = rng.choice([" ", "\t", "  ", ""])
    return f"{host}:{rng.randrange(99)}:{rng.randrange(99)}{ws}[{rng.randrange(9)}]{ws}NCCL{ws}"


@pytest.mark.parametrize("seed", range(8))
def test_nccl_host_is_the_regex_first_match(seed: int) -> None:
    rng = random.Random(seed)
    lines = list(REAL)
    for _ in range(3000):
        parts = [
            _banner(rng) if rng.random() < 0.3 else rng.choice(PIECES)
            for _ in range(rng.randrange(1, 10))
        ]
        lines.append("".join(parts))
    found = 0
    for raw in lines:
        want = _want(raw)
        assert banners.nccl_host(raw) == want, raw
        found += want is not None
    assert found > 500  # the random lines do exercise the banner
