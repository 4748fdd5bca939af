"""Category and culprit rules that are read from the lines, not from a case's shape:
nvidia-smi sensors, memory-cgroup kills, configuration errors, gloo's collective timeout."""

from __future__ import annotations

import io
from typing import Any

import rankscope as engine

TABLE = """\
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 440.82       Driver Version: 440.82       CUDA Version: 10.2     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  GeForce RTX 2080    Off  | 00000000:01:00.0 Off |                  N/A |
|{row0}|   6823MiB /  7982MiB |    100%      Default |
+-------------------------------+----------------------+----------------------+
|   1  GeForce RTX 2080    Off  | 00000000:02:00.0 Off |                  N/A |
|{row1}|   6541MiB /  7982MiB |      0%      Default |
+-------------------------------+----------------------+----------------------+
"""
ERR_ROW = "ERR!   54C    P2   ERR! / 225W "
OK_ROW = " 41%   49C    P2    63W / 225W "


def _triage(files: dict[str, str]) -> dict[str, Any]:
    results = [
        engine.parse_artifact(io.BytesIO(text.encode()), name=name) for name, text in files.items()
    ]
    return engine.analyze(results)


def test_sensors_a_board_cannot_read_while_its_twin_can_point_at_that_board() -> None:
    doc = _triage({"nvidia-smi.txt": TABLE.format(row0=ERR_ROW, row1=OK_ROW)})
    assert (doc["triage"]["category"], doc["triage"]["shape"]) == ("HARDWARE", "hang")
    cited = [ev["line"] for step in doc["root_cause"]["chain"] for ev in step["evidence"]]
    assert 8 in cited  # the ERR! row itself, not only the GPU's name line
    # every board of the model reads ERR!: how those boards report a sensor, not a fault
    doc = _triage({"nvidia-smi.txt": TABLE.format(row0=ERR_ROW, row1=ERR_ROW)})
    assert doc["triage"]["shape"] == "none"


def test_a_memory_cgroup_kill_is_oom_even_when_the_loader_reports_it() -> None:
    doc = _triage(
        {
            "dmesg.txt": "Memory cgroup out of memory: Killed process 6124 (python) "
            "total-vm:14119556kB, anon-rss:6538204kB, file-rss:80652kB\n",
            "train.log": "RuntimeError: DataLoader worker (pid 6124) is killed by signal: Killed.\n",
        }
    )
    assert (doc["triage"]["category"], doc["triage"]["shape"]) == ("OOM", "crash")


def test_a_configuration_error_names_no_single_rank() -> None:
    log = (
        "[rank0]: Traceback (most recent call last):\n"
        '[rank0]:   File "pretrain.py", line 242, in <module>\n'
        "[rank0]: AssertionError: First dimension of the tensor should be divisible by tensor "
        "parallel size\n"
    )
    doc = _triage({"pretrain.log": log})
    assert (doc["triage"]["category"], doc["triage"]["shape"]) == ("SOFTWARE", "crash")
    assert doc["localization"]["culprit_ranks"] == []


def test_gloos_read_timeout_in_a_collective_is_a_hang() -> None:
    log = (
        "Traceback (most recent call last):\n"
        '  File "main.py", line 305, in train\n'
        "    dist.all_reduce(coalesced)\n"
        "RuntimeError: [/opt/gloo/transport/tcp/buffer.cc:76] Read timeout [127.0.0.1]:32444\n"
    )
    assert _triage({"rank_1.log": log})["triage"]["shape"] == "hang"


def test_xla_dist_prefixes_name_the_worker() -> None:
    line = (
        "2021-10-18 02:48:58 10.0.7.33 [3]   (1) Resource exhausted: Attempting to allocate "
        "180.59M. That was not possible. There are 142.58M free.; (0x3x0_HBM1)\n"
    )
    doc = _triage({"train.log": line})
    assert doc["triage"]["category"] == "OOM"
    assert doc["localization"]["culprit_hosts"] == ["10.0.7.33"]


def test_a_limit_every_rank_shares_names_no_rank() -> None:
    log = (
        "ERROR: Unexpected bus error encountered in worker. This might be caused by "
        "insufficient shared memory (shm).\n"
        "RuntimeError: DataLoader worker (pid 8774) is killed by signal: Bus error.\n"
    )
    doc = _triage({"rank_0.log": log})
    assert (doc["triage"]["category"], doc["triage"]["shape"]) == ("DATA", "crash")
    assert doc["localization"]["culprit_ranks"] == []


def test_a_memory_limit_kill_is_told_as_host_memory_not_a_gpu_oom() -> None:
    doc = _triage(
        {
            "slurm-77.out": (
                "Epoch 0 | Training | Steps: 93 | Loss: 24.58\n"
                "slurmstepd: error: Job 77 exceeded memory limit (626359956 > 512000000), being killed\n"
                "slurmstepd: error: *** JOB 77 ON cn-b04 CANCELLED AT 2025-03-01T09:41:52 ***\n"
            )
        }
    )
    tri = doc["triage"]
    assert tri["category"] == "OOM" and tri["shape"] == "crash"
    assert "memory limit" in tri["summary"] and "GPU" not in tri["summary"]
    advice = " ".join(r["text"] for r in doc["recommendations"])
    assert "sacct" in advice and "micro-batch" not in advice


def test_a_cuda_oom_keeps_the_gpu_advice() -> None:
    doc = _triage(
        {
            "rank_3.log": (
                "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
                "GPU 3 has a total capacity of 79.15 GiB of which 1.06 GiB is free.\n"
            )
        }
    )
    assert "GPU memory" in doc["triage"]["summary"]
    assert any("micro-batch" in r["text"] for r in doc["recommendations"])


def test_a_catalogued_root_cause_is_told_its_own_first_action() -> None:
    # a rendezvous that timed out is INFRA, but no node to drain or time limit to raise:
    # what to do first is the catalogue entry's action
    doc = _triage(
        {
            "node0.log": (
                "[INFO] Starting elastic_operator with launch configs:\n"
                "Traceback (most recent call last):\n"
                '  File "/usr/bin/torchrun", line 8, in <module>\n'
                "    sys.exit(main())\n"
                "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError\n"
            )
        }
    )
    tri = doc["triage"]
    assert (tri["category"], tri["shape"]) == ("INFRA", "crash")
    assert "rdzv" in tri["summary"] and "cluster team" not in tri["summary"]
    first = doc["recommendations"][0]
    assert first["kind"] == "immediate" and "--rdzv_endpoint" in first["text"]
    assert not any("Resubmit" in r["text"] for r in doc["recommendations"])


def test_a_catalogued_network_root_is_summarised_in_its_own_words_not_as_a_fabric_fault() -> None:
    tri = _triage(
        {
            "node1.log": "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: "
            "The connection to the C10d store has failed. See inner exception for details.\n"
        }
    )["triage"]
    assert tri["category"] == "NETWORK"
    assert "c10d store" in tri["summary"] and "IB/RoCE fabric" not in tri["summary"]


def test_a_launcher_hung_up_by_sighup_is_the_cause_not_an_echo() -> None:
    tri = _triage(
        {
            "train.log": "WARNING:torch.distributed.elastic.agent.server.api:Received 1 death "
            "signal, shutting down workers\n"
            "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 4101 "
            "closing signal SIGHUP\n"
        }
    )["triage"]
    assert (tri["category"], tri["shape"]) == ("INFRA", "crash")
    assert "SIGHUP" in tri["summary"]


STORE_TIMEOUT = (
    "[E socket.cpp:793] [c10d] The client socket has timed out after 60s while trying to "
    "connect to (10.0.3.11, 2222).\n"
    "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to "
    "the C10d store has failed. See inner exception for details.\n"
)


def test_every_node_a_client_of_the_same_store_means_no_node_hosted_it() -> None:
    both = _triage({"node0.log": STORE_TIMEOUT, "node1.log": STORE_TIMEOUT})
    assert both["triage"]["category"] == "INFRA"
    assert "No node hosted the c10d store" in both["triage"]["summary"]
    # one node's log alone cannot tell a store nobody hosts from one it cannot reach
    one = _triage({"node1.log": STORE_TIMEOUT})
    assert one["triage"]["category"] == "NETWORK"
    # a node that logs something else (the store host) is not a client timing out
    other = _triage(
        {
            "node0.log": "I0101 rendezvous complete\n",
            "node1.log": STORE_TIMEOUT,
            "node2.log": STORE_TIMEOUT,
        }
    )
    assert other["triage"]["category"] == "NETWORK"
