"""Regressions found by reading real public logs: each line here is written by us in the exact
format a real tool printed (our own hosts, ranks and values)."""

from __future__ import annotations

import io

from apps.analysis import engine


def _parse(name: str, text: str) -> engine.ParseResult:
    return engine.parse_artifact(io.BytesIO(text.encode()), name=name)


def _doc(files: dict[str, str]) -> dict:
    return engine.analyze([_parse(n, t) for n, t in files.items()])


def test_c10_stamp_with_an_unpadded_month_keeps_its_time() -> None:
    # c10 logging prints E321 for March 21 (month not zero-padded), E1206 for December 6
    r = _parse(
        "train.log",
        "[rank3]:[E321 04:15:09.123456789 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=8, "
        "NumelOut=8, Timeout(ms)=600000) ran for 600100 milliseconds before timing out.\n",
    )
    (ev,) = [e for e in r.events if e.kind == "watchdog_timeout"]
    assert ev.time == "0000-03-21T04:15:09.123456"
    assert r.rank_info[3].first_time == "0000-03-21T04:15:09.123456"
