"""Per-rank facts read from a log's head and tail (first and last time, last step, host):
what the rank table shows for every rank, whatever the file's layout."""

from __future__ import annotations

import io

from rankscope import parse_artifact
from rankscope.parsers import textlog


def _parse(data: bytes, name: str):
    return parse_artifact(io.BytesIO(data), name=name)


def _node_log() -> bytes:
    """Two ranks interleaved with ``[rankN]:``; rank 1 never prints a step, rank 0's last
    stamped line is not its last line, and rank 1 names its host through NCCL's banner."""
    lines = [
        "[rank0]:[I1121 08:00:01.000000 train.py:10] starting",
        "[rank1]: node-7:4100:4117 [1] NCCL INFO Bootstrap : Using ib0",
        "[rank1]:[I1121 08:00:02.000000 train.py:10] starting",
    ]
    for step in range(1, 401):
        lines.append(
            f"[rank0]:[I1121 09:{step // 60:02d}:{step % 60:02d}.000000 train.py:9] step {step} done"
        )
        lines.append(
            f"[rank1]:[I1121 09:{step // 60:02d}:{step % 60:02d}.500000 train.py:9] waiting"
        )
    lines.append("[rank0]: plain line without a stamp")
    return ("\n".join(lines) + "\n").encode()


def test_interleaved_ranks_get_their_own_first_and_last_time_and_step() -> None:
    data = _node_log()
    assert len(data) > textlog.HEAD + textlog.TAIL  # head and tail are separate regions
    r = _parse(data, "node-7.log")
    r0, r1 = r.rank_info[0], r.rank_info[1]
    assert r0.first_time.endswith("11-21T08:00:01.000000")
    assert r0.last_time.endswith("11-21T09:06:40.000000")  # step 400, its last stamped line
    assert r0.last_step == 400
    assert r1.first_time.endswith("11-21T08:00:02.000000")
    assert r1.last_time.endswith("11-21T09:06:40.500000")
    assert r1.last_step is None
    assert r.facts["first_step"] == 1
    assert r.rank_hosts[1] == "node-7"


def test_a_per_rank_file_gets_first_and_last_time_step_and_host() -> None:
    lines = ["node-3:4100:4117 [0] NCCL INFO Bootstrap : Using ib0"]
    lines += [
        f"[I1121 09:{s // 60:02d}:{s % 60:02d}.000000 train.py:9] step {s} done, loss 2.0"
        for s in range(5, 905)
    ]
    lines.append("Traceback (most recent call last): the end, with no stamp")
    r = _parse(("\n".join(lines) + "\n").encode(), "rank_12.log")
    ri = r.rank_info[12]
    assert ri.first_time.endswith("11-21T09:00:05.000000")
    assert ri.last_time.endswith("11-21T09:15:04.000000")  # the last stamped line
    assert ri.last_step == 904
    assert r.facts["first_step"] == 5
    assert r.rank_hosts[12] == "node-3"


def test_two_spellings_of_a_rank_share_its_first_and_last_time() -> None:
    """``[rank03]:`` and ``[rank3]:`` are the same rank: its first stamp is the earlier of
    both spellings' first, its last the later of both spellings' last."""
    lines = [
        "[rank3]: no stamp yet",
        "[rank03]:[I1121 08:00:01.000000 train.py:10] starting",
        "[rank3]:[I1121 08:00:02.000000 train.py:10] step 7 done",
        "[rank03]:[I1121 08:00:03.000000 train.py:10] step 8 done",
        "[rank3]: a last line without a stamp",
    ]
    r = _parse(("\n".join(lines) + "\n").encode(), "node-2.log")
    assert list(r.rank_info) == [3]
    ri = r.rank_info[3]
    assert ri.first_time.endswith("11-21T08:00:01.000000")
    assert ri.last_time.endswith("11-21T08:00:03.000000")
    assert ri.last_step == 8
    assert r.facts["first_step"] == 7


def test_ranks_come_in_the_order_of_their_first_line_and_a_bracket_alone_names_none() -> None:
    lines = [
        "[rank: 9] not a torchrun prefix",
        "[rank5]: node-5:4100:4117 [5] NCCL INFO Bootstrap : Using ib0",
        "[rank2]:[I1121 08:00:01.000000 train.py:10] starting",
        "[rank5]:[I1121 08:00:02.000000 train.py:10] starting",
        "[rank2]: node-2:4100:4117 [2] NCCL INFO Bootstrap : Using ib0",
    ]
    r = _parse(("\n".join(lines) + "\n").encode(), "node.log")
    assert list(r.rank_info) == [5, 2]
    assert r.rank_info[5].first_time.endswith("11-21T08:00:02.000000")
    assert r.rank_hosts == {5: "node-5", 2: "node-2"}


def test_the_year_is_the_first_date_and_time_of_this_century() -> None:
    lines = [
        "1999-12-31 23:59 an old date, 12-01-02 10:00 a short one",
        "run started 2024-03-05T10:11:12, again 2025-01-01 00:00",
    ]
    r = _parse(("\n".join(lines) + "\n").encode(), "rank_0.log")
    assert r.facts["year"] == 2024


def test_facts_whose_words_are_absent_are_not_claimed() -> None:
    """Each regex of the head runs only when its words occur; what the words allow is read."""
    lines = [
        "WORLD_SIZE=16 MEMBER: 3/16 nnodes=2 resumed from checkpoint",
        "node-1:4100:4117 [0] NCCL INFO comm 0x55d0 rank 0 nRanks 16 cudaDev 0 - Init COMPLETE",
    ]
    r = _parse(("\n".join(lines) + "\n").encode(), "rank_0.log")
    assert r.facts["world_size_claims"] == [
        [16, "WORLD_SIZE"],
        [16, "NCCL nranks"],
        [16, "Lightning MEMBER"],
    ]
    assert r.facts["nnodes"] == 2
    assert r.facts["resumed_from_checkpoint"] is True
    assert r.facts["nccl_init"] == {"node-1": [[0, 16]]}
    bare = _parse(b"step 1 done\n", "rank_0.log")
    assert bare.facts["world_size_claims"] == []
    assert not {"nnodes", "resumed_from_checkpoint", "nccl_init", "framework"} & set(bare.facts)


_NO_HOST = (
    "2024-05-01 12:00:{:02d},123 - INFO - train.py:88 - step {} loss 2.3 lr 3.0e-4 Rank 12: ok"
)


def _rank_log(host_line: str, before: int) -> bytes:
    """A per-rank log whose first host-naming line comes after ``before`` lines that name
    none (some with what looks like a host hint: a dotted number, "rank12: ")."""
    lines = [_NO_HOST.format(i % 60, i) for i in range(before)]
    lines += ["1.2.3.4 is not an address here", host_line]
    lines += [_NO_HOST.format(i % 60, i) for i in range(before, before + 50)]
    return ("\n".join(lines) + "\n").encode()


def test_a_rank_log_names_its_host_wherever_its_first_host_line_is(monkeypatch) -> None:
    # the host of a per-rank log is the one its first host-naming line names; past the
    # head's first KiB those lines are found by Hyperscan, not by the regex at every
    # position: the same host, whether or not Hyperscan is there
    from rankscope.parsers import facts

    forms = {  # lines that are no event: only the head reading can name their hosts
        "node-12: [I1121 08:00:01.000 x.py:1] starting": "node-12",
        "gpu-a7:4100:4117 [3] NCCL INFO Bootstrap : Using ib0": "gpu-a7",
        "Nov 21 08:00:01 gpu-b3 trainer: epoch 1 begins": "gpu-b3",
        "trainer-9 [stdout] epoch 1 begins": "trainer-9",
    }
    for host_line, host in forms.items():
        for before in (2, 40, 300):  # in the first KiB, past it, near the head's end
            data = _rank_log(host_line, before)
            got = _parse(data, "rank_3.log").rank_hosts.get(3)
            monkeypatch.setattr(facts._HINT_LINES, "starts", lambda *a, **k: None)
            plain = _parse(data, "rank_3.log").rank_hosts.get(3)
            monkeypatch.undo()
            assert got == plain, (host_line, before)
            if before < 300:  # 300 lines run past the head: that host is in no region
                assert got == host, (host_line, before)
    assert _parse(_rank_log(_NO_HOST.format(0, 0), 300), "rank_3.log").rank_hosts == {}
