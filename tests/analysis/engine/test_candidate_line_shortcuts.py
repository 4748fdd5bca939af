"""Shortcuts on the way of every candidate line read as the longer way does:

- the peel's glog line (one match before the rounds) and indented line (its own message at
  once) give the envelope the rounds give, on every corpus line and on cut ones, and a
  "[rankN]:" line without an envelope after it is read as the rounds read it;
- the collective timeout's "ran for" words are those the marker-to-words regex found;
- the banner regexes that test a word start behind their first letter match as the
  ``\\b`` regexes they stand for;
- a banner line's NCCL host is searched only when needed, and still names the process
  (no rank) or gives its host (a rank: once, from its first banner line).
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from rankscope import envelope
from rankscope.parsers import banners
from rankscope.parsers.classify import classify

CASES = Path(__file__).resolve().parents[2] / "corpus" / "cases"
CRAFTED = (
    "[E1121 10:22:33.123456789 ProcessGroupNCCL.cpp:1794] [Rank 0] Watchdog caught …",
    "E1121 10:22:33.123456 40900 torch/distributed/elastic/api.py:869] failed",
    "[W1121 10:22:33 a.cpp:1] [rank3]:[E1121 10:22:33 b.cpp:2] INFO: twice",
    "[E1121 10:22:33 a.cpp:1] [W1121 10:22:33 b.cpp:2] WARNING: again",
    "[E1121 10:22:33 a.cpp:1] ERROR: a level word",
    "[E1121 10:22:33 a.cpp:1]",
    "E12 not a stamp",
    "[I3",
    "I",
    "  time      : 2026-11-21_13:31:02",
    "  10: srun's label after an indent",
    "\t[2026-11-21 10:00:00] an indented date",
    "   ",
    "\t",
    " \u2003x",
)


def _lines() -> list[str]:
    out = list(CRAFTED)
    for f in sorted(CASES.glob("*/*")):
        if f.name == "case.toml" or not f.is_file():
            continue
        for line in f.read_text(encoding="utf-8", errors="replace").splitlines():
            out += [line, line[:12], line[:30]]
    return out


def test_glog_and_indent_shortcuts_peel_like_the_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = _lines()
    fast = [envelope.peel(x) for x in lines]
    # no first character takes a shortcut: every line goes through the rounds
    monkeypatch.setattr(envelope, "_GLOG_FIRST", frozenset())
    monkeypatch.setattr(envelope, "_INDENT", frozenset())
    slow = [envelope.peel(x) for x in lines]
    differ = [(x, a, b) for x, a, b in zip(lines, fast, slow, strict=True) if a != b]
    assert not differ, differ[:3]


@pytest.mark.parametrize(
    ("line", "rank", "level", "message"),
    [
        # a program's own line after the prefix: read at once
        ("[rank3]: node-03:1:2 [3] NCCL INFO x", 3, None, "node-03:1:2 [3] NCCL INFO x"),
        (
            "[rank12]: [2026-11-21 08:52:09] iteration 5/9",
            12,
            None,
            "[2026-11-21 08:52:09] iteration 5/9",
        ),
        ("[rank3]:  x", 3, None, " x"),  # the prefix's one optional space only
        # a level word or an envelope may follow: the rounds go on after the prefix
        ("[rank3]: INFO: x", 3, "I", "INFO: x"),
        ("[rank3]: [E some.py:12] msg", 3, "E", "msg"),
        ("[rank3]: " + "[E a.py:1] " * 9 + "z", 3, "E", "[E a.py:1] z"),  # eight rounds
        ("[rank3]:[E1121 10:22:33 b.cpp:2] x", 3, "E", "x"),
    ],
)
def test_rank_prefix_shortcut_peels_like_the_rounds(
    line: str, rank: int, level: str | None, message: str
) -> None:
    env = envelope.peel(line)
    assert (env.rank, env.level, env.message) == (rank, level, message)


_RAN = re.compile(r"Watchdog caught collective operation timeout: .*?ran for (?P<ran>\d+) milli")


@pytest.mark.parametrize(
    "msg",
    [
        "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, "
        "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 "
        "milliseconds before timing out.",
        "ran for 5 milliseconds; Watchdog caught collective operation timeout: ran for 7 millis",
        "Watchdog caught collective operation timeout ran for 3 milliseconds",
        "Watchdog caught collective operation timeout: x Watchdog caught collective "
        "operation timeout: ran for 9 milliseconds, ran for 10 milliseconds",
        "Watchdog caught collective operation timeout: ran for x milliseconds ran for 4 milli",
        "Watchdog caught x; Watchdog caught collective operation timeout: ran for 6 milli",
    ],
)
def test_timeout_reads_the_ran_for_words_the_regex_found(msg: str) -> None:
    res, _ = classify(msg)
    assert res is not None and res[0] == "watchdog_timeout"
    m = _RAN.search(msg)
    assert res[1].get("ran_ms") == (int(m.group("ran")) if m else None)


def test_timeout_cut_inside_its_marker_still_asks_for_the_next_line() -> None:
    res, needs_more = classify("[PG 0 Rank 2] [Rank 2] Watchdog caught collective")
    assert res == ("watchdog_timeout", {"pg": "0", "group_rank": 2, "work_rank": 2})
    assert needs_more
    # the marker's words further on are not a cut one
    res, _ = classify("Watchdog caught collective operation timeout: Watchdog caught collec")
    assert res is not None and res[0] == "watchdog_timeout"


def test_banner_host_once_per_ranked_process_and_as_the_name_of_an_unranked_one() -> None:
    reader = banners.BannerReader()
    reader.take("[rank3]: n-7:41:42 [3] NCCL INFO Using network IB", 1)  # nothing read
    reader.take("[rank3]: n-7:41:42 [3] NCCL INFO NCCL_IB_TIMEOUT set by environment to 22.", 2)
    reader.take("[rank3]: n-8:41:42 [3] NCCL INFO cudaDriverVersion 12020", 3)
    reader.take("n-9:51:52 [0] NCCL INFO NCCL version 2.18.1+cuda12.1", 4)
    reader.take("n-9:51:52 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 x", 5)
    assert reader.procs["3"]["_host"][:2] == ["n-7", 2]
    assert reader.procs["3"]["cuda_driver"][:2] == ["12020", 3]
    assert reader.procs["n-9:51"]["_host"][:2] == ["n-9", 4]
    assert "_gpu" not in reader.procs["n-9:51"]  # a GPU only for a known rank
    assert set(reader.procs) == {"3", "n-9:51"}


# the banner regexes written with the word start behind their first letter, and the "\b"
# regexes they stand for
_WORD_START = (
    (banners._ENV_PAIRS, r"\b(?P<k>(?:TORCH_)?NCCL_[A-Z0-9_]+):\s*(?P<v>[^,\s]+)"),
    (banners._RULES[1][1], r"\bNCCL version:\s*(?P<v>[\w.+-]+)"),
    (banners._RULES[3][1], r"\b(?P<k>NCCL_\w+) set by environment to (?P<v>.+?)\.?\s*$"),
    (banners._NVML, r"\bcudaDev\s+\d+\s+nvmlDev\s+(?P<v>\d+)"),
)
_PIECES = (
    *("TORCH_", "NCCL_", "T", "N", "c", "A", "B_", "1", "7", ".", ":", " ", ",", "x", "é", "_"),
    *("²", "\n", " set by environment to ", "NCCL version:", "cudaDev", " 3 ", "nvmlDev "),
)


@pytest.mark.parametrize("seed", range(4))
def test_word_start_behind_the_first_letter_matches_as_the_word_start_regex(seed: int) -> None:
    rng = random.Random(seed)
    lines = [
        "PGNCCL Watchdog environments: TORCH_NCCL_RETHROW_CUDA_ERRORS: 1, NCCL_IB_TIMEOUT: 22",
        "xNCCL_A:NCCL_B: 1, MYTORCH_NCCL_X: 1, éNCCL_Y: 2, TORCH_TORCH_NCCL_Z: 3",
        "n:1:2 [3] NCCL INFO NCCL_IB_TIMEOUT set by environment to 22.",
        "comm 0x1 rank 3 nranks 8 cudaDev 3 nvmlDev 5 busId 1 - Init COMPLETE",
        "environments: NCCL version: 2.20.5, xcudaDev 1 nvmlDev 2",
    ]
    lines += [
        "".join(rng.choice(_PIECES) for _ in range(rng.randrange(1, 14))) for _ in range(20000)
    ]
    for rx, want in _WORD_START:
        ref = re.compile(want)
        for line in lines:
            assert rx.findall(line) == ref.findall(line), (want, line)
            got, exp = rx.search(line), ref.search(line)
            assert (got and (got.span(), got.groupdict())) == (
                exp and (exp.span(), exp.groupdict())
            )
