"""Patterns compiled into Hyperscan as a trigger (``HYPERSCAN_TRIGGERS``) give the same
candidate lines and signatures as the patterns themselves: the trigger fires on every line
the pattern matches, and a line where only the trigger fires is no candidate."""

from __future__ import annotations

import contextlib
import re

import pytest

from rankscope.patterns import HYPERSCAN_TRIGGERS, PATTERNS
from rankscope.scan import HyperscanScanner, ReScanner
from rankscope.signatures import CATALOGUE
from rankscope.testing.corpus import CORPUS

# lines where a trigger fires and its pattern does not, each beside one where both do
NEAR_MISSES = (
    b"Ran out of memory trying to free the cache",
    b"W bfc_allocator.cc:275] Ran out of memory trying to allocate 39.81MiB.",
    b"Allocator (GPU_0_bfc) ran out of memory trying to reserve",
    b"Allocator (GPU_2_bfc) ran out of memory trying to allocate 91.27GiB",
    b"#12 0x1f in 3rd-party (",
    b"#3  0x00007f1c2b in raise () from /lib/x86_64-linux-gnu/libc.so.6",
    b"version.h:12 -> 3",
    b"gpu-q-1:82123:82182 [0] NCCL INFO bootstrap.cu:259 -> 2",
    b"  rank      x 3",
    b"  rank      : 3 (local_rank: 3)",
    b"  traceback : Signal handlers installed",
    b"  traceback : Signal 6 (SIGABRT) received by PID 4242",
    b"validation loss at step 100 | lm loss 2.1",
    b" validation loss at iteration 100 | lm loss value: 2.1",
)


def test_every_trigger_belongs_to_a_pattern_and_is_part_of_it() -> None:
    for pattern, trigger in HYPERSCAN_TRIGGERS.items():
        assert pattern in PATTERNS, f"{pattern!r}: not a prefilter pattern"
        assert "\\n" not in pattern and "\\s" not in pattern, "a line-bound pattern only"
        examples = [ex for s in CATALOGUE for ex in s.examples if re.search(pattern, ex)]
        for ex in examples:
            assert re.search(trigger, ex), f"{trigger!r} misses {ex!r}"


def test_every_trigger_fires_where_its_pattern_matches_in_the_corpus() -> None:
    rx = {re.compile(p.encode()): re.compile(t.encode()) for p, t in HYPERSCAN_TRIGGERS.items()}
    for path in CORPUS.glob("*/*"):
        if path.suffix == ".toml":
            continue
        for line in path.read_bytes().split(b"\n"):
            for pattern, trigger in rx.items():
                if pattern.search(line):
                    assert trigger.search(line), f"{path}: {trigger.pattern!r} misses {line!r}"


def test_a_line_only_a_trigger_fires_on_is_not_a_candidate() -> None:
    scanners: list[object] = [ReScanner()]
    with contextlib.suppress(Exception):  # no Hyperscan here: the fallback alone
        scanners.append(HyperscanScanner())
    if len(scanners) < 2:
        pytest.skip("Hyperscan is not available")
    data = b"\n".join(NEAR_MISSES)
    got = [
        [(data[s:e], tuple(x.id for x in sigs)) for s, e, sigs in sc.line_hits(data)]  # type: ignore[attr-defined]
        for sc in scanners
    ]
    assert got[0] == got[1]
    assert [line for line, _ in got[0]] == list(NEAR_MISSES[1::2])
