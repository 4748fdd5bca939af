"""Never "no failure" when the logs say otherwise; finished runs stay "none"."""

from __future__ import annotations

import io
from typing import Any

import rankscope as engine


def _triage(files: dict[str, str]) -> dict[str, Any]:
    results = [
        engine.parse_artifact(io.BytesIO(text.encode()), name=name) for name, text in files.items()
    ]
    return engine.analyze(results)


TRACEBACK = (
    "epoch 1 step 10 loss 2.31\n"
    "Traceback (most recent call last):\n"
    '  File "train.py", line 3, in <module>\n'
    "    main()\n"
    "{exc}\n"
)


def test_a_log_ending_in_an_uncaught_exception_is_a_crash_decided_by_the_table() -> None:
    doc = _triage(
        {"train.log": TRACEBACK.format(exc="json.decoder.JSONDecodeError: Expecting value")}
    )
    assert doc["triage"]["shape"] == "crash"
    assert doc["triage"]["category"] == "DATA"
    assert "exception table" in doc["root_cause"]["decided_by"]
    doc = _triage({"train.log": TRACEBACK.format(exc="ModuleNotFoundError: No module named 'x'")})
    assert (doc["triage"]["shape"], doc["triage"]["category"]) == ("crash", "SOFTWARE")


def test_a_signature_decides_and_says_so() -> None:
    doc = _triage(
        {
            "train.log": TRACEBACK.format(
                exc="Exception: Current loss scale already at minimum - cannot decrease scale "
                "anymore. Exiting run."
            )
        }
    )
    assert (doc["triage"]["shape"], doc["triage"]["category"]) == ("diverge", "NUMERICAL")
    assert doc["root_cause"]["decided_by"] == "signature loss-scale-minimum"


def test_a_finished_run_with_noise_stays_none() -> None:
    text = (
        "WARNING: Retrying (Retry(total=4, connect=None)) after connection broken by "
        "'ReadTimeoutError'\n"
        "epoch 3 step 300 loss 1.2\n"
        "Training completed. Do not forget to share your model.\n"
    )
    doc = _triage({"train.log": text})
    assert doc["triage"]["shape"] == "none"


def test_sigkill_exit_in_a_torchrun_summary_points_at_the_oom_killer() -> None:
    text = (
        "torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 3 "
        "(pid: 4242) of binary: /usr/bin/python\n"
        "Root Cause (first observed failure):\n"
        "[0]:\n"
        "  time      : 2024-05-01_10:00:00\n"
        "  host      : cn-a07\n"
        "  rank      : 3 (local_rank: 3)\n"
        "  exitcode  : -9 (pid: 4242)\n"
        "  error_file: <N/A>\n"
        "  traceback : Signal 9 (SIGKILL) received by PID 4242\n"
    )
    doc = _triage({"torchrun.log": text})
    assert (doc["triage"]["shape"], doc["triage"]["category"]) == ("crash", "OOM")
    assert doc["localization"]["culprit_ranks"] == [3]
    assert doc["localization"]["culprit_hosts"] == ["cn-a07"]


def test_a_local_network_setup_failure_names_the_rank_that_logged_it() -> None:
    """A fabric error is seen from both ends, so NETWORK names no rank; a process whose own
    provider could not open its resources (EFA/libfabric) is the one to look at — unless
    every rank logged it (then it is everyone's setup)."""
    ok = "".join(
        f"[1,{r}]<stdout>:ip-10-0-0-{r}:100{r}:200{r} [0] NCCL INFO Ring 00 : {r} -> {r + 1} "
        "[send] via NET/AWS Libfabric/0\n"
        for r in range(6)
    )
    bad = (
        "[1,4]<stdout>:ip-10-0-0-4:1004:2004 [0] create_nccl_ofi_component:459 NCCL WARN "
        "NET/OFI Couldn't open AV. RC: -22, ERROR: Invalid argument\n"
    )
    doc = _triage({"mpirun.log": ok + bad})
    assert doc["triage"]["category"] == "NETWORK"
    assert doc["localization"]["culprit_ranks"] == [4]
    everyone = "".join(bad.replace("[1,4]", f"[1,{r}]") for r in range(6))
    doc = _triage({"mpirun.log": ok + everyone})
    assert doc["localization"]["culprit_ranks"] == []
