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


def test_a_time_limit_after_training_finished_is_a_hang_at_exit_not_the_time_limit() -> None:
    done = "[after training is done] datetime: 2026-07-14 14:45:03\n"
    limit = (
        "slurmstepd: error: *** STEP 5317042.2 ON cn-e0117 CANCELLED AT 2026-07-14T14:53:02 "
        "DUE TO TIME LIMIT ***\n"
    )
    steps = "iteration       50/      50 | lm loss: 4.79E-03 |\n"
    doc = _triage({"slurm-5317042.out": steps + done + limit})
    assert (doc["triage"]["shape"], doc["triage"]["category"]) == ("hang", "SOFTWARE")
    assert "finished" in doc["root_cause"]["decided_by"]
    # nothing failed to read a traceback of: the advice is about the hang at exit
    first = doc["recommendations"][0]["text"]
    assert "py-spy" in first and "traceback" not in first
    # the time limit cutting a run still training stays the time limit
    doc = _triage({"slurm-5317042.out": steps + limit})
    assert (doc["triage"]["shape"], doc["triage"]["category"]) == ("crash", "INFRA")


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


MPIRUN_END = (
    "--------------------------------------------------------------------------\n"
    "mpirun noticed that process rank {rank} with PID 0 on node {host} exited on signal "
    "{sig} ({name}).\n"
    "--------------------------------------------------------------------------\n"
)


def test_mpirun_reporting_a_rank_killed_by_signal_9_is_a_crash_of_that_rank() -> None:
    text = "Epoch 1/3\nEpoch 1/3\n" + MPIRUN_END.format(rank=5, host="cn-b02", sig=9, name="Killed")
    doc = _triage({"mpirun.log": text})
    assert (doc["triage"]["shape"], doc["triage"]["category"]) == ("crash", "OOM")
    assert doc["localization"]["culprit_ranks"] == [5]
    assert doc["localization"]["culprit_hosts"] == ["cn-b02"]


def test_a_process_ending_with_no_cause_anywhere_is_an_unexplained_crash_not_none() -> None:
    # another signal than 9: no OOM-killer reading, but never "no failure"
    text = "step 10 loss 2.0\n" + MPIRUN_END.format(
        rank=2, host="cn-b03", sig=15, name="Terminated"
    )
    doc = _triage({"mpirun.log": text})
    assert (doc["triage"]["shape"], doc["triage"]["category"]) == ("crash", "UNKNOWN")
    assert doc["localization"]["culprit_ranks"] == [2]
    doc = _triage(
        {
            "all_reduce_perf.log": "cn-b04: Test NCCL failure common.cu:977 'unhandled system error'\n"
        }
    )
    assert (doc["triage"]["shape"], doc["triage"]["category"]) == ("crash", "UNKNOWN")
    assert doc["localization"]["culprit_ranks"] == []


def test_a_spawned_worker_killed_by_sigkill_is_an_oom_kill_of_that_worker() -> None:
    new = TRACEBACK.format(
        exc="torch.multiprocessing.spawn.ProcessExitedException: process 2 terminated with "
        "signal SIGKILL"
    )
    old = "Epoch: [3][10/90]\tLoss 0.51\nException: process 1 terminated with signal SIGKILL\n"
    for text, rank in ((new, 2), (old, 1)):
        doc = _triage({"train.log": text})
        assert (doc["triage"]["shape"], doc["triage"]["category"]) == ("crash", "OOM")
        assert doc["localization"]["culprit_ranks"] == [rank]


def test_a_sigkilled_worker_is_not_told_to_lower_gpu_memory() -> None:
    # torchrun's agent line alone (no Root Cause block) and a spawned process: the kill is
    # the host's doing, so the advice is to confirm it on the node, not to shrink the batch
    agent = (
        "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 311 closing "
        "signal SIGTERM\n"
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 1 "
        "(pid: 312) of binary: /usr/bin/python\n"
    )
    spawn = TRACEBACK.format(
        exc="torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with "
        "signal SIGKILL"
    )
    for text in (agent, spawn):
        doc = _triage({"train.log": text})
        assert doc["triage"]["category"] == "OOM"
        summary = doc["triage"]["summary"]
        assert "SIGKILL" in summary and "dmesg" in summary
        assert "GPU memory" not in summary
        first = doc["recommendations"][0]["text"]
        assert "dmesg" in first and "micro-batch" not in first


def test_horovod_shutdown_is_an_echo_and_mpirun_names_the_first_rank_that_exited() -> None:
    text = (
        "[1,1]<stderr>:RuntimeError: Horovod has been shut down. This was caused by an "
        "exception on one of the ranks or an attempt to allreduce, allgather or broadcast a "
        "tensor after one of the ranks finished execution.\n"
        "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
        "the job to be terminated. The first process to do so was:\n"
        "\n"
        "  Process name: [[5120,1],3]\n"
        "  Exit code:    1\n"
    )
    doc = _triage({"mpirun.log": text})
    # the shutdown message is rank 1 reacting: not read as rank 1's own software error
    assert (doc["triage"]["shape"], doc["triage"]["category"]) == ("crash", "UNKNOWN")
    assert doc["localization"]["culprit_ranks"] == [3]


DS_LAUNCH = (
    "[2024-03-02 14:05:13,118] [INFO] [launch.py:151:main] nnodes={n}, num_local_procs=4, "
    "node_rank=0\n"
    "[2024-03-02 14:09:31,557] [INFO] [utils.py:793:see_memory_usage] CPU Virtual Memory:  "
    "used = 889.63 GB, percent = 88.3%\n"
    "[2024-03-02 14:10:02,918] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 418327\n"
    "[2024-03-02 14:10:05,377] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python3', "
    "'-u', 'train.py', '--local_rank=2', '--deepspeed', 'ds.json'] exits with return code = -9\n"
)


def test_the_deepspeed_launcher_reporting_return_code_minus_9_is_an_oom_kill() -> None:
    # the launcher names the worker by its local rank: the rank on one node, not on two
    doc = _triage({"train.log": DS_LAUNCH.format(n=1)})
    assert (doc["triage"]["shape"], doc["triage"]["category"]) == ("crash", "OOM")
    assert doc["localization"]["culprit_ranks"] == [2]
    assert "dmesg" in doc["recommendations"][0]["text"]
    doc = _triage({"train.log": DS_LAUNCH.format(n=2)})
    assert (doc["triage"]["shape"], doc["triage"]["category"]) == ("crash", "OOM")
    assert doc["localization"]["culprit_ranks"] == []


def test_an_object_store_client_error_naming_its_endpoint_is_storage() -> None:
    # botocore's connection errors name the endpoint URL, not the service (a MinIO on an IP)
    doc = _triage(
        {
            "train.log": TRACEBACK.format(
                exc="botocore.exceptions.ConnectionClosedError: Connection was closed before we "
                'received a valid response from endpoint URL: "http://10.0.3.17:9000/b/ckpt.pt".'
            )
        }
    )
    assert (doc["triage"]["shape"], doc["triage"]["category"]) == ("crash", "STORAGE_IO")
    assert "exception table" in doc["root_cause"]["decided_by"]


def test_the_oom_killer_wording_of_kernels_before_5_is_a_host_oom_kill() -> None:
    # "Kill process N (name) score S or sacrifice child", global or in a memory cgroup
    for line in (
        "[Thu Aug 16 09:05:19 2018] Memory cgroup out of memory: Kill process 17811 (python3) "
        "score 1001 or sacrifice child\n",
        "[Mon Mar 10 01:33:09 2015] Out of memory: Kill process 4242 (python) score 912 or "
        "sacrifice child\n",
    ):
        doc = _triage({"dmesg.txt": line})
        assert (doc["triage"]["shape"], doc["triage"]["category"]) == ("crash", "OOM")


def test_a_shell_reporting_its_command_killed_is_an_oom_kill() -> None:
    # bash's job report from a batch/entry script: "line N:  PID Killed   <command>"
    text = (
        "read 860000 img\n"
        "/entry.sh: line 159:   943 Killed                  /usr/bin/python3 train.py\n"
    )
    doc = _triage({"container.log": text})
    assert (doc["triage"]["shape"], doc["triage"]["category"]) == ("crash", "OOM")
    assert "dmesg" in doc["recommendations"][0]["text"]


def test_tensorflow_disk_quota_on_a_checkpoint_save_is_storage_not_gpu_memory() -> None:
    # TensorFlow raises ResourceExhaustedError for a full quota too, in lower case
    exc = (
        "tensorflow.python.framework.errors_impl.ResourceExhaustedError: "
        "disk quota exceeded [Op:SaveV2]"
    )
    doc = _triage({"train.log": TRACEBACK.format(exc=exc)})
    assert (doc["triage"]["shape"], doc["triage"]["category"]) == ("crash", "STORAGE_IO")


def test_a_datasets_schema_cast_error_is_data() -> None:
    doc = _triage(
        {
            "train.log": TRACEBACK.format(exc="datasets.table.CastError: Couldn't cast")
            + "text: string\nto\n{'text': Value(dtype='string', id=None)}\n"
            "because column names don't match\n"
        }
    )
    assert (doc["triage"]["shape"], doc["triage"]["category"]) == ("crash", "DATA")


def test_an_exception_whose_module_has_a_digit_is_not_read_as_a_pdsh_host() -> None:
    # tokenizers' Rust panics surface as pyo3_runtime.PanicException
    exc = "pyo3_runtime.PanicException: called `Result::unwrap()` on an `Err` value: Internal"
    doc = _triage({"train.log": TRACEBACK.format(exc=exc)})
    assert doc["triage"]["shape"] == "crash"
    assert "PanicException" in doc["root_cause"]["decided_by"]


def test_a_program_error_that_names_its_rank_blames_that_rank_and_a_plain_one_nobody() -> None:
    ddp = (
        "RuntimeError: Expected to have finished reduction in the prior iteration before "
        "starting a new one. This error indicates that your module has parameters that were "
        "not used in producing loss.\n"
        "Parameter indices which did not receive grad for rank 3: 444 445 446\n"
    )
    doc = _triage({"train.log": TRACEBACK.format(exc="") + ddp})
    assert (doc["triage"]["shape"], doc["triage"]["category"]) == ("crash", "SOFTWARE")
    assert doc["localization"]["culprit_ranks"] == [3]
    assert doc["root_cause"]["decided_by"] == "signature ddp-params-without-grad-on-rank"
    doc = _triage({"train.log": TRACEBACK.format(exc="") + ddp.splitlines()[0] + "\n"})
    assert doc["triage"]["category"] == "SOFTWARE"
    assert doc["localization"]["culprit_ranks"] == []


def test_the_exception_table_reads_the_outermost_exception_of_the_first_traceback() -> None:
    first = TRACEBACK.format(exc="ValueError: bad config key 'lr_sched'")
    second = TRACEBACK.format(exc="KeyError: 'input_ids'")
    # two processes' tracebacks one after the other: the first process's failure decides
    doc = _triage({"train.log": first + second})
    assert doc["root_cause"]["decided_by"].startswith("exception table: ValueError")
    # a chained traceback: its outermost exception decides
    chained = first + "\nThe above exception was the direct cause of the following exception:\n\n"
    doc = _triage({"train.log": chained + second})
    assert doc["root_cause"]["decided_by"].startswith("exception table: KeyError")
    # mp.spawn re-raising a child's traceback: the child's exception decides
    spawned = (
        TRACEBACK.format(exc="torch.multiprocessing.spawn.ProcessRaisedException: ")
        + "\n-- Process 0 terminated with the following error:\n"
        + TRACEBACK.format(exc="AttributeError: Can't pickle local object 'f.<locals>.<lambda>'")
    )
    doc = _triage({"train.log": spawned})
    assert doc["root_cause"]["decided_by"].startswith("exception table: AttributeError")


OVERFLOW_AT_FLOOR = (
    "[INFO] [stage2.py:1628:step] [deepscale] OVERFLOW! Rank 0 Skipping step. "
    "Attempted loss scale: 1, reducing to 1 (step {i})\n"
)


def test_a_repeated_message_is_cited_at_its_real_last_occurrence() -> None:
    text = "".join(OVERFLOW_AT_FLOOR.format(i=i) for i in range(40))
    doc = _triage({"train.log": text})
    assert doc["root_cause"]["decided_by"] == "signature loss-scale-at-floor"
    last = [c for c in doc["root_cause"]["chain"] if "(last occurrence)" in c["event"]]
    assert last and last[0]["evidence"][0]["line"] == 40


def test_many_lines_of_one_catalogued_message_do_not_hide_another() -> None:
    bar = "Running tokenizer on dataset (num_proc=8):  {p}%|#   | {p}00/10000 [00:01<00:09]\n"
    text = "".join(bar.format(p=p) for p in range(1, 60)) + OVERFLOW_AT_FLOOR.format(i=1) * 3
    doc = _triage({"train.log": text})
    assert doc["triage"]["category"] == "NUMERICAL", doc["root_cause"]


def test_a_sigbus_on_every_rank_is_shared_memory_and_not_the_rank_mpirun_names() -> None:
    lines = []
    for r in range(4):
        lines += [
            f"[1,{r}]<stderr>:[c0ffee12:0010{r}] *** Process received signal ***",
            f"[1,{r}]<stderr>:[c0ffee12:0010{r}] Signal: Bus error (7)",
            f"[1,{r}]<stderr>:[c0ffee12:0010{r}] Signal code: Non-existant physical address (2)",
        ]
    lines.append(
        "mpirun noticed that process rank 2 with PID 0 on node c0ffee12 exited on signal 7 (Bus error)."
    )
    doc = _triage({"run.log": "\n".join(lines) + "\n"})
    assert (doc["triage"]["shape"], doc["triage"]["category"]) == ("crash", "DATA")
    assert doc["localization"]["culprit_ranks"] == []


XID79 = "[74889.644138] NVRM: Xid (PCI:0000:02:00): 79, GPU has fallen off the bus.\n"


def _immediate(doc: dict[str, Any]) -> str:
    return next(r["text"] for r in doc["recommendations"] if r["kind"] == "immediate")


def test_the_first_action_names_the_node_it_means_or_says_which_one_to_look_for() -> None:
    doc = _triage({"dmesg.txt": XID79})
    assert doc["triage"]["category"] == "HARDWARE"
    assert _immediate(doc).startswith("Drain the node whose logs show it,")
    doc = _triage({"kern.log": "Mar  2 14:10:05 node-a07 kernel: " + XID79})
    hosts = doc["localization"]["culprit_hosts"]
    assert hosts and _immediate(doc).startswith(f"Drain {hosts[0]},")
    assert "named" not in _immediate(doc)


def test_a_generic_first_action_says_which_rank_and_nodes_it_means() -> None:
    from rankscope.analyzers.advice import _RECS, _targets
    from rankscope.analyzers.verdict import Verdict

    def first(category: str, v: Verdict) -> str:
        text = next(t for k, t in _RECS[category] if k == "immediate")
        return text.format_map(_targets(v))

    one = Verdict(shape="hang", category="DATA", culprit_ranks=[153], culprit_hosts=["node-19"])
    assert first("DATA", one).startswith("Inspect rank 153's data shard and storage reads;")
    assert "across node-19 and a healthy node" in first("NETWORK", one)
    two = Verdict(culprit_ranks=[3, 4])
    # several ranks: the generic words stay rather than a list that reads wrong
    assert first("DATA", two).startswith("Inspect the straggler rank's data shard")
    assert first("SOFTWARE", two).startswith("Read the first error's traceback on ranks 3, 4;")


def test_a_healthy_run_keeps_no_category_from_a_warning_that_would_start_a_chain() -> None:
    text = (
        "[2024-05-01 10:00:00,000] [INFO] [rank0] starting training\n"
        "[W501 10:00:01.123456 socket.cpp:697] [c10d] The client socket has failed to connect "
        "to [master-0]:29500 (errno: 22 - host not found: Name or service not known).\n"
        "[2024-05-01 10:00:10,000] [INFO] [rank0] rendezvous complete, world size 8\n"
        "[2024-05-01 10:10:20,000] [INFO] [rank0] step 1000 loss 1.02\n"
        "[2024-05-01 10:10:30,000] [INFO] [rank0] Training completed. Saving final model.\n"
    )
    doc = _triage({"train.log": text})
    assert (doc["triage"]["shape"], doc["triage"]["category"]) == ("none", "UNKNOWN")
    assert not doc["root_cause"].get("chain")
    assert "chain_trigger" not in doc["root_cause"]
