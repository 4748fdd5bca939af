"""Every message variant of log-formats.md: wordings by version, whitespace quirks, wrappers, wrapping."""

from __future__ import annotations

import io
import json
import pickle
from pathlib import Path

import pytest

import rankscope as engine
from rankscope.envelope import peel
from rankscope.parsers.classify import classify
from rankscope.scan import HyperscanScanner, ReScanner

from .conftest import Jobs, triage_dir


def parse(text: str, name: str = "error-1-node-01.out") -> engine.ParseResult:
    return engine.parse_artifact(io.BytesIO(text.encode()), name=name)


@pytest.mark.parametrize(
    ("raw", "rank", "level"),
    [
        (
            "[rank29]:[E1121 10:22:33.123456789 ProcessGroupNCCL.cpp:1794] [PG ID 1 PG GUID 83(TENSOR_MODEL_PARALLEL_GROUP) Rank 1] x",
            29,
            "E",
        ),
        ("[80746] [rank3]:[W1121 10:22:33.123456789 x.cpp:1] x", 3, "W"),
        ("10: [E1121 10:22:33.123456789 ProcessGroupNCCL.cpp:455] x", 10, "E"),
        ("gpu-q-13: [rank7]:[E1121 10:22:33.123456789 x.cpp:1] x", 7, "E"),
        ("(RayWorkerWrapper pid=4009) [rank2]:[E1121 10:22:33.123456789 x.cpp:1] x", 2, "E"),
        # an actor whose name carries its rank (NeMo RL, Ray Train workers)
        (
            "(MegatronPolicyWorker[rank=97] pid=2990157, ip=10.0.12.6) [rank97]:[E1121 10:22:33.123456789 x.cpp:1] x",
            97,
            "E",
        ),
        # vLLM's multiprocess executor names the worker's rank in the tag itself
        ("(VllmWorker rank=6 pid=21780) [E1121 10:22:33.123456789 x.cpp:1] x", 6, "E"),
        (
            "dinov2-giant-nodes.cn-d004 [stderr] [rank5]:[E1121 10:22:33.123456789 x.cpp:1] x",
            5,
            "E",
        ),
        ("2026-11-21 10:22:33,123 [rank4]:[E1121 10:22:33.123456789 x.cpp:1] x", 4, "E"),
        ("[E ProcessGroupNCCL.cpp:455] [Rank 3] x", None, "E"),
    ],
)
def test_it_peels_every_wrapper_and_takes_the_global_rank(
    raw: str, rank: int | None, level: str
) -> None:
    env = peel(raw)
    got = env.rank if env.rank is not None else env.task
    assert got == rank
    assert env.level == level
    assert env.message.endswith("x")


def test_it_never_takes_a_rank_from_the_pg_prefix_or_the_cuda_device() -> None:
    r = parse(
        "node-09:1234:1240 [4] transport/net_ib.cc:1738 NCCL WARN NET/IB : Got completion from peer 10.0.0.12<45312> with error 12, opcode 0, len 0, vendor err 129\n"
    )
    assert r.events[0].rank is None
    assert r.events[0].host == "node-09"
    r = parse(
        "[rank29]:[E1121 10:22:33.123456789 ProcessGroupNCCL.cpp:2268] [PG ID 1 PG GUID 83(TENSOR_MODEL_PARALLEL_GROUP) Rank 1]  failure detected by watchdog at work sequence id: 45390 PG status: last enqueued work: 45390, last completed work: 45389\n"
    )
    e = r.events[0]
    assert (e.rank, e.fields["group_rank"], e.fields["pg"]) == (29, 1, "1")


@pytest.mark.parametrize(
    ("msg", "kind", "fields"),
    [
        (
            "[PG ID 0 PG GUID 0(default_pg) Rank 6] Received a dump signal due to a collective timeout from  rank 6 and we will try our best to dump the debug info. Last enqueued NCCL work: 62, last completed NCCL work: 62.This is most likely caused by incorrect usages ",
            "dump_received",
            {"from_rank": 6, "last_enqueued": 62},
        ),
        (
            "[PG 0 Rank 3] Exception (either an error or timeout) detected by watchdog at work: 120, last enqueued NCCL work: 120, last completed NCCL work: 119.",
            "watchdog_failure",
            {"seq": 120, "last_completed": 119},
        ),
        (
            "[PG 0 Rank 3] Timeout at NCCL work: 120, last enqueued NCCL work: 121, last completed NCCL work: 119.",
            "watchdog_failure",
            {"last_enqueued": 121},
        ),
        (
            "[Rank 3] NCCL watchdog thread terminated with exception: [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=96120, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800468 milliseconds before timing out.",
            "watchdog_timeout",
            {"seq": 96120, "op": "ALLREDUCE", "timeout_ms": 1800000},
        ),
        (
            "[PG ID 0 PG GUID 0(default_pg) Rank 3] First watchdog to set the dump signal.",
            "dump_first",
            {"pg": "0"},
        ),
        (
            "[PG ID 0 PG GUID 0(default_pg) Rank 3] Observed flight recorder dump signal from another rank via TCPStore.",
            "dump_observed",
            {},
        ),
        (
            "NCCL communicator was aborted on rank 3.  Original reason for failure was: NCCL error",
            "comm_aborted",
            {"work_rank": 3},
        ),
        (
            "[PG ID 0 PG GUID 0(default_pg) Rank 2] Terminating the process after attempting to dump debug info, due to ProcessGroupNCCL watchdog hang.",
            "fatal_terminate",
            {"reason": "ProcessGroupNCCL watchdog hang"},
        ),
        (
            "slurmstepd: error: *** JOB 123 ON node-00 CANCELLED AT 2026-11-21T12:00:05 DUE TO TIME LIMIT ***",
            "slurm_time_limit",
            {"host": "node-00"},
        ),
        (
            "NVRM: Xid (PCI:0000:b5:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
            "xid",
            {"xid": 79, "hardware": True},
        ),
        (
            " iteration      100/  500000 | lm loss: NAN | number of nan iterations:   3 |",
            "nan_loss",
            {"step": 100},
        ),
    ],
)
def test_it_reads_every_wording(msg: str, kind: str, fields: dict[str, object]) -> None:
    (got, _more) = classify(msg)
    assert got is not None and got[0] == kind
    for k, v in fields.items():
        assert got[1][k] == v


@pytest.mark.parametrize(
    "line",
    [
        "node-09:1234:1234 [0] NCCL INFO NCCL_IB_TIMEOUT set by environment to 22.",
        " iteration      100/  500000 | lm loss: 2.345678E+00 | number of nan iterations:   0 |",
        "[rank0]: INFO: Inference mode enabled",
        "[rank3]:[I1121 10:00:00.000000000 ProcessGroupNCCL.cpp:915] [PG ID 0 PG GUID 0(default_pg) Rank 3] ProcessGroupNCCL initialization options: size: 128, TIMEOUT(ms): 1800000",
    ],
)
def test_routine_lines_are_not_candidates(line: str) -> None:
    data = (line + "\n").encode()
    assert ReScanner().line_spans(data) == []
    assert HyperscanScanner().line_spans(data) == []


def test_hyperscan_and_re_find_the_same_candidates(jobs: Jobs) -> None:
    out, _, _ = jobs.get("data_stall", 128)
    data = (out / "error-4242-9.out").read_bytes()
    assert HyperscanScanner().line_spans(data) == ReScanner().line_spans(data)


def test_the_re_fallback_gives_the_same_triage(jobs: Jobs) -> None:
    out, _, doc = jobs.get("oom", 32)
    doc_re = triage_dir(out, scanner="re")
    from rankscope.scan import set_scanner

    set_scanner("hyperscan")
    assert doc_re["triage"] == doc["triage"]
    assert doc_re["localization"]["nccl"] == doc["localization"]["nccl"]


@pytest.mark.parametrize("version", ["2.5", "2.3"])
def test_older_watchdog_wordings_give_the_same_nccl_state(jobs: Jobs, version: str) -> None:
    _, m, doc = jobs.get("data_stall", 64, version=version)
    rows = doc["localization"]["nccl"]
    assert len({r["rank"] for r in rows if r["role"] in ("initiator", "ahead")}) == 63
    assert doc["localization"]["initiator_ranks"] == m["expected"]["initiator_ranks"]
    assert doc["triage"]["shape"] == "hang"
    if version == "2.5":
        assert doc["localization"]["straggler_ranks"] == m["expected"]["culprit_ranks"]
    else:  # 2.3 prints no dump-signal line on the stalled rank: it is the one without NCCL state
        assert any(
            f["kind"] == "ranks_without_nccl_state" and f["ranks"] == m["expected"]["culprit_ranks"]
            for f in doc["findings"]
        )


def test_per_rank_files_without_prefixes_and_old_glog(jobs: Jobs) -> None:
    _, m, doc = jobs.get("oom", 16, style="per_rank", version="2.1")
    assert doc["triage"]["category"] == "OOM"
    assert doc["localization"]["culprit_ranks"] == m["expected"]["culprit_ranks"]
    assert len(doc["localization"]["initiator_ranks"]) == 15


@pytest.mark.parametrize("style", ["viewer", "srun", "pdsh"])
def test_wrapper_styles_give_the_same_verdict(jobs: Jobs, style: str) -> None:
    _, m, doc = jobs.get("data_stall", 32, style=style)
    assert doc["triage"]["category"] == "DATA"
    assert doc["localization"]["straggler_ranks"] == m["expected"]["culprit_ranks"]
    assert doc["job"]["world_size"] == 32


def test_wrapped_lines_are_joined(jobs: Jobs) -> None:
    _, m, doc = jobs.get("data_stall", 32, wrap=150)
    rows = {r["rank"]: r for r in doc["localization"]["nccl"]}
    culprit = m["expected"]["culprit_ranks"][0]
    assert rows[culprit]["role"] == "straggler"
    assert all(r["last_completed"] is not None for r in rows.values())


def test_a_parse_result_round_trips_through_json_and_arrow(jobs: Jobs) -> None:
    out, _, _ = jobs.get("slow_network", 128)
    with open(out / "metrics.csv", "rb") as f:
        r = engine.parse_artifact(f, name="metrics.csv")
    assert r.kind == "metrics" and r.error is None
    buf = io.BytesIO()
    r.metrics.write(buf)
    buf.seek(0)
    back = engine.ParseResult.from_json(
        json.loads(json.dumps(r.to_json())), metrics=engine.MetricsTable.read(buf)
    )
    assert back.to_json() == r.to_json()
    assert len(back.metrics) == len(r.metrics)


def test_the_line_index_points_at_line_starts(jobs: Jobs) -> None:
    out, _, _ = jobs.get("healthy", 64, steps=3000)
    path = out / "error-4242-0.out"
    with open(path, "rb") as f:
        r = engine.parse_artifact(f, name=path.name)
    data = path.read_bytes()
    assert len(r.line_index) > 1
    for line_no, off in r.line_index:
        assert data.count(b"\n", 0, off) == line_no - 1
    assert r.lines == data.count(b"\n")


def test_a_flight_recorder_pickle_is_read_without_loading_classes() -> None:
    dump = {
        "version": "2.4",
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
        "pg_status": {
            "0": {
                "last_enqueued_collective": 7,
                "last_started_collective": -1,
                "last_completed_collective": 7,
            }
        },
        "entries": [
            {
                "record_id": 1,
                "pg_id": 0,
                "process_group": ("0", "default_pg"),
                "collective_seq_id": 7,
                "profiling_name": "nccl:all_reduce",
                "state": "completed",
                "timeout_ms": 600000,
                "is_p2p": False,
            }
        ],
    }
    r = engine.parse_artifact(io.BytesIO(pickle.dumps(dump)), name="nccl_trace_rank_5")
    assert r.error is None and r.ranks == [5]
    assert r.flight_recorder["pg_status"]["0"]["last_completed"] == 7


def test_a_pickle_naming_a_class_is_refused() -> None:
    r = engine.parse_artifact(
        io.BytesIO(pickle.dumps({"x": Path("/etc")})), name="nccl_trace_rank_1"
    )
    assert r.error and "refused" in r.error


def test_a_hostile_file_beside_good_ones_is_reported_and_skipped(
    jobs: Jobs, tmp_path: Path
) -> None:
    out, _, _ = jobs.get("oom", 16)
    d = tmp_path / "job"
    d.mkdir()
    for p in out.glob("*.out"):
        (d / p.name).write_bytes(p.read_bytes())
    (d / "core.bin").write_bytes(bytes(range(256)) * 64)
    (d / "nccl_trace_rank_3").write_bytes(pickle.dumps([Path("/")]))
    (d / "empty.log").write_bytes(b"")
    doc = triage_dir(d)
    assert doc["triage"]["category"] == "OOM"
    errors = {a["name"]: a["error"] for a in doc["artifacts"] if a["error"]}
    assert set(errors) == {"job/core.bin", "job/nccl_trace_rank_3"}


def test_retries_that_exhaust_are_a_cause_not_noise() -> None:
    text = "".join(
        f"[rank3]:[W1121 10:0{i}:00.000000000 ais_client.py:214] GET ais://train/shard-1.tar failed: Connection reset by peer; retrying {i}/5\n"
        for i in range(1, 6)
    )
    doc = engine.analyze([parse(text)])
    kinds = {f["kind"] for f in doc["findings"]}
    assert "retries_exhausted" in kinds and "retry_noise" not in kinds
