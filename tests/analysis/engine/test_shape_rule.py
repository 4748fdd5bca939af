"""Crash or hang: a crash when a line shows a process exiting or being killed because of the
failure, a hang when the logs stop after errors that do not end a process
(``verdict.exit_evidence``; docs/analysis.md, "Crash or hang")."""

from __future__ import annotations

import io
from typing import Any

import rankscope as engine

IB_WARN = (
    "gpu-a07:4211:4390 [3] transport/net_ib.cc:881 NCCL WARN NET/IB : Got completion from "
    "peer 10.0.3.17<49577> with error 12, opcode 1, len 0, vendor err 129\n"
)
XID = (
    "[Fri Sep  5 03:51:12 2026] NVRM: Xid (PCI:0000:9c:00): 48, pid=412377, name=python3, "
    "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at "
    "partition 9, subpartition 1.\n"
)


def _triage(files: dict[str, str]) -> dict[str, Any]:
    results = [
        engine.parse_artifact(io.BytesIO(text.encode()), name=name) for name, text in files.items()
    ]
    return engine.analyze(results)


def _shape(files: dict[str, str]) -> str:
    return str(_triage(files)["triage"]["shape"])


def test_an_error_the_log_just_stops_after_is_a_hang() -> None:
    doc = _triage({"worker-3.log": "step 100 loss 2.1\n" + IB_WARN})
    assert (doc["triage"]["shape"], doc["triage"]["category"]) == ("hang", "NETWORK")
    assert "hang: no line says a process exited" in doc["root_cause"]["decided_by"]
    assert _shape({"dmesg.txt": XID}) == "hang"


def test_the_same_error_followed_by_an_exception_is_a_crash() -> None:
    raised = (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 9, in <module>\n'
        "RuntimeError: NCCL communicator was aborted on rank 3.\n"
    )
    doc = _triage({"worker-3.log": "step 100 loss 2.1\n" + IB_WARN + raised})
    assert (doc["triage"]["shape"], doc["triage"]["category"]) == ("crash", "NETWORK")
    assert "crash: a process ended (worker-3.log:" in doc["root_cause"]["decided_by"]
    # the process that died may have written another file than the kernel log
    app = "RuntimeError: CUDA error: an uncorrectable ECC error was encountered\n"
    assert _shape({"dmesg.txt": XID, "train.log": app}) == "crash"


def test_kills_and_aborts_are_exit_evidence() -> None:
    assert _shape({"train.log": IB_WARN + "Aborted (core dumped)\n"}) == "crash"
    assert (
        _shape(
            {
                "slurm-88.out": "Out of memory: Killed process 5123 (python) total-vm:9GB\n",
            }
        )
        == "crash"
    )


def test_a_timeout_waiting_on_peers_does_not_make_a_hang_a_crash() -> None:
    barrier = (
        "Traceback (most recent call last):\n"
        '  File "/opt/torch/distributed/elastic/agent/server/api.py", line 904, in _exit_barrier\n'
        "    barrier_timeout=self._exit_barrier_timeout,\n"
        "RuntimeError: Socket Timeout\n"
    )
    warn = (
        "node-1:925:952 [0] include/socket.h:409 NCCL WARN Net : Connect to 10.0.1.9<54263> "
        "failed : No route to host\n"
    )
    assert _shape({"main-node.log": warn + barrier}) == "hang"


def test_a_person_or_the_clock_ending_a_stuck_job_leaves_it_a_hang() -> None:
    cancelled = "slurmstepd: error: *** JOB 731 ON gpn12 CANCELLED AT 2024-02-19T07:31:05 ***\n"
    assert _shape({"job.err": "Initializing distributed: MEMBER: 1/96\n" + cancelled}) == "hang"
    limit = (
        "slurmstepd: error: *** JOB 873 ON gpu-c14 CANCELLED AT 2024-03-11T04:52:19 DUE TO "
        "TIME LIMIT ***\n"
    )
    # the time limit as the root cause: the scheduler killed a running job
    doc = _triage({"slurm-873.out": "epoch 3 step 9000 loss 1.2\n" + limit})
    assert (doc["triage"]["shape"], doc["triage"]["category"]) == ("crash", "INFRA")
    # a job whose GPU failed hours before the limit hung until the scheduler ended it
    xid = XID.replace("Fri Sep  5 03:51:12 2026", "Mon Mar 11 01:10:42 2024")
    doc = _triage({"dmesg.txt": xid, "slurm-873.out": limit})
    assert (doc["triage"]["shape"], doc["triage"]["category"]) == ("hang", "HARDWARE")


def test_srun_names_the_task_a_kill_ended() -> None:
    out = (
        "slurmstepd-cn07: error: Detected 1 oom-kill event(s) in StepId=58.0. Some of your "
        "processes may have been killed by the cgroup out-of-memory handler.\n"
        "srun: error: cn07: task 3: Out Of Memory\n"
    )
    doc = _triage({"slurm-58.out": out})
    assert (doc["triage"]["shape"], doc["triage"]["category"]) == ("crash", "OOM")
    assert doc["localization"]["culprit_ranks"] == [3]
    assert doc["localization"]["culprit_hosts"] == ["cn07"]


def test_a_caught_exception_or_a_clean_exit_is_not_exit_evidence() -> None:
    retry = (
        "2024-05-01 10:00:03,120 - WARNING - upload failed, retrying in 8 s: "
        "botocore.exceptions.ConnectionError: Connection was closed before we received a "
        "valid response\n"
    )
    assert _shape({"worker-3.log": IB_WARN + retry}) == "hang"
    assert _shape({"worker-3.log": IB_WARN + "helper process exited with code 0\n"}) == "hang"
    failed = (
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 "
        "(pid: 4242) of binary: /usr/bin/python3\n"
    )
    assert _shape({"worker-3.log": IB_WARN + failed}) == "crash"


def test_a_gpu_that_fell_off_the_bus_mid_job_is_a_crash() -> None:
    """Xid 79 is printed by the running driver when a GPU leaves the bus: the processes on it
    lose their device and end, whatever else the upload shows. The same words at probe
    (driver load, no Xid) concern a GPU no job ran on, and an Xid that leaves the GPU in
    place (48, a DBE) stays a hang when nothing after it exits."""
    xid79 = (
        "[Fri Sep 20 21:29:39 2024] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', "
        "name=<unknown>, GPU has fallen off the bus.\n"
    )
    doc = _triage({"dmesg.txt": xid79})
    assert (doc["triage"]["shape"], doc["triage"]["category"]) == ("crash", "HARDWARE")
    assert "fell off the bus" in doc["root_cause"]["decided_by"]
    probe = (
        "[ 1843.308145] NVRM: The NVIDIA GPU 0000:3b:00.0\n"
        "               NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
        "               NVRM: fallen off the bus and is not responding to commands.\n"
        "[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).\n"
    )
    assert _shape({"dmesg.txt": probe}) == "hang"
    assert _shape({"dmesg.txt": XID}) == "hang"


def test_an_nccl_cuda_failure_on_the_main_thread_is_raised_in_the_program() -> None:
    """NCCL returns "Cuda failure" from the call; printed by the main thread (``pid:tid``
    equal) the call was the program's own and the framework raises it: a crash. The same
    line from a background thread (Horovod/TensorFlow call NCCL there) ends nothing by
    itself: the job waits."""
    main = "gpu-a07:4211:4211 [0] enqueue.cc:1085 NCCL WARN Cuda failure 'out of memory'\n"
    doc = _triage({"train.log": "step 10 loss 2.0\n" + main})
    assert (doc["triage"]["shape"], doc["triage"]["category"]) == ("crash", "OOM")
    background = main.replace(":4211:4211 ", ":4211:4390 ")
    assert _shape({"train.log": "step 10 loss 2.0\n" + background}) == "hang"


def test_an_uncorrectable_host_memory_error_ends_the_job_and_is_no_gpu_failure() -> None:
    """A UE on a DIMM: the kernel kills the processes that map the poisoned page or panics,
    so the job on that node ends — a crash, told as a hardware (not GPU) failure."""
    ue = (
        "[11189.970968] EDAC MC2: 1 UE memory read error on CPU_SrcID#0_MC#0_Chan#1_DIMM#0 "
        "(channel:1 slot:0 page:0x1a2b3c offset:0x140 grain:32 -  err_code:0101:0092 "
        "socket:0 imc:0 rank:0 bg:1 ba:0 row:1a1e8 col:180)\n"
    )
    doc = _triage({"dmesg.txt": ue})
    assert (doc["triage"]["shape"], doc["triage"]["category"]) == ("crash", "HARDWARE")
    assert doc["triage"]["summary"].startswith("Hardware failure")
