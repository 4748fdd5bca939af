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


def test_an_ip_label_and_a_kernel_log_readers_columns_name_the_node() -> None:
    # pdsh (the deepspeed multi-node runner) labels remote lines "<ip>: "; talosctl
    # dmesg adds the facility and level columns before the kernel's own stamp
    kern = (
        "10.11.0.119: kern: warning: [2026-04-02T21:26:20.599716692Z]: NVRM: Xid "
        "(PCI:0000:48:00): 74, pid=22884, name=python3, NVLink: fatal error detected on link 8"
        "(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)\n"
    )
    doc = _triage({"kern.log": kern})
    assert doc["triage"]["category"] == "HARDWARE"
    assert doc["localization"]["culprit_hosts"] == ["10.11.0.119"]
    log = (
        "10.13.0.81: [rank19]:[E319 10:31:07.406255799 ProcessGroupNCCL.cpp:1895] [PG ID 1 "
        "PG GUID 1 Rank 19] Process group watchdog thread terminated with exception: CUDA "
        "error: an illegal memory access was encountered\n"
    )
    loc = _triage({"train.log": log})["localization"]
    assert (loc["culprit_ranks"], loc["culprit_hosts"]) == ([19], ["10.13.0.81"])


def test_xid_43_of_an_application_fault_does_not_outrank_a_later_xid() -> None:
    dmesg = (
        "[Wed Feb 10 23:04:35 2021] NVRM: Xid (PCI:0000:3d:00): 43, pid=35521, Ch 00000008\n"
        "[Fri Feb 12 23:42:34 2021] NVRM: Xid (PCI:0000:db:00): 31, pid=13641, Ch 00000008, "
        "intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_10 faulted @ 0x7fd7_90743000. "
        "Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ\n"
    )
    doc = _triage({"dmesg.txt": dmesg})
    assert doc["triage"]["category"] == "HARDWARE"
    assert "): 31," in doc["root_cause"]["chain"][0]["evidence"][0]["text"]


def test_a_node_spelled_in_two_letter_cases_is_reported_once_in_lower_case() -> None:
    log = (
        "slurmstepd: error: Detected 1 oom-kill event(s) in step 7314826.0 cgroup. Some of "
        "your processes may have been killed by the cgroup out-of-memory handler.\n"
        "srun: error: Node-01-01: task 4: Out Of Memory\n"
        "slurmstepd: error: *** STEP 7314826.0 ON node-01-01 CANCELLED AT 2022-03-15T09:12:48 ***\n"
    )
    loc = _triage({"slurm-7314826.out": log})["localization"]
    assert (loc["culprit_ranks"], loc["culprit_hosts"]) == ([4], ["node-01-01"])


def test_the_deepspeed_launcher_names_its_only_worker_but_not_one_of_many() -> None:
    oom = (
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.92 GiB (GPU 0; "
        "31.74 GiB total capacity; 30.00 GiB already allocated; 304.88 MiB free; 30.60 GiB "
        "reserved in total by PyTorch)\n"
    )

    def launch(n: int) -> str:
        return (
            f"[2023-11-09 16:21:41,118] [INFO] [launch.py:163:main] dist_world_size={n}\n"
            + oom
            + "".join(
                f"[2023-11-09 16:22:03,420] [INFO] [launch.py:315:sigkill_handler] Killing "
                f"subprocess {2417 + i}\n"
                for i in range(n)
            )
            + "[2023-11-09 16:22:03,439] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/"
            f"python3', '-u', 'train.py', '--local_rank={n - 1}'] exits with return code = 1\n"
        )

    # the launcher prints the command of the last worker it started, whichever one failed
    assert _triage({"train.log": launch(1)})["localization"]["culprit_ranks"] == [0]
    assert _triage({"train.log": launch(2)})["localization"]["culprit_ranks"] == []


def test_a_platform_viewers_level_column_does_not_make_an_exception_a_logged_one() -> None:
    # the viewer stamps every line "[INFO] [Driver]", the traceback and the error alike
    pre = "2023-08-02 21:27:58\t2023-08-02 21:27:58.000 [INFO] [Driver] "
    log = "".join(
        pre + x + "\n"
        for x in (
            "Traceback (most recent call last):",
            'File "/workspace/train.py", line 139, in train',
            "model, optimizer, _, _ = deepspeed.initialize(",
            "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.04 GiB (GPU 0; "
            "79.35 GiB total capacity; 74.62 GiB already allocated; 3.71 GiB free)",
        )
    )
    t = _triage({"driver.log": log})["triage"]
    assert (t["category"], t["shape"]) == ("OOM", "crash")


def test_a_catalogued_message_cut_by_terminal_wrapping_is_read_from_its_first_line() -> None:
    msg = (
        "(raylet) [2023-08-14 10:02:37,518 E 2741 2741] (raylet) node_manager.cc:3007: 2 Workers "
        "(tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other "
        "reasons at node (ID: c3e7a90b21d4f6e85a1c0d9b7e2f4a6c8d0e1b3f5a7c9e2d4b6f8a0c, IP: "
        "10.0.167.62) over the last time period."
    )
    cut = msg.index("(tasks /") + len("(tasks /")
    rest = msg[cut:]
    wrapped = "\n".join([msg[:cut], rest[:110], rest[110:220], rest[220:]]) + "\n"
    doc = _triage({"worker.log": wrapped})
    assert doc["triage"]["category"] == "OOM"
    assert doc["localization"]["culprit_hosts"] == ["10.0.167.62"]
    assert doc["root_cause"]["chain"][0]["evidence"][0]["line"] == 1
    # a traceback's code line naming an exception is not the start of that exception's line
    tb = (
        '  File "/x/dynamic_rendezvous.py", line 634, in run\n'
        "    raise RendezvousClosedError()\n"
        "torch.distributed.elastic.rendezvous.api.RendezvousClosedError\n"
    )
    ev = _triage({"worker.log": tb})["root_cause"]["chain"][0]["evidence"][0]
    assert ev["line"] == 3


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
