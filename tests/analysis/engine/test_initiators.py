"""Who counts as an initiator (``localization.initiator_ranks``): every rank whose own
watchdog fired, in every wording, including ranks only named by the notified ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rankscope import analyze
from rankscope.cli import parse_paths

PG0 = "[PG ID 0 PG GUID 0(default_pg) Rank {r}] "
RECEIVED = (
    "Received a dump signal due to a collective timeout from  rank {src} and we will try our "
    "best to dump the debug info. Last enqueued NCCL work: 460631, last completed NCCL work: "
    "460630.This is most likely caused by incorrect usages of collectives, e.g., wrong sizes "
    "used across ranks, the order of collectives is not same for all ranks or the scheduled "
    "collective, for some reason, didn't run. Additionally, this can be caused by GIL deadlock "
    "or other reasons such as network errors or bugs in the communications library (e.g. "
    "NCCL), etc. "
)
TIMEOUT = (
    "[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, "
    "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for {ms} milliseconds "
    "before timing out."
)


def _doc(tmp_path: Path, lines: list[str]) -> dict[str, Any]:
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return analyze(parse_paths([p], jobs=1))


def _glog(r: int, t: str, msg: str) -> str:
    return f"[rank{r}]:[E1005 05:20:{t} ProcessGroupNCCL.cpp:1746] {msg}"


def test_a_rank_named_in_the_dump_signal_is_an_initiator_without_its_log(tmp_path: Path) -> None:
    lines = [
        _glog(
            r,
            "03.110823792",
            PG0.format(r=r) + "Observed flight recorder dump signal from "
            "another rank via TCPStore.",
        )
        for r in (0, 1)
    ] + [_glog(r, "03.110956967", PG0.format(r=r) + RECEIVED.format(src=34)) for r in (0, 1)]
    loc = _doc(tmp_path, lines)["localization"]
    assert loc["initiator_ranks"] == [34]
    assert loc["notified_ranks"] == [0, 1]
    assert not any(row["rank"] == 34 for row in loc["nccl"])  # no state of its own here


def test_a_store_that_cannot_tell_names_nobody(tmp_path: Path) -> None:
    lines = [_glog(0, "03.110956967", PG0.format(r=0) + RECEIVED.format(src=-1))]
    loc = _doc(tmp_path, lines)["localization"]
    assert loc["initiator_ranks"] == []


def test_every_rank_whose_watchdog_fired_and_the_first_one(tmp_path: Path) -> None:
    lines = [
        f"[E ProcessGroupNCCL.cpp:475] {TIMEOUT.format(r=2, ms=1800328)}",
        f"[E ProcessGroupNCCL.cpp:475] {TIMEOUT.format(r=1, ms=1800572)}",
        f"[E ProcessGroupNCCL.cpp:475] {TIMEOUT.format(r=3, ms=1800655)}",
    ]
    loc = _doc(tmp_path, lines)["localization"]
    assert loc["initiator_ranks"] == [1, 2, 3]
    assert loc["first_initiator"]["rank"] == 2  # print order in one file, no timestamps


def test_a_timeout_wrapped_after_its_first_words_is_read(tmp_path: Path) -> None:
    full = TIMEOUT.format(r=2, ms=600888)
    cut = full.index("collective operation")
    lines = [
        "[default0]:Grouping texts in chunks of 2049:   8%|▊         | 726000/9672101 "
        "[02:32<30:38, 4866.01 examples/s][default2]:[E ProcessGroupNCCL.cpp:475] " + full[:cut],
        full[cut:],
        f"[default3]:[E ProcessGroupNCCL.cpp:475] {TIMEOUT.format(r=3, ms=600892)}",
    ]
    doc = _doc(tmp_path, lines)
    assert doc["localization"]["initiator_ranks"] == [2, 3]
    # the evidence quotes the timeout printed on a line of its own, not the glued one
    f = next(x for x in doc["findings"] if x["kind"] == "nccl_watchdog_timeout")
    assert f["evidence"][0]["line"] == 3


def test_the_older_global_timeout_wording_is_a_notified_rank(tmp_path: Path) -> None:
    lines = [
        "[rank5]:[E ProcessGroupNCCL.cpp:1255] [PG 0 Rank 5] Received a global timeout from "
        "another rank and will start to dump the debug info. Last enqueued NCCL work: 90, last "
        "completed NCCL work: 90.",
        f"[rank1]:[E ProcessGroupNCCL.cpp:563] {TIMEOUT.format(r=1, ms=1800123)}",
    ]
    loc = _doc(tmp_path, lines)["localization"]
    assert loc["initiator_ranks"] == [1]
    assert loc["notified_ranks"] == [5]


# Every line a rank's own watchdog prints about its own work makes that rank an
# initiator, whichever torch version printed it: the timeout itself, the exception
# report that follows it (or replaces it when the excerpt lost the timeout line), the
# desync report, the rank's signal to dump, and the watchdog thread's exit on an error.
OWN_WORDINGS = {
    "timeout": TIMEOUT.format(r=3, ms=600060),
    "exception report": "[PG 1 Rank 3] Exception (either an error or timeout) detected by "
    "watchdog at work: 1580, last enqueued NCCL work: 1582, last completed NCCL work: 1579.",
    "desync report": "[PG 1 Rank 3] Timeout at NCCL work: 1580, last enqueued NCCL work: "
    "1582, last completed NCCL work: 1579.",
    "failure report": "[PG ID 1 PG GUID 1 Rank 3]  failure detected by watchdog at work "
    "sequence id: 55485 PG status: last enqueued work: 55487, last completed work: 55484",
    "first to signal": "[PG ID 1 PG GUID 1 Rank 3] First PG on this rank to signal dumping.",
    "thread exit on a CUDA error": "[PG 2 Rank 3] Process group watchdog thread terminated "
    "with exception: CUDA error: an illegal memory access was encountered",
}


@pytest.mark.parametrize("msg", list(OWN_WORDINGS.values()), ids=list(OWN_WORDINGS))
def test_every_line_of_a_ranks_own_watchdog_makes_it_an_initiator(tmp_path: Path, msg: str) -> None:
    lines = [
        _glog(0, "08.408271257", TIMEOUT.format(r=0, ms=600060)),
        _glog(3, "08.465224069", msg),
    ]
    assert _doc(tmp_path, lines)["localization"]["initiator_ranks"] == [0, 3]


def test_a_stuck_watchdog_is_not_an_initiator(tmp_path: Path) -> None:
    """The heartbeat monitor reports the watchdog thread itself hung: it caught no timeout."""
    lines = [
        _glog(
            r,
            "07.774540179",
            f"[PG ID 5 PG GUID 42(TENSOR_MODEL_PARALLEL_GROUP) Rank {r}] ProcessGroupNCCL's "
            "watchdog got stuck for 480 seconds without making progress in monitoring "
            "enqueued collectives.",
        )
        for r in (1, 0)
    ]
    assert _doc(tmp_path, lines)["localization"]["initiator_ranks"] == []


def test_the_oldest_wording_without_a_sequence_number_names_its_rank(tmp_path: Path) -> None:
    """torch <= 1.9: no [rankN]: prefix and no SeqNum; the message's own [Rank N] tells."""
    old = (
        "[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE, "
        "Timeout(ms)=1800000) ran for {ms} milliseconds before timing out."
    )
    lines = [
        "RuntimeError: NCCL communicator was aborted on rank 5.  Original reason for failure "
        "was: " + old.format(r=5, ms=1800849),
        "terminate called after throwing an instance of 'std::runtime_error'",
        "  what():  " + old.format(r=7, ms=1800895),
    ]
    doc = _doc(tmp_path, lines)
    assert doc["localization"]["initiator_ranks"] == [5, 7]
    f = next(x for x in doc["findings"] if x["kind"] == "nccl_watchdog_timeout")
    assert f["evidence"][0]["line"] == 1  # read on its own line, not glued to the next


def test_a_date_column_to_the_minute_before_the_rank_prefix(tmp_path: Path) -> None:
    """A web console's " YYYY-MM-DD HH:MM " column: the rank is [rankN]:'s global rank, not
    the sub-group's [Rank N], and the order comes from torch's finer stamp."""
    lines = [
        " 2026-03-24 12:54 " + _glog(13, "22.864467604", TIMEOUT.format(r=1, ms=600045)),
        " 2026-03-24 12:54 " + _glog(15, "22.883327702", TIMEOUT.format(r=1, ms=600045)),
        " 2026-03-24 12:54 "
        + _glog(
            12,
            "23.314069184",
            "[PG ID 13 PG GUID 143 Rank 0] Timeout at NCCL work: 87, "
            "last enqueued NCCL work: 87, last completed NCCL work: 86.",
        ),
    ]
    loc = _doc(tmp_path, lines)["localization"]
    assert loc["initiator_ranks"] == [12, 13, 15]
    assert loc["first_initiator"]["rank"] == 13
    assert loc["first_initiator"]["by"] == "timestamp"


def _stuck(r: int, seq: int, op: str) -> list[str]:
    work = f"WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=32, NumelOut=32, Timeout(ms)=600000)"
    return [
        _glog(
            r,
            "22.864467604",
            f"[Rank {r}] Watchdog caught collective operation timeout: {work} ran for 600045 "
            "milliseconds before timing out.",
        ),
        _glog(
            r,
            "22.864535778",
            f"[PG 1 Rank {r}] Exception (either an error or timeout) detected by watchdog at "
            f"work: {seq}, last enqueued NCCL work: {seq + 2}, last completed NCCL work: {seq - 1}.",
        ),
    ]


@pytest.mark.parametrize(("seq1", "together"), [(216, True), (57, False)])
def test_initiators_at_different_sequence_numbers_are_not_in_one_collective(
    tmp_path: Path, seq1: int, together: bool
) -> None:
    """Every rank timed out, but waiting on different collectives of the group (a desync,
    e.g. two threads issuing on one communicator): not "every rank entered the stuck
    collective", which would point at the fabric."""
    doc = _doc(tmp_path, _stuck(0, 216, "ALLTOALL_BASE") + _stuck(1, seq1, "ALLTOALL_BASE"))
    assert doc["localization"]["initiator_ranks"] == [0, 1]
    kinds = {f["kind"] for f in doc["findings"]}
    assert ("all_ranks_in_collective" in kinds) is together
    assert (doc["triage"]["category"] == "NETWORK") is together
