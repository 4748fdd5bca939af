"""What a collective that failed says about the category when no rank logged a fault of
its own: fingerprints that differ only in the batch dimension (DATA), the first collective
of a group that never completed (NETWORK), and what stays a code-path mismatch."""

from __future__ import annotations

import io
from typing import Any

import rankscope as engine


def _triage(files: dict[str, str]) -> dict[str, Any]:
    results = [
        engine.parse_artifact(io.BytesIO(text.encode()), name=name) for name, text in files.items()
    ]
    return engine.analyze(results)


def _own_fp(rank: int, shape: str, op: str = "ALLGATHER") -> str:
    return (
        "RuntimeError: Detected mismatch between collectives on ranks. Rank "
        f"{rank} is running inconsistent collective: CollectiveFingerPrint(OpType={op}, "
        f"TensorShape=[{shape}], TensorDtypes=Float, TensorDeviceTypes=TensorOptions("
        "dtype=float (default), device=cuda))\n"
    )


def test_fingerprints_that_differ_only_in_the_batch_dimension_are_uneven_data() -> None:
    doc = _triage({"train.log": _own_fp(0, "41, 256, 8") + _own_fp(1, "40, 256, 8")})
    assert (doc["triage"]["category"], doc["triage"]["shape"]) == ("DATA", "crash")
    assert "batch" in doc["triage"]["summary"]


def test_a_fingerprint_cut_by_terminal_wrapping_is_read_across_the_lines() -> None:
    def wrapped(rank: int, n: int) -> str:
        line = _own_fp(rank, f"{n}, 256, 8").rstrip("\n")
        cut = line.index("TensorShape") + len("TensorShape")
        return line[:cut] + "\n" + line[cut : cut + 60] + "\n" + line[cut + 60 :] + "\n"

    doc = _triage({"train.log": wrapped(0, 41) + wrapped(1, 40)})
    assert doc["triage"]["category"] == "DATA"


def test_other_differences_between_fingerprints_stay_a_code_path_mismatch() -> None:
    # a different trailing dimension, a different op, or a flat buffer of another size
    for a, b in (
        (_own_fp(0, "41, 256, 8"), _own_fp(1, "41, 256, 9")),
        (_own_fp(0, "41, 256"), _own_fp(1, "40, 256", op="BROADCAST")),
        (_own_fp(0, "195812480", op="ALLREDUCE"), _own_fp(1, "51123456", op="ALLREDUCE")),
    ):
        doc = _triage({"train.log": a + b})
        assert doc["triage"]["category"] == "SOFTWARE", (a, b)


WATCHDOG = (
    "[rank{r}]:[E210 16:19:09.618225457 ProcessGroupNCCL.cpp:685] [Rank {r}] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={n}, "
    "NumelOut={n}, Timeout(ms)=600000) ran for 636397 milliseconds before timing out.\n"
)


def _hang(seq: int, op: str = "ALLGATHER", n: int = 4096) -> dict[str, Any]:
    logs = {f"rank_{r}.log": WATCHDOG.format(r=r, seq=seq, op=op, n=n) for r in (0, 1)}
    return _triage(logs)["triage"]


def test_the_first_collective_that_never_completed_points_at_the_interconnect() -> None:
    t = _hang(seq=1)
    assert (t["category"], t["shape"]) == ("NETWORK", "hang")
    assert "NCCL_P2P_DISABLE" in t["summary"]


def test_a_later_collective_or_a_first_barrier_is_not_read_as_the_interconnect() -> None:
    # later: the connections once worked; a one-element first collective (a barrier, a
    # metric sync) is as often a rank still busy elsewhere
    assert _hang(seq=284)["category"] == "SOFTWARE"
    assert _hang(seq=1, op="ALLREDUCE", n=1)["category"] == "SOFTWARE"


def _init_and_hang(hosts: tuple[str, str]) -> dict[str, Any]:
    init = (
        "{h}:4242:4242 [{r}] NCCL INFO comm 0x5634a8f0 rank {r} nranks 2 cudaDev {r} "
        "busId {r}1000 - Init COMPLETE\n"
    )
    return _triage(
        {
            f"rank_{r}.log": init.format(h=hosts[r], r=r)
            + WATCHDOG.format(r=r, seq=1, op="BROADCAST", n=4096)
            for r in (0, 1)
        }
    )


def test_a_first_collective_hang_with_every_rank_on_one_node_is_the_gpus_peer_to_peer() -> None:
    doc = _init_and_hang(("node-a07", "node-a07"))
    assert (doc["triage"]["category"], doc["triage"]["shape"]) == ("HARDWARE", "hang")
    assert doc["localization"]["culprit_hosts"] == ["node-a07"]
    assert "NCCL_P2P_DISABLE=1" in doc["triage"]["summary"]
    doc = _init_and_hang(("node-a07", "node-a08"))  # across nodes: the network
    assert doc["triage"]["category"] == "NETWORK"
