"""nccl-tests against the link it ran on and its own sizes; the odd one out across ranks."""

from __future__ import annotations

import io

import rankscope as engine

HEAD = """# nThread 1 nGpus 1 minBytes 65536 maxBytes 1073741824 step: 4(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  11223 on   gpu-a01 device  0 [0x18] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  11224 on   gpu-a01 device  1 [0x2a] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid  22334 on   gpu-a02 device  0 [0x18] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid  22335 on   gpu-a02 device  1 [0x2a] NVIDIA H100 80GB HBM3
gpu-a01:11223:11223 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.1.0.1<0>
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
"""


def _row(size: int, busbw: float) -> str:
    algbw = busbw / 1.5
    t = size / algbw / 1e3
    return f"{size:12d} {size // 4:13d}     float     sum      -1 {t:8.1f} {algbw:7.2f} {busbw:7.2f}      0 {t:8.1f} {algbw:7.2f} {busbw:7.2f}      0"


def _run(bw: dict[int, float]) -> engine.ParseResult:
    body = "\n".join(_row(s, b) for s, b in sorted(bw.items()))
    text = HEAD + body + "\n# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 20.0\n"
    return engine.parse_artifact(io.BytesIO(text.encode()), name="all_reduce_perf_2n.txt")


def _kinds(doc: dict) -> dict[str, dict]:
    return {f["kind"]: f for f in doc["findings"]}


def test_a_run_far_below_its_links_rate_is_judged_against_that_link() -> None:
    doc = engine.analyze([_run({1 << 20: 10.0, 1 << 24: 18.0, 1 << 28: 20.5, 1 << 30: 21.0})])
    f = _kinds(doc)["nccl_tests_below_link"]
    assert "IB" in f["title"] and "far below" in f["title"] and f["hosts"] == ["gpu-a01", "gpu-a02"]
    assert "assumed" in f["detail"]  # the log gave no NIC rate: the assumption is named
    row = doc["isolation"]["nccl_tests"][0]
    assert row["link"] == "IB" and row["vs_link"] < 0.5


def test_a_healthy_run_is_not_judged_low_nor_collapsed() -> None:
    doc = engine.analyze([_run({1 << 20: 20.0, 1 << 24: 38.0, 1 << 28: 44.0, 1 << 30: 46.0})])
    assert not {"nccl_tests_below_link", "nccl_tests_size_collapse"} & set(_kinds(doc))


def test_a_collapse_at_one_size_is_found_and_both_neighbours_are_cited() -> None:
    r = _run(
        {1 << 20: 20.0, 1 << 22: 30.0, 1 << 24: 6.0, 1 << 26: 40.0, 1 << 28: 44.0, 1 << 30: 46.0}
    )
    doc = engine.analyze([r])
    f = _kinds(doc)["nccl_tests_size_collapse"]
    assert "16 MiB" in f["title"]
    assert [e["text"].split()[0] for e in f["evidence"]] == ["4194304", "16777216", "67108864"]


def test_the_rate_the_log_gives_wins_over_the_platform_guess() -> None:
    r = _run({1 << 28: 20.5, 1 << 30: 21.0})
    ev = next(e for e in r.events if e.kind == "nccl_test_result")
    assert ev.fields["expected"]["gbs"] == 50.0  # one 400 Gb/s NIC per H100 assumed
    text = (
        HEAD.replace("# Using devices", "# Using devices\n    Rate: 200")
        + _row(1 << 30, 21.0)
        + "\n"
    )
    r2 = engine.parse_artifact(io.BytesIO(text.encode()), name="all_reduce_perf.txt")
    ev2 = next(e for e in r2.events if e.kind == "nccl_test_result")
    assert (
        ev2.fields["expected"]["gbs"] == 25.0 and "from the log" in ev2.fields["expected"]["basis"]
    )


FP = "CollectiveFingerPrint(SequenceNumber=17, OpType={op}, TensorShape=[1024], TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda))"


def _mismatch_log(n: int, odd: dict[int, str]) -> bytes:
    lines = []
    for r in range(n):
        me = FP.format(op=odd.get(r, "ALLREDUCE"))
        other_rank = next(iter(odd)) if r not in odd else (1 if r == 0 else 0)
        other = FP.format(op=odd.get(other_rank, "ALLREDUCE"))
        lines.append(
            f"[rank{r}]: RuntimeError: Detected mismatch between collectives on ranks. Rank {r} is "
            f"running collective: {me}, but Rank {other_rank} is running collective: {other}."
        )
    return ("\n".join(lines) + "\n").encode()


def test_the_minority_collective_is_the_culprit_not_every_rank() -> None:
    r = engine.parse_artifact(io.BytesIO(_mismatch_log(8, {5: "BROADCAST"})), name="job.out")
    doc = engine.analyze([r])
    assert doc["triage"]["category"] == "SOFTWARE"
    assert doc["localization"]["culprit_ranks"] == [5]


def test_a_tie_names_nobody() -> None:
    r = engine.parse_artifact(io.BytesIO(_mismatch_log(2, {1: "BROADCAST"})), name="job.out")
    doc = engine.analyze([r])
    assert "odd_one_out" not in doc["localization"]
    # both sides printed it, each naming the other: neither is the odd one, and the two of
    # them are every rank of the job
    assert doc["localization"]["culprit_ranks"] == []
    assert doc["triage"]["category"] == "SOFTWARE"


def test_a_mismatch_only_one_side_printed_stays_with_the_rank_that_printed_it() -> None:
    log = _mismatch_log(2, {1: "BROADCAST"}).splitlines(keepends=True)[1]
    doc = engine.analyze([engine.parse_artifact(io.BytesIO(log), name="job.out")])
    assert doc["localization"]["culprit_ranks"] == [1]


def _timeouts(ops: dict[int, str]) -> bytes:
    return "".join(
        f"[rank{r}]:[E1107 10:42:28.858931807 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog "
        f"caught collective operation timeout: WorkNCCL(SeqNum=4486, OpType={op}, NumelIn=1, "
        f"NumelOut=1, Timeout(ms)=600000) ran for 600013 milliseconds before timing out.\n"
        for r, op in ops.items()
    ).encode()


def test_a_timeout_minority_is_named_when_the_majority_is_most_of_the_job() -> None:
    ops = {r: "_ALLGATHER_BASE" for r in range(4)} | {2: "REDUCE"}
    doc = engine.analyze([engine.parse_artifact(io.BytesIO(_timeouts(ops)), name="job.out")])
    assert doc["localization"]["culprit_ranks"] == [2]


def test_a_timeout_minority_among_few_of_many_ranks_names_nobody() -> None:
    # ranks 0, 1 and 5 of at least 6: the silent ranks may be on either op
    ops = {0: "REDUCE", 1: "_ALLGATHER_BASE", 5: "_ALLGATHER_BASE"}
    doc = engine.analyze([engine.parse_artifact(io.BytesIO(_timeouts(ops)), name="job.out")])
    assert doc["localization"]["culprit_ranks"] == []


def test_a_cuda_error_a_launcher_reports_on_a_rank_is_that_ranks() -> None:
    log = (
        b"[03/18/2025-23:49:47] [TRT-LLM] [E] Failed to initialize executor on rank 6: CUDA "
        b"error: uncorrectable NVLink error detected during the execution\n"
    )
    doc = engine.analyze([engine.parse_artifact(io.BytesIO(log), name="trtllm.log")])
    assert doc["triage"]["category"] == "HARDWARE"
    assert doc["localization"]["culprit_ranks"] == [6]


def test_an_nccl_setting_on_one_rank_is_named_with_its_line() -> None:
    lines = [
        f"[rank{r}]: node{r // 4}:{100 + r}:{100 + r} [{r % 4}] NCCL INFO NCCL_IB_TIMEOUT set by environment to {14 if r == 6 else 22}."
        for r in range(8)
    ]
    r = engine.parse_artifact(io.BytesIO(("\n".join(lines) + "\n").encode()), name="job.out")
    doc = engine.analyze([r])
    f = next(f for f in doc["findings"] if f["kind"] == "odd_one_out")
    assert f["ranks"] == [6] and f["hosts"] == ["node1"]
    assert f["evidence"][0]["line"] == 7 and "to 14." in f["evidence"][0]["text"]
