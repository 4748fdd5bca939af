"""Rules the held-out rounds asked for, read from the lines themselves: an exception's own
words before its type, a DataLoader worker's exception by what it was, a wait on peers
that never came as a hang on those peers, and a node named only by the daemon that lost it."""

from __future__ import annotations

from .test_verdict_rules import TRACEBACK, _triage


def _category(exc: str) -> str:
    return str(_triage({"train.log": TRACEBACK.format(exc=exc)})["triage"]["category"])


def test_an_unknown_exception_is_read_by_its_words_before_its_type() -> None:
    # a library's own check raises ValueError/RuntimeError with the cause in its message
    assert _category("ValueError: Input contains NaN, infinity or a value too large") == (
        "NUMERICAL"
    )
    assert _category("RuntimeError: Failed to allocate 2.00 GiB for the KV cache") == "OOM"
    assert _category("ValueError: unknown format of the record header in shard 17") == "DATA"
    assert _category("RuntimeError: Connection refused while talking to the parameter server") == (
        "NETWORK"
    )
    # the same types without such words stay programming errors
    assert _category("ValueError: expected 3 channels, got 4") == "SOFTWARE"
    assert _category("RuntimeError: information about the step was not found") == "SOFTWARE"


def test_a_dataloader_workers_exception_is_read_by_what_it_was() -> None:
    # the loader's re-raise alone (the worker's own traceback cut off): what it caught decides
    # when a rule knows it as something other than the data
    assert _category("MemoryError: Caught MemoryError in DataLoader worker process 2.") == "OOM"
    assert _category("OSError: Caught OSError in DataLoader worker process 1.") == "DATA"
    assert _category("KeyError: Caught KeyError in DataLoader worker process 0.") == "DATA"


def test_a_wait_on_peers_that_never_came_is_a_hang_on_those_peers() -> None:
    log = (
        "[1,0]<stderr>:[2025-09-02 13:55:31.858119: W horovod/common/operations.cc:588] One or "
        "more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks "
        "and are waiting for remainder of ranks for more than 60 seconds.\n"
        "[1,0]<stderr>:Stalled ops:HorovodBroadcast_dense_1_bias_0 [missing ranks: 1]\n"
    )
    doc = _triage({"mpirun.log": log})
    assert doc["triage"]["shape"] == "hang"
    assert doc["localization"]["culprit_ranks"] == [1]
    # without a rank that never came, a store wait is a hang that blames nobody
    doc = _triage(
        {
            "train.log": "[rank0]: torch.distributed.DistStoreError: wait timeout after "
            "300000ms, keys: /broadcast_from/0/75465\n"
        }
    )
    assert (doc["triage"]["shape"], doc["localization"]["culprit_ranks"]) == ("hang", [])


def test_a_failure_known_only_by_the_node_it_lost_names_that_node() -> None:
    log = (
        "ORTE has lost communication with a remote daemon.\n\n"
        "  HNP daemon   : [[43015,0],0] on node launcher-0\n"
        "  Remote daemon: [[43015,0],20] on node worker-19\n"
    )
    doc = _triage({"launcher.log": log})
    assert doc["triage"]["shape"] == "crash"
    assert doc["localization"]["culprit_hosts"] == ["worker-19"]


def test_a_module_error_class_is_not_a_host_label() -> None:
    doc = _triage(
        {
            "train.log": "cv2.error: OpenCV(4.6.0) /io/opencv/modules/imgproc/src/color.cpp:182: "
            "error: (-215:Assertion failed) !_src.empty() in function 'cvtColor'\n"
        }
    )
    assert doc["triage"]["category"] == "DATA"
    assert doc["localization"]["culprit_hosts"] == []


def test_a_stamp_with_a_spaced_utc_offset_is_peeled_whole() -> None:
    # a log collector's "2025-10-03 15:39:31.043 +08:00" in front of the program's own stamp:
    # both go, and the NCCL banner behind them names the host
    from rankscope.envelope import peel

    env = peel(
        "2025-10-03 15:39:31.043 +08:00 [2025-10-03 07:39:30] h100-41:251:1233 [0] "
        "transport/net_ib.cc:180 NCCL WARN NET/IB : mlx5_ib0:1 async fatal event on QP (0x7f): "
        "local access violation work queue error"
    )
    assert env.time == "2025-10-03T15:39:31.043"
    assert env.message.startswith("h100-41:251:1233 [0] ")


NOTICE = (
    "(EngineCore_DP0 pid=2318) INFO 04-19 14:44:28 [shm_broadcast.py:681] No available shared "
    "memory broadcast block found in 60 seconds. This typically happens when some processes "
    "are hanging or doing some time-consuming work (e.g. compilation).\n"
)
PROGRESS = "(EngineCore_DP0 pid=2318) INFO 04-19 14:45:10 [loggers.py:116] Engine 000: Avg prompt throughput: 512.0 tokens/s\n"


def test_a_notice_that_a_wait_is_long_is_a_hang_only_if_it_goes_on() -> None:
    # printed once during a long compilation, then the server goes on: no failure
    doc = _triage({"vllm-serve.log": NOTICE + PROGRESS + PROGRESS})
    assert doc["triage"]["shape"] == "none"
    # where the log stops, or again and again: the wait went on
    assert _triage({"vllm-serve.log": PROGRESS + NOTICE})["triage"]["shape"] == "hang"
    doc = _triage({"vllm-serve.log": NOTICE + PROGRESS + NOTICE + PROGRESS})
    assert doc["triage"]["shape"] == "hang"


def test_only_pdshs_own_refused_key_is_a_launcher_failure() -> None:
    assert (
        _triage({"train.log": "localhost: user1@localhost: Permission denied (publickey).\n"})[
            "triage"
        ]["category"]
        == "INFRA"
    )
    # a setup script's git clone refused by the forge is not a node the launcher could not reach
    doc = _triage({"train.log": "[rank0]: git@github.com: Permission denied (publickey).\n"})
    assert doc["localization"]["culprit_hosts"] == []
    assert doc["triage"]["category"] != "INFRA"
