"""Regressions found by reading real public logs: each line here is written by us in the exact
format a real tool printed (our own hosts, ranks and values)."""

from __future__ import annotations

import io

import pytest

import rankscope as engine


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


def _summary(entries: list[tuple[int, bool]]) -> str:
    out = [
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        "train.py FAILED",
        "------------------------------------------------------------",
        "Failures:",
    ]
    for i, (rank, root) in enumerate(entries):
        if root:
            out += [
                "------------------------------------------------------------",
                "Root Cause (first observed failure):",
            ]
        out += [
            f"[{i}]:",
            "  time      : 2031-02-03_04:05:06",
            "  host      : gpu-node-17",
            f"  rank      : {rank} (local_rank: {rank})",
            f"  exitcode  : -6 (pid: {5000 + rank})",
            "  error_file: <N/A>",
            f"  traceback : Signal 6 (SIGABRT) received by PID {5000 + rank}",
        ]
    return "\n".join([*out, "=" * 60, ""])


def test_torchrun_root_cause_entry_wins_a_tie_with_the_failures_list() -> None:
    doc = _doc({"train.log": _summary([(1, False), (2, False), (0, True)])})
    (f,) = [f for f in doc["findings"] if f["kind"] == "torchrun_first_failure"]
    assert f["ranks"] == [0]
    assert doc["root_cause"]["chain"][0]["rank"] == 0


def test_watchdog_timeout_without_a_global_rank_names_op_seq_and_group_rank() -> None:
    doc = _doc(
        {
            "server.log": "terminate called after throwing an instance of 'c10::DistBackendError'\n"
            "  what():  [PG 2 Rank 6] Process group watchdog thread terminated with exception: "
            "[Rank 6] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=314, "
            "OpType=_ALLGATHER_BASE, NumelIn=64, NumelOut=512, Timeout(ms)=600000) ran for "
            "600042 milliseconds before timing out.\n"
        }
    )
    (f,) = [f for f in doc["findings"] if f["kind"] == "nccl_watchdog_timeout"]
    assert "_ALLGATHER_BASE seq 314" in f["title"]
    assert "group rank 6 of PG 2" in f["title"]
    assert "None" not in f["title"]


def test_old_teardown_line_carrying_the_nccl_error_is_read_as_the_error() -> None:
    line = (
        "[E ProcessGroupNCCL.cpp:455] Some NCCL operations have failed or timed out. Due to the "
        "asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
        "corrupted/incomplete data. [E ProcessGroupNCCL.cpp:460] To avoid data inconsistency, we "
        "are taking the entire process down. terminate called after throwing an instance of "
        "'std::runtime_error' what(): NCCL error: remote process exited or there was a network "
        "error, NCCL version 2.18.1 ncclRemoteError: A call failed possibly due to a network "
        "error or a remote process exiting prematurely. Last error: NET/IB : Got completion "
        "from peer 10.9.8.7<40001> with error 12, opcode 0, len 0, vendor err 129\n"
    )
    r = _parse("rank_3.log", line)
    (ev,) = r.events
    assert ev.kind == "nccl_error"
    assert ev.fields["nccl_code"] == "ncclRemoteError"
    assert ev.fields["last_error"].startswith("NET/IB : Got completion")
    doc = engine.analyze([r])
    assert doc["triage"]["category"] == "NETWORK"


def test_a_socket_closed_by_the_peer_is_weaker_network_evidence_than_an_ib_error() -> None:
    peer = (
        "trn-a-04:2211:2290 [3] misc/socket.cc:538 NCCL WARN Net : Connection closed by remote "
        "peer trn-a-05.cluster.local<41234>\n"
    )
    ib = (
        "trn-a-04:2211:2290 [3] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from "
        "peer 10.1.2.3<55555> with status=12 opcode=0 len=0 vendor err 129 (Recv)\n"
    )
    d_peer, d_ib = _doc({"node4.log": peer}), _doc({"node4.log": ib})
    assert d_peer["triage"]["category"] == d_ib["triage"]["category"] == "NETWORK"
    assert d_peer["triage"]["confidence"] < d_ib["triage"]["confidence"]
    assert "every rank was inside the collective" not in d_peer["triage"]["summary"]


def test_times_without_a_year_stay_yearless_in_the_chain() -> None:
    doc = _doc(
        {
            "train.log": "[rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0] "
            "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, "
            "NumelIn=4, NumelOut=4, Timeout(ms)=600000) ran for 600061 milliseconds before "
            "timing out.\n"
        }
    )
    times = [s["time"] for s in doc["root_cause"]["chain"] if s.get("time")]
    assert times and all(t.startswith("0000-12-06T") for t in times)
    assert all("2000-" not in s["event"] for s in doc["root_cause"]["chain"])


def _megatron_log() -> str:
    out = []
    for it in range(100, 1300, 100):
        out.append(
            f"[rank0]: [2031-03-04 05:{it // 100:02d}:00] iteration {it:8d}/  100000 | "
            f"consumed samples: {it * 256:12d} | lm loss: 2.{99 - it // 100:02d}E+00 | "
            "number of skipped iterations:   0 | number of nan iterations:   0 |"
        )
        if it % 500 == 0:
            out.append(f"[rank0]:  saving checkpoint at iteration {it:7d} to /ckpt/exp42")
            out.append(
                f"[rank0]:   successfully saved checkpoint from iteration {it:7d} to /ckpt/exp42 "
                "[ t 1/4, p 1/2 ]"
            )
    out.append(
        "[rank0]: [2031-03-04 05:13:00] iteration     1240/  100000 | consumed samples: "
        "317440 | lm loss: nan | number of skipped iterations:   1 | number of nan iterations:"
        "   1 |"
    )
    return "\n".join(out) + "\n"


def test_checkpoint_lines_give_the_last_clean_checkpoint_and_postmortem_steps() -> None:
    r = _parse("rank_0.log", _megatron_log())
    saved = [e for e in r.events if e.kind == "checkpoint_saved"]
    assert [e.fields["step"] for e in saved] == [500, 1000]
    assert [e.fields["step"] for e in r.events if e.kind == "checkpoint_save"] == [500, 1000]
    doc = engine.analyze([r])
    assert doc["triage"]["category"] == "NUMERICAL"
    assert doc["isolation"]["numerics"]["last_clean_checkpoint_step"] == 1000
    assert doc["job"]["last_step"] == 1240
    assert doc["job"]["last_checkpoint_step"] == 1000


def test_lifecycle_lines_are_events_with_their_values() -> None:
    text = "\n".join(
        [
            "Epoch 00007: reducing learning rate of group 0 to 2.5000e-05.",
            "[INFO] [nemo_logging:381] Epoch 1, global step 4000: 'val_loss' reached 1.87 "
            "(best 1.87), saving model to '/res/ckpt/epoch=1-step=4000.ckpt' as top 3",
            "[2031-03-04 06:00:00] [INFO] [torch_checkpoint_engine.py:33:commit] "
            "[Torch] Checkpoint global_step4200 is ready now!",
            "[INFO] [nemo_logging:381] Restoring states from the checkpoint path at /res/last.ckpt",
            " validation loss at iteration 4500 | lm loss value: 1.9E+00 |",
            "[W] [default] Worker group FAILED. 2/3 attempts left; will restart worker group",
            "INFO:torch.distributed.elastic.agent.server.api:[default] Restarting worker group",
        ]
    )
    r = _parse("rank_0.log", text + "\n")
    got = [(e.kind, e.fields.get("step", e.fields.get("lr"))) for e in r.events]
    assert got == [
        ("lr_change", 2.5e-05),
        ("checkpoint_saved", 4000),
        ("checkpoint_saved", 4200),
        ("checkpoint_loaded", None),
        ("eval", 4500),
        ("restart", None),
        ("restart", None),
    ]


def test_metrics_give_postmortem_throughput_and_step_time() -> None:
    rows = ["step,rank,step_time,tokens_per_sec"]
    for s in range(1, 201):
        slow = s > 160
        for rk in range(4):
            rows.append(f"{s},{rk},{1.5 if slow else 1.0},{8000 if slow else 12000}")
    doc = engine.analyze([_parse("metrics.csv", "\n".join(rows) + "\n")])
    m = doc["metrics"]
    assert m["baseline_throughput"] == 12000 and m["degraded_throughput"] == 8000
    assert m["baseline_step_time"] == 1.0 and m["step_time"] == 1.0
    assert doc["job"]["last_step"] == 200
    assert "last_checkpoint_step" not in doc["job"]


@pytest.mark.parametrize(
    ("line", "rank", "host", "message"),
    [
        ("[1,12]<stderr>:OSError: cannot identify image file", 12, None, "OSError: cannot"),
        (
            "2021-08-14T09:51:37.444Z: [1,0]<stderr>:KeyError: 'x'",
            0,
            None,
            "KeyError: 'x'",
        ),
        ("[default2]:[rank10]: RuntimeError: boom", 10, None, "RuntimeError: boom"),
        ("[stderr]ModuleNotFoundError: No module named 'x'", None, None, "ModuleNotFoundError"),
        (
            "slurmstepd-gpu27-05: error: Detected 1 oom-kill event(s)",
            None,
            "gpu27-05",
            "error: Detected",
        ),
    ],
)
def test_launcher_prefixes_give_rank_and_host(
    line: str, rank: int | None, host: str | None, message: str
) -> None:
    from rankscope.envelope import peel

    env = peel(line)
    assert env.rank == rank
    assert env.host == host
    assert env.message.startswith(message)


def test_a_slurm_job_cancelled_due_to_job_requeue_ended_by_the_scheduler() -> None:
    # submitit/SLURM print this when the running job is requeued (preemption, or the job's
    # own signal handler before its time limit): the scheduler ended it, it did not hang
    doc = _doc(
        {
            "slurm-77.out": "step 300 loss 1.9\n"
            "slurmstepd: error: *** JOB 77 ON cn-c03 CANCELLED AT 2024-02-01T10:00:00 DUE TO "
            "JOB REQUEUE ***\n"
        }
    )
    assert (doc["triage"]["shape"], doc["triage"]["category"]) == ("crash", "INFRA")


def test_a_signal_death_in_the_root_cause_block_cites_its_signal_line() -> None:
    # the block's "traceback : Signal 9 (SIGKILL) …" line is what shows the worker was killed;
    # the "rank :" line above it only names who
    log = "\n".join(
        [
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
            "============================================================",
            "train.py FAILED",
            "------------------------------------------------------------",
            "Failures:",
            "  <NO_OTHER_FAILURES>",
            "------------------------------------------------------------",
            "Root Cause (first observed failure):",
            "[0]:",
            "  time      : 2025-06-02_14:37:09",
            "  host      : node-a",
            "  rank      : 0 (local_rank: 0)",
            "  exitcode  : -9 (pid: 4183)",
            "  error_file: <N/A>",
            "  traceback : Signal 9 (SIGKILL) received by PID 4183",
            "============================================================",
        ]
    )
    doc = _doc({"train.log": log})
    cited = [
        e.get("text", "")
        for f in doc["findings"]
        for e in f.get("evidence", [])
        if f.get("kind") == "torchrun_first_failure"
    ]
    assert any("Signal 9 (SIGKILL) received by PID 4183" in t for t in cited), cited
