"""The signature catalogue: every known one-line message, declared once, as data.

A signature says how to find a message (``prefilter``: literals/regexes compiled into the
block prefilter — Hyperscan, the ``re`` fallback and the ripgrep pattern file alike),
how to read it (``regex``: named groups become event fields), what it means, the
category and shape it points at, how bad it is, what to do, and lines from the
public-failure corpus it was written from (``examples``; a test runs every signature on
them and fails on a signature none of its examples fire, or on a prefilter pattern that
nominates none of them).

A line matched by a signature becomes an event of kind ``signature`` with
``fields["sig"]`` = the signature's id; the failures analyzer takes category and
strength from here, the verdict the shape hint. The prefilter's match id names the
signature, so a candidate line costs one regex of its own, not a cascade.

Messages that carry state across lines or ranks (the NCCL watchdog family, flight
recorder, torchrun summaries, SLURM cancellations, Xid, retries) are read by the
structural readers in ``parsers/classify.py``; their prefilter is ``patterns.STRUCTURAL``.
A signature wins over a structural reader's *generic* reading of the same line
(a bare Python exception, a CUDA error without a known cause, an NCCL WARN) and never
over a specific one.

Adding a wording: append a ``Signature`` (or a ``prefilter`` alternative and widen
``regex``) with an example line copied from a corpus case; run
``pytest tests/analysis/engine/test_signatures.py``. Prefilter syntax rules are those of
``patterns.py`` (no anchors, no case-insensitive flag, Hyperscan/re/ripgrep syntax).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ._lazy import lazy_compile


@dataclass(frozen=True)
class Signature:
    id: str
    prefilter: tuple[str, ...]
    regex: str
    meaning: str
    category: str | None  # None: a symptom — a failure happened, its cause is elsewhere
    # crash|hang|diverge|slow when the line itself establishes it (a raised exception, a
    # kill); None: the lines after it decide (verdict.exit_evidence: crash or hang)
    shape: str | None
    severity: str  # fatal | error | warning
    action: str
    examples: tuple[str, ...]
    strength: float = 0.8  # how specific the line is about the root cause
    # the cause is a limit or setting every rank shares (the container's /dev/shm, a build):
    # the rank whose output shows the line is not a culprit of its own
    shared: bool = False
    # a failure in the logging process's own setup (its provider, device or verbs library)
    # or its own values (autograd's anomaly check on the local graph), not on a link to a
    # peer: the ranks that log it are the culprits when not every rank does
    local: bool = False
    rx: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rx", lazy_compile(self.regex))


S = Signature
_ENOMEM_HINT = "Raise the memory limit or lower the batch size / workers; confirm the peak."

CATALOGUE: tuple[Signature, ...] = (
    # --- OOM -----------------------------------------------------------------------
    S(
        "cuda-alloc-exceeds-allowed-memory",
        (r"would exceed allowed memory\. \(out of memory\)",),
        r"Allocation on device (?P<gpu>\d+) would exceed allowed memory\. \(out of memory\)",
        "PyTorch's CUDA allocator refused an allocation above the process's limit (the device, "
        "or the fraction set with set_per_process_memory_fraction): CUDA out of memory.",
        "OOM",
        "crash",
        "fatal",
        "Lower the batch (or, in a server, the batch token limits its warm-up runs), or raise the "
        "memory fraction; check for other processes on the GPU.",
        (
            "thread 'main' panicked at 'Unable to warmup model: Generation(\"Allocation on device 0 would exceed allowed memory. (out of memory)\\nCurrently allocated     : 16.08 GiB\\nRequested               : 4.83 GiB\\nDevice limit            : 22.20 GiB\\nFree (according to CUDA): 11.12 MiB\\nPyTorch limit (set by user-supplied memory fraction)\\n                        : 22.20 GiB\")', router/src/main.rs:216:18",
        ),
        0.9,
    ),
    S(
        "vllm-no-kv-cache-memory",
        (r"No available memory for the cache blocks",),
        r"No available memory for the cache blocks",
        "vLLM found no GPU memory left for the KV cache after the weights and the profiled "
        "activation peak, within its gpu_memory_utilization budget: the engine will not start.",
        "OOM",
        "crash",
        "fatal",
        "Raise gpu_memory_utilization (memory other processes hold on the GPU counts against it "
        "since vLLM 0.6.4), lower max_model_len or max_num_seqs, or shard the model over more GPUs.",
        (
            "vllm-1  | ERROR 10-06 18:07:28 engine.py:366] ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
        ),
        0.85,
    ),
    S(
        "dataloader-worker-killed",
        (r"is killed by signal: Killed",),
        r"DataLoader worker \(pid (?P<pid>\d+)\) is killed by signal: Killed",
        "A DataLoader worker was killed with SIGKILL — by the kernel's OOM killer nearly always: "
        "host RAM ran out (the workers, the batches they prefetch and what each sample holds, or a leak).",
        "OOM",
        "crash",
        "error",
        "Look for the oom-kill in the kernel log (or sacct's MaxRSS); lower num_workers and "
        "prefetch_factor, or the memory each sample holds; look for a leak if RSS grows.",
        ("RuntimeError: DataLoader worker (pid 5271) is killed by signal: Killed. ",),
        0.75,
    ),
    S(
        "srun-task-out-of-memory",
        (r"srun: error: [^ \n]+: tasks? [0-9,-]+: Out Of Memory",),
        r"srun: error: (?P<host>[\w.-]+): tasks? (?P<rank>\d+)[0-9,-]*: Out Of Memory",
        "SLURM's memory enforcement (the step's cgroup) killed the task: it used more host "
        "memory than the job asked for.",
        "OOM",
        "crash",
        "fatal",
        "`sacct -j <job> -o MaxRSS,ReqMem`: raise --mem (or --mem-per-cpu), or lower the "
        "memory the task holds (DataLoader workers, dataset in RAM).",
        ("srun: error: gpu017: task 0: Out Of Memory",),
        0.85,
    ),
    S(
        "cxx-bad-alloc",
        (r"instance of 'std::bad_alloc'",),
        r"std::bad_alloc",
        "C++ code (a framework's runtime, a tokenizer, a data loader's extension) could not "
        "allocate host memory: std::bad_alloc ends the process.",
        "OOM",
        "crash",
        "fatal",
        "Check the host's memory at the time (dmesg, sacct MaxRSS, the container's limit); lower "
        "what the process holds in RAM (workers, caches, a dataset loaded whole).",
        ("terminate called after throwing an instance of 'std::bad_alloc'",),
        0.75,
    ),
    S(
        "k8s-oomkilled",
        (r"[Rr]eason: +OOMKilled",),
        r"[Rr]eason: +OOMKilled",
        "Kubernetes killed the container for using more memory than its limit (OOMKilled, exit "
        "code 137).",
        "OOM",
        "crash",
        "fatal",
        "Raise the container's memory limit (and request), or lower what the process holds in "
        "RAM (workers, object store, caches).",
        ("reason: OOMKilled",),
        0.85,
    ),
    S(
        "tf-oom-allocating-tensor",
        (r"OOM when allocating tensor",),
        r"OOM when allocating tensor with shape\[?(?P<shape>[^\]\s]*)\]?.*?(?:on (?P<device>\S+))?",
        "TensorFlow could not allocate a tensor on the device (ResourceExhaustedError).",
        "OOM",
        "crash",
        "fatal",
        "Lower the per-device batch size or sequence length; check allow_growth/other processes on the GPU.",
        (
            "ResourceExhaustedError: OOM when allocating tensor with shape[16,12,512,512] and type float on /job:localhost/replica:0/task:0/device:GPU:2 by allocator GPU_2_bfc",
        ),
        0.95,
    ),
    S(
        "tf-bfc-ran-out",
        (r"Ran out of memory trying to allocate", r"_bfc\) ran out of memory trying to allocate"),
        r"[Rr]an out of memory trying to allocate (?P<size>[\d.]+ ?\w+)",
        "TensorFlow's (or XLA's, under JAX) BFC allocator ran out of device memory.",
        "OOM",
        "crash",
        "error",
        "Lower the batch size; look for a leak if usage grows over steps.",
        (
            "W tensorflow/core/common_runtime/bfc_allocator.cc:275] Ran out of memory trying to allocate 39.81MiB.  See logs for memory state.",
            "2025-06-17 12:33:53.958194: W external/xla/xla/tsl/framework/bfc_allocator.cc:501] Allocator (GPU_2_bfc) ran out of memory trying to allocate 91.27GiB (rounded to 98000028160)requested by op ",
        ),
        0.9,
    ),
    S(
        "mps-backend-oom",
        (r"MPS backend out of memory",),
        r"MPS backend out of memory \(MPS allocated: (?P<allocated>[\d.]+ ?\w+), other allocations: "
        r"(?P<other>[\d.]+ ?\w+), max allowed: (?P<max>[\d.]+ ?\w+)\)",
        "PyTorch's MPS backend (Apple-silicon GPU) refused an allocation above its memory limit "
        "(the high-watermark share of the unified memory).",
        "OOM",
        "crash",
        "fatal",
        "Lower the batch size or model size; PYTORCH_MPS_HIGH_WATERMARK_RATIO raises the limit at "
        "the risk of the whole machine running out of memory.",
        (
            "RuntimeError: MPS backend out of memory (MPS allocated: 7.23 GB, other allocations: 1.54 GB, max allowed: 9.07 GB). Tried to allocate 896.00 MB on private pool. Use PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 to disable upper limit for memory allocations (may cause system failure).",
        ),
        0.95,
    ),
    S(
        "paddle-gpu-oom",
        (r"Out of memory error on GPU [0-9]+\. Cannot allocate ",),
        r"Out of memory error on GPU (?P<gpu>\d+)\. Cannot allocate (?P<size>[\d.]+ ?\w+) memory",
        "PaddlePaddle's GPU allocator could not place an allocation: the device is full (the "
        "message's ResourceExhaustedError header is not always printed with it).",
        "OOM",
        "crash",
        "fatal",
        "Lower the batch size (or input size); check for other processes on that GPU; "
        "FLAGS_allocator_strategy=auto_growth avoids reserving the memory up front.",
        (
            "Out of memory error on GPU 0. Cannot allocate 18.062744MB memory on GPU 0, available memory is only 17.537501MB.",
        ),
        0.95,
    ),
    S(
        "cuda-driver-oom",
        (
            r"CUDA_ERROR_OUT_OF_MEMORY",
            r"Cuda failure 'out of memory'",
            r"CUDA Error: out of memory at ",
            r"CUresult error: 2 \(out of memory\)",
        ),
        r"CUDA_ERROR_OUT_OF_MEMORY|Cuda failure 'out of memory'|CUDA Error: out of memory at \S+"
        r"|CUresult error: 2 \(out of memory\)",
        "The CUDA driver refused a device allocation: the GPU is full (often two processes on one "
        "device; under vLLM's sleep mode, wake_up mapping the sleeping memory back).",
        "OOM",
        None,
        "fatal",
        "Check that each process uses its own GPU (CUDA_VISIBLE_DEVICES / local rank) and lower memory use.",
        (
            "E tensorflow/stream_executor/cuda/cuda_driver.cc:806] failed to allocate 512.00M (536870912 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
            "c231n07:162057:167199 [0] init.cu:218 WARN Cuda failure 'out of memory'",
            "(ActorModelRayActor pid=291734) RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62",
            "[torch_memory_saver.cpp] CUresult error: 2 (out of memory) file=csrc/utils.h func=cu_mem_create line=187",
        ),
        0.95,
    ),
    S(
        "cublas-alloc-failed",
        (r"CUBLAS_STATUS_ALLOC_FAILED",),
        r"CUBLAS_STATUS_ALLOC_FAILED(?: when calling `(?P<call>[^`]+)`)?",
        "cuBLAS could not allocate its workspace on the device (at handle creation, the first "
        "matmul): the GPU had no memory left — often another process, or another rank placed "
        "on the same device.",
        "OOM",
        None,
        "fatal",
        "Free the device (nvidia-smi: other processes, a second rank on the same GPU) or lower "
        "memory use; check that each rank uses its own GPU.",
        (
            "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        ),
        0.85,
    ),
    S(
        "xla-resource-exhausted",
        (r"RESOURCE_EXHAUSTED: ", r"Resource exhausted: "),
        # not a file path: TensorFlow's file layer reports a full disk or quota the same way
        r"(?:RESOURCE_EXHAUSTED|Resource exhausted): (?!/|[a-z][a-z0-9+.-]*://)(?P<what>.*)",
        "XLA/TensorFlow ran out of accelerator memory (HBM).",
        "OOM",
        "crash",
        "fatal",
        "Lower the per-core batch size or shard the model further.",
        (
            "2021-10-18 02:48:58 10.0.7.33 [3]   (1) Resource exhausted: Attempting to allocate 180.59M. That was not possible. There are 142.58M free.; (0x3x0_HBM1)",
            "2023-03-17 00:27:49.642380: E tensorflow/compiler/xla/xla_client/xla_util.cc:88]   (1) RESOURCE_EXHAUSTED: Attempting to reserve 6.48G at the bottom of memory. That was not possible. There are 6.78G free, 0B reserved, and 3.33G reservable.",
        ),
        0.9,
    ),
    S(
        "cpu-allocator-enomem",
        (r"CPUAllocator: can't allocate memory",),
        r"can't allocate memory: you tried to allocate (?P<bytes>\d+) bytes",
        "Host (CPU) memory allocation failed in PyTorch.",
        "OOM",
        "crash",
        "fatal",
        _ENOMEM_HINT,
        (
            "RuntimeError: [enforce fail at CPUAllocator.cpp:64] . DefaultCPUAllocator: can't allocate memory: you tried to allocate 402653184 bytes. Error code 12 (Cannot allocate memory).",
        ),
        0.9,
    ),
    S(
        "slurm-memory-limit",
        (r"exceeded memory limit \(", r"Exceeded step memory limit", r"oom_kill event"),
        r"(?:Job|task|StepId=?)? ?(?P<id>[\w.]+)? ?exceeded memory limit|Exceeded step memory limit|Detected (?P<n>\d+) oom_kill event",
        "SLURM's cgroup killed tasks that went over the job's memory limit.",
        "OOM",
        "crash",
        "fatal",
        "Confirm with `sacct -j <job> -o MaxRSS,ReqMem`; ask for more memory (--mem) or use less.",
        (
            "slurmstepd: error: Job 4471 exceeded memory limit (626359956 > 512000000), being killed",
            "slurmstepd: Exceeded step memory limit at some point.",
            "slurmstepd: error: Detected 1 oom_kill event in StepId=20417735.batch. Some of the step tasks have been OOM Killed.",
        ),
        0.85,
    ),
    S(
        "container-memory-limit-kill",
        (r"killed by docker due to it exceeded the request memory",),
        r"exceeded the request memory",
        "The container runtime killed the task's container for going over its memory limit "
        "(a cgroup out-of-memory kill, exit code 137).",
        "OOM",
        "crash",
        "fatal",
        "Raise the task's memory request/limit or lower its host-memory use (fewer loader "
        "workers, smaller buffers); the pod's `kubectl describe` shows the limit it hit.",
        ("Exit Reason: User Container killed by docker due to it exceeded the request memory",),
        0.9,
    ),
    S(
        "ray-memory-monitor-kill",
        (
            r"killed due to memory pressure \(OOM\)",
            r"Task was killed due to the node running low on memory",
        ),
        r"(?:\d+ Workers \(tasks / ?actors\) )?"
        r"killed due to memory pressure \(OOM\), \d+ Workers crashed due to other reasons at ?"
        r"node \(ID: \w+, IP: (?P<host>[\d.]+)\)"
        r"|(?:Worker exit detail: |OutOfMemoryError: )Task was killed due to the node running "
        r"low on memory",
        "Ray's memory monitor killed workers (tasks or actors) because the node's host memory "
        "went over its usage threshold: Ray's own out-of-memory killer, before the kernel's.",
        "OOM",
        "crash",
        "fatal",
        "Lower host-memory use on that node (rollout buffers, offloaded states, data-loader "
        "workers) or give it more memory; `ray logs raylet.out -ip <node>` names the workers "
        "killed and the top memory users.",
        (
            "(raylet) [2025-02-19 15:02:00,117 E 135782 135782] (raylet) node_manager.cc:3069: 1 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: 8c1f27e40b9d35a6e0f4d1c3b2a79e5f6d08c4b1a3e2f79d5c6b0a1e, IP: 10.95.0.76) over the last time period. To see more information about the Workers killed on this node, use `ray logs raylet.out -ip 10.95.0.76`",
            "The actor is dead because its worker process has died. Worker exit type: USER_ERROR Worker exit detail: Task was killed due to the node running low on memory.",
            "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
        ),
        0.9,
    ),
    # --- NUMERICAL -----------------------------------------------------------------
    S(
        "loss-scale-minimum",
        (
            r"loss scale already at minimum",
            r"Minimum loss scale reached",
        ),
        r"loss scale already at minimum|Minimum loss scale reached(?: \((?P<scale>[\d.e-]+)\))?",
        "Dynamic loss scaling cannot go lower: gradients overflow at every step (the loss diverged).",
        "NUMERICAL",
        "diverge",
        "fatal",
        "Lower the learning rate, add gradient clipping, or train in bf16; resume from a checkpoint before the overflows began.",
        (
            "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
            "FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding. Try lowering the learning rate, using gradient clipping or increasing the batch size.",
        ),
        0.95,
    ),
    S(
        "loss-scale-at-floor",
        (r"Attempted loss scale: (?:1(?:\.0)?|0(?:\.\d*)?|\d(?:\.\d+)?e-\d+), reducing to",),
        r"Attempted loss scale: (?:1(?:\.0)?|0(?:\.\d*)?|\d(?:\.\d+)?e-\d+), reducing to (?P<scale>[\d.e-]+)",
        "DeepSpeed's dynamic loss scale is at or below its floor (1, or 0 with min_loss_scale "
        "unset) and the step still overflows: every step is skipped and the model no longer "
        "trains (releases that do not abort keep going).",
        "NUMERICAL",
        "diverge",
        "error",
        "Train in bf16 (or fp32) if the model overflows fp16, else lower the learning rate or "
        "clip gradients; resume from a checkpoint before the overflows began.",
        (
            "  0%|▋                                                                                                                                                                | 121/24128 [00:49<2:40:02,  2.51it/s][2024-11-27 00:37:04,448] [INFO] [stage2.py:1628:step] [deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, reducing to 1",
            "1654049189272 localhost info [2022-06-01 02:06:29,272] [INFO] [stage2.py:1357:step] [deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 0.0, reducing to 0.0",
        ),
        0.85,
    ),
    S(
        "loss-scale-collapsed",
        (
            r"reducing loss scale to [0-9.]+e-[0-9]",
            r"reducing loss scale to 0\.0*[1-9]",
            r"setting loss scale to: 0\.000",
            r"Fp16 Grad Scale: +0 ",
        ),
        r"loss scale to:? (?P<scale>[0-9.e-]+)|Grad Scale: +(?P<zero>0) ",
        "The fp16 loss scale collapsed far below 1: every step overflows (the loss diverged).",
        "NUMERICAL",
        "diverge",
        "error",
        "Look for the first NaN/overflow step; lower the LR, clip gradients or use bf16.",
        (
            "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 0.5",
            "Gradient overflow. Skipping step, loss scaler 0 reducing loss scale to 8.165126103939127e-202",
            "| WARNING: overflow detected, setting loss scale to: 0.0001220703125",
            "Training: 2024-02-12 09:08:52,689-Speed 2177.01 samples/sec   Loss nan   LearningRate 0.001000   Epoch: 0   Global Step: 40   Fp16 Grad Scale:  0   Required: 120 hours",
        ),
        0.85,
    ),
    S(
        "local-grad-norm-nan",
        (r"found NaN in local grad norm",),
        r"Rank (?P<rank>\d+)\b(?=.*?found NaN in local grad norm)(?:.*?\bnode:? (?P<host>[\w.-]*\w))?",
        "A rank's own gradient norm was NaN before the data-parallel reduction (Megatron's "
        "check): the fault is local to that rank (its data, or its GPU).",
        "NUMERICAL",
        "diverge",
        "fatal",
        "Rerun the step on that rank's batch; if it reproduces only on that GPU, test the GPU "
        "(dcgmi diag); otherwise inspect the batch.",
        (
            "AssertionError: Rank 11: found NaN in local grad norm in backward pass before data-parallel communication collective. Device: 3",
            "AssertionError: Rank 3: found NaN in local grad norm in backwards pass. Device: 3, node: ai-zw07-kubernetes-pc218.mt",
        ),
        0.95,
    ),
    S(
        "grad-norm-nonfinite",
        (
            "grad[_ ]norm[\"']?:? *[\"']?(?:nan|inf|NaN|Inf)\\b",
            r"[Gg]rad norm is (?:nan|inf)\b",
            r"nan/inf/spiky gradient",
        ),
        "grad[_ ]norm(?: is|[\"']?:?) *[\"']?(?P<v>nan|inf|NaN|Inf)\\b|nan/inf/spiky gradient",
        "The gradient norm is NaN/Inf: the step's gradients are not finite.",
        "NUMERICAL",
        "diverge",
        "error",
        "Find the first step with a non-finite grad norm; check the data of that step, the LR and fp16 scaling.",
        (
            " iteration     5424/  250000 | consumed samples:        43392 | consumed tokens:     88866816 | elapsed time per iteration (ms): 4251.3 | learning rate: 2.999E-04 | global batch size:     8 | loss scale: 1.0 | grad norm: nan | actual seqlen:  2048 | number of skipped iterations:   0 | number of nan iterations:   0 | samples per second: 1.881 | TFLOPs: 78.29 |",
            "Training:  78%|███████▊  | 1556/2000 [6:15:28<1:55:17, 15.58s/step]2026-07-18 06:19:20,889 - trainers.dit_trainer - WARNING - Step 1557: detected nan/inf/spiky gradient (norm=2.1966569423675537); skipping optimizer step.",
            "{'loss': 153318.95, 'grad_norm': nan, 'learning_rate': 0.0002, 'epoch': 0.09}",
            "[asr-gpu03] 2021-04-23 19:22:52,420 (trainer:581) WARNING: The grad norm is nan. Skipping updating the model.",
            "[2025-10-29 23:59:01,773][root][WARNING] - The grad norm is nan. Skipping updating the model.",
        ),
        0.85,
    ),
    S(
        "loss-nonfinite-words",
        (
            r"'loss': (?:nan|inf)",
            r"Loss is (?:Infinity|NaN|nan|inf)",
            r"[Ll]oss(?:_[a-z]+)? +(?:nan|NaN|inf)\b",
            r"Loss became infinite or NaN",
            r"[Ll]oss was (?:NaN|nan|inf|Inf)",
            r" : Cost (?:nan|inf|-inf) : ",
            r"\[Loss\] (?:nan|inf|NaN)\b",
        ),
        r"(?P<metric>'loss'|Loss is|[Ll]oss(?:_[a-z]+)?|Loss became infinite or NaN"
        r"|Cost(?= (?:nan|-?inf) : )|\[Loss\](?= (?:nan|inf|NaN)\b))",
        "The loss produced NaN/Inf.",
        "NUMERICAL",
        "diverge",
        "error",
        "Find the first non-finite step; check inputs of that batch, the LR schedule and mixed precision.",
        (
            "{'loss': nan, 'lr': 0.0002, 'epoch': 0.09}",
            "2018-07-15 16:11:46 INFO  DistriOptimizer$:295 - [Epoch 64 740096/1281167][Iteration 45459][Wall Clock 197340.717246379s] Train 1792 in 4.006890034seconds. Throughput is 447.22968 records/second. Loss is Infinity. Current learning rate is 0.046281366472703075. Current weight decay is 1.0E-4. Current momentum is 0.9.",
            "FloatingPointError: Loss became infinite or NaN at iteration=0!",
            "Iter 100 | lr 1.00E-03 | loss_tot nan | loss_sla 60213.42 | loss_da 16.607977 | loss_entry 0.0 | loss_exit 0.0 | l1 0.56 | ce 60212.85 | wd_loss: 69.24",
            "RuntimeError: Loss was NaN for 1 times in a row. Stopped training.",
            "[2020-07-22 20:22:42] Ep. 1 : Up. 300 : Sen. 137,255 : Cost nan : Time 17.18s : nan words/s : gNorm 41172.8250",
            "2023-03-08 01:03:05.674 | INFO     | trainers.base_trainer:train_epochs:256 - [R0] | E104 iter[ 14/ 15] | [Loss] nan | [exp] ./exp/0308/car/3dbf3ah_hvae_lion_B40 | [step]  1574 | [url] none | [time] 0.4m (~4h) |[best] 0 -100.000x1e-2 ",
        ),
        0.9,
    ),
    S(
        "distribution-parameter-invalid",
        (r"to satisfy the constraint [A-Za-z]+\(.*\), but found invalid values",),
        r"Expected parameter (?P<param>\w+) .*? of distribution (?P<dist>\w+)\(.* to satisfy the "
        r"constraint (?P<constraint>[A-Za-z]+)\(.*\), but found invalid values",
        "torch.distributions refused a parameter outside its support — nearly always NaN "
        "produced by the network upstream (the printed tensor shows it): the model diverged.",
        "NUMERICAL",
        "diverge",
        "error",
        "Find the first step where the network's outputs turn NaN; lower the LR, clip gradients, "
        "bound the scale (softplus + epsilon) and check that batch's inputs.",
        (
            "ValueError: Expected parameter loc (Tensor of shape (128, 10)) of distribution Normal(loc: torch.Size([128, 10]), scale: torch.Size([128, 10])) to satisfy the constraint Real(), but found invalid values:",
        ),
        0.8,
    ),
    S(
        "anomaly-backward-nonfinite",
        (r"returned nan values in its",),
        r"Function '(?P<fn>\w+)' returned nan values in its",
        "Under autograd anomaly detection a backward function of this process's own graph "
        "produced NaN/Inf (before any gradient reduction).",
        "NUMERICAL",
        "diverge",
        "error",
        "Find the first non-finite step; check inputs of that batch, the LR schedule and mixed precision.",
        (
            "RuntimeError: Function 'LogSoftmaxBackward' returned nan values in its 0th output. ",
            "[rank6]: RuntimeError: Function 'Log1PBackward0' returned nan values in its 0th output.",
        ),
        0.9,
        local=True,
    ),
    # --- DATA ----------------------------------------------------------------------
    S(
        "dataloader-shm-bus-error",
        (
            r"bus error encountered in worker",
            r"is killed by signal: Bus error",
            r"unable to write to file </torch_",
        ),
        r"bus error encountered in worker|DataLoader worker \(pid (?P<pid>\d+)\) is killed by "
        r"signal: Bus error|unable to write to file </torch_[\d_]+>(?:: (?P<why>.*))?",
        "A DataLoader worker crashed writing to shared memory: /dev/shm is too small (containers "
        "default to 64 MB). A shared tensor file that cannot be written ('unable to write to file "
        "</torch_…>', even with 'No space left on device') is the same full /dev/shm, not a disk.",
        "DATA",
        "crash",
        "fatal",
        "Give the container more shared memory (--shm-size / an emptyDir of medium Memory) or lower num_workers.",
        (
            "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
            "RuntimeError: DataLoader worker (pid 731) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory. Please try to raise your shared memory limit.",
            "RuntimeError: unable to write to file </torch_741_144252761_4>: No space left on device (28)",
        ),
        0.9,
        shared=True,
    ),
    S(
        "sigbus-no-backing-page",
        (r"Signal: Bus error \(7\)", r"Signal code: Non-exist[ae]nt physical address"),
        r"Signal: Bus error \((?P<signal>7)\)|Signal code: Non-exist[ae]nt physical address",
        "A process died of SIGBUS touching a mapped page with nothing behind it (Open MPI's "
        "signal handler): in a training job, shared memory that outgrew the container's "
        "/dev/shm — tensors the DataLoader's workers pass, or a shared-memory transport.",
        "DATA",
        "crash",
        "fatal",
        "Give the container more shared memory (--shm-size or --ipc=host) or lower the "
        "DataLoader's num_workers; the rank mpirun names is only the first it saw end.",
        (
            "[1,2]<stderr>:[3f9c1e27ab40:00144] Signal: Bus error (7)",
            "[1,2]<stderr>:[3f9c1e27ab40:00144] Signal code: Non-existant physical address (2)",
        ),
        0.6,
        shared=True,
    ),
    S(
        "dataloader-worker-timeout",
        (r"Worker timed out after [0-9]+ seconds",),
        r"Worker timed out after (?P<s>\d+) seconds",
        "A data-loading worker produced nothing within its timeout.",
        "DATA",
        "crash",
        "error",
        "Profile the dataset's __getitem__ on the slow sample; raise the timeout only if it is expected.",
        ("Worker timed out after 120 seconds. This might be caused by ",),
        0.8,
    ),
    S(
        "corrupt-image",
        (r"cannot identify image file", r"image file is truncated"),
        r"cannot identify image file|image file is truncated",
        "An image in the dataset is corrupt or truncated.",
        "DATA",
        "crash",
        "error",
        "Find the file named in the traceback, re-fetch or drop it; validate the dataset (or set LOAD_TRUNCATED_IMAGES knowingly).",
        (
            "PIL.UnidentifiedImageError: cannot identify image file <_io.BytesIO object at 0x7fd3aa7f1900>",
            "OSError: image file is truncated (43 bytes not processed)",
        ),
        0.9,
    ),
    S(
        "opencv-empty-image",
        (r"!_?src\.empty\(\) in function",),
        r"\(-215:Assertion failed\) !_?src\.empty\(\) in function '(?P<fn>\w+)'",
        "OpenCV was handed an empty image: cv2.imread returns None for a file it cannot read "
        "(missing, corrupt, or not an image) instead of raising, and the next OpenCV call fails.",
        "DATA",
        "crash",
        "error",
        "Find the file the sample came from (log the path before imread) and re-fetch, convert "
        "or drop it; check the dataset's paths exist.",
        (
            "cv2.error: OpenCV(4.6.0) /io/opencv/modules/imgproc/src/color.cpp:182: error: (-215:Assertion failed) !_src.empty() in function 'cvtColor'",
        ),
        0.85,
    ),
    S(
        "audio-file-undecodable",
        (r"File contains data in an unknown format",),
        r"Error opening (?P<path>'[^']*'|\S+): File contains data in an unknown format",
        "libsndfile (python-soundfile, torchaudio's soundfile backend) could not decode an audio "
        "file of the dataset: it is corrupt, truncated, or in a format it does not read.",
        "DATA",
        "crash",
        "error",
        "Check the file named in the message (size, header, `soxi`/`ffprobe`); re-fetch or drop "
        "it, or convert the dataset to a format libsndfile reads.",
        (
            "soundfile.LibsndfileError: Error opening 'xx/xx/xx.wav': File contains data in an unknown format.",
        ),
        0.85,
    ),
    S(
        "dataset-parse-error",
        (r"ArrowInvalid: ", r"unpack requires a buffer of"),
        r"ArrowInvalid: (?P<what>.*)|unpack requires a buffer of (?P<n>\d+) bytes",
        "A dataset file could not be parsed (malformed JSON/Arrow/binary record).",
        "DATA",
        "crash",
        "error",
        "Find the record/file named in the message and fix the data or its schema.",
        (
            "pyarrow.lib.ArrowInvalid: JSON parse error: Column() changed from object to array in row 0",
            "struct.error: unpack requires a buffer of 4 bytes",
        ),
        0.8,
    ),
    S(
        "collate-uneven-samples",
        (r"stack expects each tensor to be equal size",),
        r"stack expects each tensor to be equal size, but got (?P<a>\[[^\]]*\]) at entry \d+ and (?P<b>\[[^\]]*\])",
        "Samples of one batch have different shapes: the default collate cannot stack them.",
        "DATA",
        "crash",
        "error",
        "Resize/pad samples in the transform, or give the DataLoader a collate_fn that pads.",
        (
            "RuntimeError: stack expects each tensor to be equal size, but got [24, 32, 64] at entry 0 and [24, 64, 32] at entry 1",
        ),
        0.85,
    ),
    S(
        "index-out-of-vocab",
        (
            r"srcIndex < srcSelectDimSize",
            r"\] = -?[0-9]+ is not in \[0, ",
            r"t >= 0 && (?:cur_)?t(?:arget)? < n_classes",
        ),
        r"srcIndex < srcSelectDimSize|\] = (?P<index>-?\d+) is not in \[0, (?P<size>\d+)\)"
        r"|(?P<target>t >= 0 && (?:cur_)?t(?:arget)? < n_classes)",
        "An embedding lookup got an index outside the table: token/label ids exceed the vocabulary.",
        "DATA",
        "crash",
        "fatal",
        "Check the ids the data feeds against the embedding: the tokenizer's vocabulary (added tokens need resize_token_embeddings), a (mock) dataset's id range against the model's vocab_size, and label ids against the class count.",
        (
            "/opt/conda/conda-bld/pytorch_1686274778240/work/aten/src/ATen/native/cuda/Indexing.cu:1146: indexSelectLargeIndex: block: [58,0,0], thread: [24,0,0] Assertion `srcIndex < srcSelectDimSize` failed.",
            "  (0) Invalid argument:  indices[23,617] = -26 is not in [0, 61196)",
            "/pytorch/aten/src/THCUNN/ClassNLLCriterion.cu:105: void cunn_ClassNLLCriterion_updateOutput_kernel(Dtype *, Dtype *, Dtype *, long *, Dtype *, int, int, int, int, long) [with Dtype = float, Acctype = float]: block: [0,0,0], thread: [12,0,0] Assertion `t >= 0 && t < n_classes` failed.",
        ),
        0.8,
    ),
    S(
        "tokenizer-input-not-text",
        (r"TextInputSequence",),
        r"TextEncodeInput must be Union\[TextInputSequence|TextInputSequence must be str",
        "The fast tokenizer was handed something that is not text (a missing value, a number, a "
        "nested list) from a dataset record.",
        "DATA",
        "crash",
        "error",
        "Find the empty or non-string fields in the text columns (NaN/None rows of a CSV or "
        "dataframe) and drop or fill them before tokenizing.",
        (
            "TypeError: TextEncodeInput must be Union[TextInputSequence, Tuple[InputSequence, InputSequence]]",
        ),
        0.8,
    ),
    S(
        "dataset-preprocessing",
        (
            r"Running tokenizer on [^|\n]{0,80}: +[0-9]+%\|",
            r"Grouping texts in chunks of [0-9]+: +[0-9]+%\|",
        ),
        r"(?P<what>Running tokenizer on[^:|]*|Grouping texts in chunks of \d+)[^:|]*: +(?P<pct>\d+)%\|",
        "Dataset preprocessing (tokenization/grouping) in progress on the main process; the other "
        "ranks wait for it in a barrier.",
        "DATA",
        "hang",
        "warning",
        "Preprocess the dataset offline (or cache it) before the distributed run, or raise the "
        "process-group timeout for the first collective.",
        (
            "Running tokenizer on dataset (num_proc=64):  71%|███████   | 2712000/3819612 [29:58<12:14, 1508.11 examples/s]",
            "[default0]:Grouping texts in chunks of 2049:   7%|▋         | 702000/9672101 [02:27<30:41, 4871.44 examples/s]",
        ),
        0.3,  # progress, not an error: decides only a hang nothing else explains
    ),
    # --- HARDWARE ------------------------------------------------------------------
    S(
        "host-memory-multibit-ecc",
        (r"\[Hardware Error\]: +error_type: [0-9]+, multi-bit ECC",),
        r"error_type: (?P<type>\d+), multi-bit ECC",
        "The node's firmware reports a multi-bit (uncorrectable) ECC error in its own memory "
        "(DRAM, through APEI/GHES): what was stored there is lost, and what used it fails.",
        "HARDWARE",
        None,
        "error",
        "Drain the node; have the DIMM the firmware names (ipmitool sel list, the BMC's event "
        "log) tested or replaced.",
        ("Dec  3 09:36:22 kv-srv-207 kernel: {7}[Hardware Error]:   error_type: 3, multi-bit ECC",),
        0.8,
        local=True,
    ),
    S(
        "nvrm-rminitadapter-failed",
        (r"RmInitAdapter failed!",),
        r"RmInitAdapter failed! \((?P<code>[0-9a-fx:]+)\)",
        "The NVIDIA driver could not initialise a GPU: CUDA cannot use the card, and any process "
        "given it fails at start — a failed or unseated card, its power or PCIe link, or a "
        "driver that does not support it.",
        "HARDWARE",
        None,
        "fatal",
        "Drain the node; see whether nvidia-smi lists the GPU, read the kernel log around it for "
        "Xid 79 or PCIe errors, reseat or replace the card, and check the driver supports it.",
        ("[   38.773115] NVRM: RmInitAdapter failed! (0x26:0xffff:1127)",),
        0.7,  # an Xid of the same node names the fault itself
    ),
    S(
        "nvrm-reset-required",
        (r"NV_ERR_RESET_REQUIRED",),
        r"Reset required \[NV_ERR_RESET_REQUIRED\]|NV_ERR_RESET_REQUIRED",
        "The NVIDIA driver refuses work on a GPU it has marked for reset after an "
        "unrecoverable error of the GPU or its GSP firmware: every new channel or allocation "
        "on it fails (CUDA reports the device busy or unavailable) until it is reset.",
        "HARDWARE",
        None,
        "fatal",
        "Drain the node; find the Xid that marked the GPU (154 'GPU Reset Required', 119/120 "
        "GSP, 79, 48/94/95) in the kernel log, reset the GPU or reboot, and replace it if it "
        "comes back.",
        (
            "[Sun Dec 14 09:52:01 2025] NVRM: nvAssertOkFailedNoLog: Assertion failed: Reset required [NV_ERR_RESET_REQUIRED] (0x00000062) returned from status @ kernel_channel.c:2874 ",
        ),
        0.85,
    ),
    S(
        "gpu-unreachable",
        (r"Unable to determine the device handle for GPU",),
        r"device handle for GPU ?(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)?: (?P<what>.*)",
        "nvidia-smi cannot reach a GPU (lost on the bus, or its driver state is broken).",
        "HARDWARE",
        None,
        "fatal",
        "Drain the node; check dmesg for Xid 79 / PCIe AER on that bus id; reseat or replace the GPU.",
        (
            "Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error",
            "Unable to determine the device handle for GPU0000:03:00.0: Unknown Error",
        ),
        0.9,
    ),
    S(
        "openacc-ecc-uncorrectable",
        (
            r"Accelerator Fatal Error: call to [A-Za-z_0-9]+ returned error [0-9]+ \(CUDA_ERROR_ECC_UNCORRECTABLE\)",
        ),
        r"Accelerator Fatal Error: call to (?P<call>\w+) returned error (?P<code>\d+) "
        r"\(CUDA_ERROR_ECC_UNCORRECTABLE\)",
        "The NVHPC OpenACC/OpenMP runtime got an uncorrectable ECC error from the CUDA driver "
        "and aborts the program: the GPU's memory is failing (every job placed on that GPU "
        "fails the same way).",
        "HARDWARE",
        "crash",
        "fatal",
        "Drain the node (or exclude it from the job's node list) and have its GPU checked "
        "(nvidia-smi -q -d ECC, dcgmi diag -r 3); rerun elsewhere.",
        (
            "Accelerator Fatal Error: call to cuCtxCreate returned error 214 (CUDA_ERROR_ECC_UNCORRECTABLE): uncorrectable ECC error encountered",
        ),
        0.95,
    ),
    S(
        "pcie-aer",
        (r"PCIe Bus Error: severity=",),
        r"(?P<port>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d): PCIe Bus Error: severity=(?P<severity>\w+(?: \([\w-]+\))?), type=(?P<type>[^,]+)",
        "The PCIe link reports errors (AER): a failing slot, riser, cable or device.",
        "HARDWARE",
        None,
        "error",
        "Check the AER counters of the port and the device behind it; corrected errors in bursts precede a device dropping off.",
        (
            "[  +0.000005] pcieport 0000:00:03.0: PCIe Bus Error: severity=Corrected, type=Data Link Layer, (Transmitter ID)",
            "[  +0.000004] pcieport 0000:00:03.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)",
        ),
        0.75,
    ),
    S(
        "nvidia-smi-err-reading",
        (r"\|ERR! ", r" ERR! / "),
        r"ERR!",
        "nvidia-smi cannot read a GPU sensor (fan, power): the board or its management controller is failing.",
        "HARDWARE",
        None,
        "error",
        "Drain the node and run the vendor diagnostics (dcgmi diag -r 3 / nvidia-bug-report).",
        ("|ERR!   54C    P2   ERR! / 225W |   6823MiB /  7982MiB |    100%      Default |",),
        0.4,  # one ERR! reading also appears on healthy boards: decides nothing alone
    ),
    S(
        "amdgpu-hardware-error",
        (r"amdgpu [0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]: \{[0-9]+\}\[Hardware Error\]",),
        r"amdgpu (?P<pci>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d): \{\d+\}\[Hardware Error\]: "
        r"(?P<what>.*)",
        "The AMD GPU driver reports hardware errors the GPU's RAS / Accelerator Check "
        "Architecture logged (memory, the xGMI links between GPUs, the compute blocks).",
        "HARDWARE",
        None,
        "error",
        "Drain the node; read the GPU's RAS error counts (amd-smi metric --ecc, rocm-smi "
        "--showrasinfo) and have a GPU or link with growing counts checked by the vendor.",
        (
            "[76914.190122] amdgpu 0000:9d:00.0: {1}[Hardware Error]: aca entry[11].IPID=0x0000605011a09201",
        ),
        0.8,
    ),
    S(
        "amdgpu-gpu-reset",
        (r"amdgpu: GPU reset begin!",),
        r"amdgpu (?P<pci>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d): amdgpu: GPU reset begin!",
        "The AMD GPU driver resets a GPU it found hung or faulted: every process using it loses "
        "its context and dies; the lines before it say what the GPU did.",
        None,
        "crash",
        "fatal",
        "Read the kernel log just before the reset (ring timeout, RAS hardware errors, a page "
        "fault naming the process); a hardware error there means draining the node.",
        ("[76914.214195] amdgpu 0000:dd:00.0: amdgpu: GPU reset begin!",),
        0.3,
    ),
    S(
        "edac-uncorrected-memory",
        (r"EDAC MC[0-9]+: [0-9]+ UE ",),
        r"EDAC (?P<mc>MC\d+): (?P<n>\d+) UE (?P<what>[^(]*)",
        "The host's memory controller reports an uncorrectable (UE) DIMM error: the data is "
        "lost, and the kernel kills the processes that map the poisoned page (SIGBUS) or "
        "panics when it held kernel data — the job on that node ends.",
        "HARDWARE",
        "crash",
        "fatal",
        "Drain the node and have the DIMM named in the message replaced (edac-util / ipmitool sel list).",
        (
            "[11189.970968] EDAC MC3: 1 UE memory read error on CPU_SrcID#1_MC#1_Chan#2_DIMM#0 (channel:2 slot:0 page:0xb757589 offset:0x140 grain:32 -  OVERFLOW err_code:0101:0092 socket:1 imc:1 rank:0 bg:3 ba:0 row:1a1e8 col:180)",
        ),
        0.85,
    ),
    # --- STORAGE_IO ----------------------------------------------------------------
    S(
        "curl-transfer-error",
        (r"Curl returned error code [0-9]+", r"Error \[[0-9]+\]=[^\n]{0,60}in curl operation"),
        r"Curl returned error code (?P<code>\d+)|Error \[(?P<code2>\d+)\]=(?P<what>.*?) in curl operation",
        "An object-store transfer (S3/GCS over curl) failed (28 = timeout, 55/56 = send/receive failure).",
        "STORAGE_IO",
        None,
        "error",
        "Check the object store's health and the node's egress; make the client retry with backoff and a bounded total time.",
        (
            "tensorflow/core/platform/s3/aws_logging.cc:60] Curl returned error code 55",
            "W0000 00:00:1728199763.019816  571309 curl_transport.cc:444] Error [28]=Timeout was reached in curl operation",
        ),
        0.8,
    ),
    S(
        "s3-throttled",
        (r"'Code': 'SlowDown'", r"Please reduce your request rate"),
        r"SlowDown|Please reduce your request rate",
        "The object store throttled the requests (S3 503 SlowDown).",
        "STORAGE_IO",
        None,
        "error",
        "Spread the requests (fewer concurrent readers, jittered starts, more client retries with backoff) or use a less shared bucket/prefix.",
        ("{'Error': {'Code': 'SlowDown', 'Message': 'Please reduce your request rate.'}",),
        0.85,
    ),
    S(
        "hub-read-timeout",
        (r"HTTPSConnectionPool\(host='[^'\n]+', port=[0-9]+\): Read timed out",),
        r"HTTPSConnectionPool\(host='(?P<host>(?:[\w-]+\.)*(?:huggingface\.co|hf\.co|amazonaws\.com"
        r"|googleapis\.com|blob\.core\.windows\.net|modelscope\.cn))', port=\d+\): Read timed out"
        r"(?:\. \(read timeout=(?P<s>[\d.]+)\))?",
        "A download from a model/data hub or object store (Hugging Face Hub, S3, GCS, Azure "
        "Blob) did not answer within the client's read timeout: the remote store was slow or "
        "overloaded (often by every rank of a large job asking at once), not the rank that "
        "printed it.",
        "STORAGE_IO",
        None,
        "error",
        "Fetch models, tokenizers and datasets once before the job (a local cache or path), "
        "or raise the client timeouts (HF_HUB_DOWNLOAD_TIMEOUT / the datasets downloader "
        "timeout) and let only one rank per node download.",
        (
            " 7: [rank80]: urllib3.exceptions.ReadTimeoutError: HTTPSConnectionPool(host='huggingface.co', port=443): Read timed out. (read timeout=10)",
        ),
        0.8,
        shared=True,
    ),
    S(
        "fsspec-timeout",
        (r"FSTimeoutError",),
        r"FSTimeoutError(?:: Caught FSTimeoutError in DataLoader worker process (?P<worker>\d+))?",
        "A remote file system reached through fsspec (S3, GCS, Azure, HTTP) did not answer in "
        "time: the object store, or the connection to it, stalled or dropped a long-lived "
        "stream.",
        "STORAGE_IO",
        "crash",
        "error",
        "Retry with a longer timeout and retries (s3fs/gcsfs config), reopen streams per epoch "
        "rather than holding one for hours, or stage the data on local disk.",
        (
            "fsspec.exceptions.FSTimeoutError: Caught FSTimeoutError in DataLoader worker process 1.",
        ),
        0.8,
        shared=True,
    ),
    S(
        "nfs-stale-file-handle",
        (r"Stale file handle",),
        r"\[Errno 116\]|Stale file handle",
        "A network file system (NFS, Lustre, a NAS or EFS mount) invalidated an open file or "
        "directory handle (ESTALE), usually because another client replaced or deleted the "
        "file: the shared file system failed, not the rank that printed it.",
        "STORAGE_IO",
        None,
        "error",
        "Keep caches, locks and files other nodes rewrite on local disk (or one writer per "
        "file); check the mount's health and options (lookupcache, actimeo); retry the access.",
        (
            "[rank1]: OSError: [Errno 116] Stale file handle: '/mnt/shared/modelscope_cache/datasets/train/cache-8f2a61c0d4e7b913.arrow'",
            "OSError: [Errno 116] Unable to synchronously create file (unable to fstat file, errno = 116, error message = 'Stale file handle')",
        ),
        0.85,
        shared=True,
    ),
    S(
        "tensorstore-file-lock-refused",
        (r"Failed to acquire lock on file",),
        r"Failed to acquire lock on file: (?P<path>\S+) \[OS error: (?P<oserr>[^\]]+)\]",
        "TensorStore (the checkpoint writer under T5X, Orbax and JAX) could not lock a file it "
        "writes: the file system refuses or does not implement the POSIX lock it takes (some "
        "GPFS, NFS, Lustre or FUSE mounts).",
        "STORAGE_IO",
        "crash",
        "fatal",
        "Checkpoint to a file system with working file locks (or enable them on the mount); "
        "a newer TensorStore falls back to flock.",
        (
            'ValueError: Error opening "zarr" driver: Error writing local file "/gpfs/scratch/user1/t5_run/pretrain/checkpoint_100.tmp-1650949633/state.param_states.decoder.layers_0.pre_cross_attention_layer_norm.scale.v/.zarray": Failed to acquire lock on file: /gpfs/scratch/user1/t5_run/pretrain/checkpoint_100.tmp-1650949633/state.param_states.decoder.layers_0.pre_cross_attention_layer_norm.scale.v/.zarray.__lock [OS error: Invalid argument]',
            "ValueError: FAILED_PRECONDITION: Error writing local file \"/home/user1/lab/runs/test/working_directories/1/actor_params.orbax-checkpoint-tmp-1695894959581296/_sharding\": Failed to acquire lock on file: /home/user1/lab/runs/test/working_directories/1/actor_params.orbax-checkpoint-tmp-1695894959581296/_sharding.__lock [OS error: Function not implemented] [source locations='tensorstore/kvstore/file/file_key_value_store.cc:676\\ntensorstore/kvstore/kvstore.cc:268']",
        ),
        0.85,
        shared=True,
    ),
    S(
        "checkpoint-truncated",
        (
            r"failed finding central directory",
            r"MetadataIncompleteBuffer",
            r"unexpected EOF, expected [0-9]+ more bytes",
            r"Error while deserializing header: HeaderTooLarge",
        ),
        r"failed finding central directory|MetadataIncompleteBuffer|HeaderTooLarge"
        r"|unexpected EOF, expected (?P<missing>\d+) more bytes",
        "A checkpoint/weights file is truncated or corrupt (an interrupted download or save).",
        "STORAGE_IO",
        "crash",
        "fatal",
        "Verify the file's size/checksum against its source; download or save it again (and write checkpoints to a temp name, then rename).",
        (
            "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory",
            "safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer",
            "RuntimeError: unexpected EOF, expected 609814 more bytes. The file might be corrupted.",
            "safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge",
        ),
        0.9,
    ),
    S(
        "tf-file-resource-exhausted",
        (r"Resource exhausted: /",),
        r"Resource exhausted: (?P<path>/\S+)",
        "TensorFlow could not write a file (a checkpoint, its temp state, an event file): its "
        "file layer reports a full disk or an exceeded quota as Resource exhausted followed "
        "by the file's path. Not memory: the storage the path is on is full.",
        "STORAGE_IO",
        "crash",
        "fatal",
        "Free space or quota on the file system of the path named (`df -h`, `quota -s`), or "
        "write checkpoints to a larger volume; keep fewer checkpoints.",
        (
            "InternalError (see above for traceback): Error writing (tmp) checkpoint file: /home/user/.local/share/deepspeech_wer/checkpoint/4c19e07/model.ckpt-6.tempstate5518806414423370187: Resource exhausted: /home/user/.local/share/deepspeech_wer/checkpoint/4c19e07/model.ckpt-6.tempstate5518806414423370187",
        ),
        0.85,
    ),
    S(
        "cloud-fs-unexpected-response",
        (r"Unexpected response code [0-9]+",),
        r"Unexpected response code (?P<code>\d+)",
        "The cloud file system (TensorFlow's gs:// / s3:// layer) got an HTTP error from the "
        "object store while reading or writing a file, e.g. 410 when a resumable upload's "
        "session expired.",
        "STORAGE_IO",
        None,
        "error",
        "Check the bucket (region, permissions, quota) and retry the save; write checkpoints "
        "to local disk and copy them to the bucket if the uploads keep failing.",
        ("Unavailable: Unexpected response code 410",),
        0.6,
    ),
    S(
        "save-retries-exhausted",
        (r"(?:save|upload|write|checkpoint)[a-z]* failed [0-9]+ times",),
        r"(?P<what>save|upload|write|checkpoint)\w* failed (?P<n>\d+) times",
        "Writing the checkpoint was retried and failed every time: the storage it writes to "
        "(local disk, a network file system or an object store) refused it.",
        "STORAGE_IO",
        None,
        "fatal",
        "Find the storage error behind the retries (log the exception of each attempt): "
        "permissions, quota, a full disk or an unreachable bucket.",
        ("save failed 3 times, exiting",),
        0.7,
    ),
    # --- INFRA ---------------------------------------------------------------------
    S(
        "launcher-ssh-failed",
        (
            r"host=[^ \n]+ was not reachable via ssh",
            r"ssh exited with exit code 255",
            # pdsh's "node: user@node: Permission denied (publickey…)" (not git's "git@host: …")
            r"[^ \n]+: [^ \n@]+@[^ \n:]+: Permission denied \(publickey",
        ),
        r"host=(?P<host>[\w.:-]+) was not reachable via ssh|(?P<host2>[\w.-]+): ssh exited with exit code 255"
        r"|(?P<host3>[\w.-]+): [^\s@]+@(?P=host3): Permission denied \(publickey",
        "The launcher (the DeepSpeed runner, pdsh, mpirun) could not start the job's processes "
        "on a node over ssh: the node does not answer, or refuses the key.",
        "INFRA",
        "crash",
        "fatal",
        "From the launching node, `ssh <node> hostname` must work without a password: check the "
        "node is up and reachable, its sshd, and the keys (authorized_keys, the container's "
        "~/.ssh); a single-node run needs no hostfile.",
        (
            "RuntimeError: Using hostfile at hostfile but host=10.20.3.100 was not reachable via ssh. If you are running with a single node please remove hostfile or setup passwordless ssh.",
            "pdsh@user1-Precision-7960-Tower: localhost: ssh exited with exit code 255",
            "localhost: user1@localhost: Permission denied (publickey,password).",
        ),
        0.8,
    ),
    S(
        "cuda-invalid-device-ordinal",
        (r"invalid device ordinal",),
        r"invalid device ordinal",
        "A process asked for a GPU index the node does not have (or CUDA_VISIBLE_DEVICES hides): "
        "the launch starts more processes per node than there are visible GPUs, or maps local "
        "ranks to devices wrongly.",
        "INFRA",
        "crash",
        "fatal",
        "Make --nproc_per_node (or the tasks per node) match the GPUs each node shows "
        "(nvidia-smi -L, CUDA_VISIBLE_DEVICES), and set the device from LOCAL_RANK.",
        (
            "THCudaCheck FAIL file=/opt/conda/conda-bld/pytorch_1595629403081/work/torch/csrc/cuda/Module.cpp line=59 error=101 : invalid device ordinal",
            "RuntimeError: cuda runtime error (10) : invalid device ordinal at /pytorch/torch/csrc/cuda/Module.cpp:33",
        ),
        0.75,
    ),
    S(
        "ray-node-lost",
        (
            r"The actor died because its node has died",
            r"the actor's node was preempted",
            r"Task failed because the node it was running on is dead or unavailable",
        ),
        r"Task failed because the node it was running on is dead or unavailable\. Node IP: "
        r"(?P<host>[\w.:-]+)|the actor's node was preempted|The actor died because its node has died",
        "Ray lost the node a task or actor ran on (preempted, drained, failed, or its raylet "
        "died): the work on it is gone.",
        "INFRA",
        "crash",
        "fatal",
        "Find why the node went (the cloud's preemption notice, the autoscaler's and raylet's "
        "logs); retry on other nodes, with checkpoints frequent enough for preemptible capacity.",
        (
            "RuntimeError: Job 140218664731920 failed: Task failed because the node it was running on is dead or unavailable. Node IP: 10.31.4.57, node ID: 9c1e4b7d02a5f38e6d1b0c94a7e25f3d8b16c0a9e4d7f2b58a3c61e0. This can happen if the node was preempted, had a hardware failure, or its raylet crashed unexpectedly. To see node death information, use `ray list nodes --filter node_id=9c1e4b7d02a5f38e6d1b0c94a7e25f3d8b16c0a9e4d7f2b58a3c61e0`, check the Ray dashboard cluster page, search the node ID in the GCS logs, or use `ray logs raylet.out -ip 10.31.4.57`.",
            "(TrainController pid=61847) \tthe actor's node was preempted: preemption_integration_demo: simulating node drain",
            "(TrainController pid=61847) The actor died because its node has died. Node Id: 5e20c7b14a9d86f3e1b0c52d97a4f8e3160bd2c94a7e5f1d0b83c6a2",
        ),
        0.8,
    ),
    S(
        "k8s-gpu-admission-failed",
        (r"requested number of devices unavailable for nvidia\.com/gpu",),
        r"requested number of devices unavailable for nvidia\.com/gpu\. Requested: (?P<req>\d+), "
        r"Available: (?P<avail>\d+)",
        "The node's kubelet could not give the pod the GPUs it was scheduled with (the scheduler "
        "placed it on a node whose GPUs were taken): the pod failed admission.",
        "INFRA",
        "crash",
        "fatal",
        "Let the default scheduler (or a GPU-aware one) place GPU pods, or have the batch "
        "scheduler account for nvidia.com/gpu; resubmit.",
        (
            "Message:            Pod Update plugin resources failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: 1, Available: 0, which is unexpected",
        ),
        0.8,
    ),
    S(
        "slurm-prolog-failed",
        (r"Prolog failure on node ", r"PrologSlurmctld failed"),
        r"Prolog failure on node (?P<host>[\w.-]+)|PrologSlurmctld failed",
        "SLURM's prolog (the site's script that prepares a node for a job) failed, so the job "
        "never started there: the allocation is revoked and the node is usually drained.",
        "INFRA",
        "crash",
        "fatal",
        "Ask the cluster's admins (or read slurmd's/slurmctld's log on that node for the prolog's "
        "error); resubmit, excluding the node (--exclude) until it is fixed.",
        (
            "salloc: Prolog failure on node t017-004",
            "srun: PrologSlurmctld failed, job killed",
        ),
        0.85,
    ),
    S(
        "slurm-allocation-revoked",
        (r"Job allocation [0-9]+ has been revoked",),
        r"Job allocation (?P<job>\d+) has been revoked",
        "SLURM took the job's allocation back before (or while) it ran: a prolog failure, a node "
        "failure or an administrator ended it.",
        "INFRA",
        "crash",
        "fatal",
        "Find why in the lines before it or `sacct -j <job> -o State,Reason,NodeList`; resubmit.",
        ("salloc: Job allocation 418327 has been revoked.",),
        0.7,
    ),
    S(
        "pyxis-container-setup-failed",
        (
            r"pyxis: failed to import docker image",
            r"spank_pyxis\.so: [a-z_]+\(\) failed",
            r"pyxis: couldn't mkdir ",
            r"launch failed: Plugin initialization failed",
        ),
        r"pyxis: failed to import docker image|spank_pyxis\.so: (?P<hook>[a-z_]+)\(\) failed"
        r"|pyxis: couldn't mkdir (?P<path>\S+)|launch failed: Plugin initialization failed",
        "SLURM's container plugin (pyxis with enroot) could not set up the job's container on the "
        "node: its runtime directories, permissions or image import failed, so no task started.",
        "INFRA",
        "crash",
        "fatal",
        "Read pyxis's own lines above it (the directory or the import that failed); the enroot "
        "runtime paths (ENROOT_RUNTIME_PATH, /run/enroot) must exist and be writable on the node.",
        (
            "slurmstepd: error: pyxis: failed to import docker image",
            "slurmstepd: error: spank: required plugin spank_pyxis.so: task_init_privileged() failed with rc=-1",
            "[2019-07-11T15:36:42.117] [48213.0] error: pyxis: couldn't mkdir /run/pyxis/100005: No such file or directory",
            "srun: error: task 0 launch failed: Plugin initialization failed",
        ),
        0.8,
    ),
    S(
        "nvml-init-failed",
        (r"Failed to initialize NVML: (?:Driver/library version mismatch|Unknown Error)",),
        r"Failed to initialize NVML: (?P<why>Driver/library version mismatch|Unknown Error)",
        "The NVIDIA management library cannot start on the node or in the container: the driver "
        "was upgraded under the loaded kernel module (version mismatch), or the container lost "
        "its access to the GPU devices (unknown error, after a systemd reload of the host's "
        "cgroups); no CUDA process starts there.",
        "INFRA",
        "crash",
        "fatal",
        "Version mismatch: drain the node and reboot it (or reload the nvidia modules), and keep "
        "unattended upgrades off the driver. Unknown error in a container: restart the container; "
        "fix the runtime's cgroup setup (nvidia-container-toolkit's systemd-cgroup notes).",
        (
            "Failed to initialize NVML: Driver/library version mismatch",
            "Failed to initialize NVML: Unknown Error",
        ),
        0.8,
    ),
    S(
        "nccl-shm-segment-failed",
        (
            r"Error while creating shared memory segment (?:/dev/shm/)?nccl-",
            r"Call to posix_fallocate failed : No space left on device",
        ),
        r"Error while creating shared memory segment (?P<path>\S+) \(size (?P<size>\d+)\)"
        r"|Call to posix_fallocate failed : No space left on device",
        "NCCL could not create its shared-memory segment in /dev/shm for the processes of one "
        "node: the container's /dev/shm is too small (Docker's default is 64 MB).",
        "INFRA",
        None,
        "fatal",
        "Give the container a larger /dev/shm (docker --shm-size=16g or --ipc=host; an emptyDir "
        "with medium Memory in Kubernetes), or NCCL_SHM_DISABLE=1 at some cost in speed.",
        (
            "[rank0]: Error while creating shared memory segment /dev/shm/nccl-Kp3vWd (size 5767520)",
            "[3] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device",
            "[3] include/shm.h:48 NCCL WARN Error while creating shared memory segment nccl-shm-recv-5c02e7a9d14b3f86-1-2-3 (size 9637888)",
        ),
        0.85,
        shared=True,
    ),
    S(
        "ascend-hccp-init-failed",
        (r"Failed to initialize the HCCP process\.",),
        r"Failed to initialize the HCCP process\. Reason: (?P<why>.*)",
        "Ascend's collective runtime could not start its HCCP process on the NPU: a process of an "
        "earlier run still holds the device.",
        "INFRA",
        "crash",
        "fatal",
        "Kill the leftover training processes on that node (npu-smi info shows them) or wait for "
        "them to exit, then start the job again.",
        (
            "EJ0001: 2026-02-10-09:31:17.167.645 Failed to initialize the HCCP process. Reason: Maybe the last training process is running.",
        ),
        0.8,
    ),
    S(
        "xla-coordination-barrier-timeout",
        (r"DEADLINE_EXCEEDED: Barrier timed out\. (?:Barrier_id|Id): ",),
        r"Barrier timed out\. (?:Barrier_id|Id): (?P<barrier>[^.\s]+(?:\.\S+)?)",
        "JAX's (XLA's) coordination service waited for every task to connect or register and some "
        "never did: they were not started, started with another process count, or cannot reach "
        "the coordinator.",
        "INFRA",
        "crash",
        "fatal",
        "Start every process of the job (jax.distributed.initialize's num_processes must match "
        "what the launcher starts), with the same coordinator address, and check that each can "
        "reach it; read the log of a task that never registered.",
        (
            "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: PjRT_Client_Connect. Timed out task names:",
            "Original error: DEADLINE_EXCEEDED: Barrier timed out. Id: [Init]Wait_for_all_tasks_to_register::0. This usually happens because a task triggered the barrier too early or too slowly. Please look at the task logs (both timed out and first task) to debug further.",
        ),
        0.55,  # as a rendezvous timeout: another line may name why they never came
    ),
    S(
        "ssh-cannot-resolve-host",
        (r"ssh: Could not resolve hostname [^ :\n]+: ",),
        r"ssh: Could not resolve hostname (?P<host>[\w.-]+): ",
        "The launcher (mpirun, pdsh, the deepspeed runner) could not reach a node over ssh: its "
        "name does not resolve (the node or pod is not up yet, or the hostfile names it wrongly).",
        "INFRA",
        "crash",
        "fatal",
        "Check the hostfile against the nodes that are up (a pod's DNS name exists only once it "
        "runs: start the launcher after the workers), and the resolver on the launcher's node.",
        (
            "ssh: Could not resolve hostname tf-hvd-job-worker-5.tf-hvd-job: Name or service not known",
        ),
        0.8,
    ),
    S(
        "store-clients-missing",
        (r"seconds waiting for (?:clients|workers)\. [0-9]+/[0-9]+ (?:clients|workers) joined",),
        r"Timed out after (?P<s>\d+) seconds waiting for (?:clients|workers)\. "
        r"(?P<joined>\d+)/(?P<n>\d+) (?:clients|workers) joined",
        "The rendezvous store's server (rank 0's TCPStore) waited for every process to connect and "
        "some never did: they did not start, started with another MASTER_ADDR/PORT or world size, "
        "or cannot reach it.",
        "INFRA",
        "crash",
        "fatal",
        "Check that every node's processes started (the scheduler's step, the launcher's log on "
        "each node) with the same MASTER_ADDR, MASTER_PORT and world size, and can reach that "
        "address (firewall, the interface it resolves to).",
        (
            "torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. 1/3 clients joined.",
        ),
        0.55,  # as a rendezvous timeout: another line may name why they never came
    ),
    S(
        "ft-launcher-max-nodes-exceeded",
        (r"Maximum number of nodes \([0-9]+\) exceeded",),
        r"Maximum number of nodes \((?P<max>\d+)\) exceeded\. Active participant count would be (?P<n>\d+)",
        "The fault-tolerant launcher's rendezvous had more agents than --nnodes allows (a hot "
        "spare started without a min:max range, or nodes of another launch joined).",
        "INFRA",
        "crash",
        "fatal",
        "Give --nnodes a range that counts the spares (e.g. 4:5), or start only as many agents as "
        "--nnodes; check that every agent uses this job's rendezvous id.",
        (
            "ft_rendezvous_barrier.py:1458 [node-A...] Maximum number of nodes (4) exceeded. Active participant count would be 5 (joined=5, left=0). This is likely a configuration error - please check max_nodes setting.",
        ),
        0.85,
    ),
    S(
        "ray-autoscaler-infeasible-request",
        (r"No available node types can fulfill resource request",),
        r"No available node types can fulfill resource request \{(?:'node:(?P<host>[\w.:-]+)')?",
        "Ray's autoscaler cannot start any node type that has the resources a task or actor "
        "asks for (a request tied to a node that is gone, or more GPUs than any node has): the "
        "work waits for ever.",
        "INFRA",
        None,
        "error",
        "Find what asks for those resources (a placement tied to a dead node's IP, a GPU count "
        "above every node type's); restart it without the tie, or add a node type that has them.",
        (
            "(autoscaler +4h28m31s) Error: No available node types can fulfill resource request {'node:10.31.29.192': 0.01}. Add suitable node types to this cluster to resolve this issue.",
        ),
        0.75,
    ),
    S(
        "port-in-use",
        (
            r"Address already in use",
            r"failed to listen on any local network address",
        ),
        r"Address already in use|failed to listen on any local network address",
        "The rendezvous/master port is taken by another process (another job on the node, a leftover run).",
        "INFRA",
        "crash",
        "fatal",
        "Pick a free MASTER_PORT / --rdzv-endpoint port per job, or kill the leftover process.",
        (
            "[W socket.cpp:426] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).",
            "[E socket.cpp:462] [c10d] The server socket has failed to listen on any local network address.",
        ),
        0.9,
    ),
    S(
        "rendezvous-host-not-found",
        (r"host not found: ",),
        r"host not found: (?P<why>[^\n]*)",
        "A host name the job connects to (MASTER_ADDR, the rendezvous endpoint, the store "
        "host a pod advertised) does not resolve on this node: a name missing from DNS or "
        "/etc/hosts, a pod whose DNS record is not published yet, or a job placed on the "
        "wrong machine.",
        "INFRA",
        "crash",
        "fatal",
        "Give the launcher an address every node resolves (an IP, or the name added to DNS "
        "or /etc/hosts); on Kubernetes wait for the pods' DNS records (or use their IPs) "
        "before the rendezvous; check MASTER_ADDR / --rdzv-endpoint in the job script.",
        (
            "ValueError: host not found: Name or service not known",
            "Error: Rank -1 received an Exception. Detailed message: host not found: Name or service not known",
        ),
        0.85,
    ),
    S(
        "launcher-hung-up",
        (
            r"Received (?:1|Signals\.SIGHUP|SIGHUP) death signal",
            r"SignalException: Process [0-9]+ got signal: 1",
        ),
        r"Received (?:1|Signals\.SIGHUP|SIGHUP) death signal"
        r"|SignalException: Process (?P<pid>\d+) got signal: 1\b",
        "The launcher (torchrun / the elastic agent) was sent SIGHUP, the hang-up a process gets "
        "when the terminal or SSH session that started it goes away (nohup without disown, a "
        "dropped connection, a closed tmux pane), and took every worker down with it: "
        "nothing in the training itself failed.",
        "INFRA",
        "crash",
        "fatal",
        "Start the job detached from the login session (tmux/screen, setsid or nohup … & "
        "disown, or through the scheduler) and resume from the last checkpoint.",
        (
            "WARNING:torch.distributed.elastic.agent.server.api:Received 1 death signal, shutting down workers",
            "  1%|▏         | 11/750 [05:05<5:36:58, 27.36s/it]W0412 07:18:47.001000 140291664455488 torch/distributed/elastic/agent/server/api.py:688] Received Signals.SIGHUP death signal, shutting down workers",
            "torch.distributed.elastic.multiprocessing.api.SignalException: Process 52817 got signal: 1",
        ),
        0.8,
    ),
    S(
        "cloud-vm-preempted",
        (r"termination is imminent",),
        r"termination is imminent",
        "The cloud provider is reclaiming the machine (a spot/preemptible VM's termination "
        "notice): the job loses the node within seconds, nothing in the training failed.",
        "INFRA",
        "crash",
        "fatal",
        "Resume from the last checkpoint on another node; checkpoint on the termination "
        "notice (or more often) and keep checkpoints where a replacement VM can read them.",
        (
            "Mar 04 11:27:58Z tc-train-b-linux-v100-gpu-4-1tb-q3k9zp7w2m4n5r8tx1-1 start-worker 2025/03/04 11:27:58 GCP Metadata Service says termination is imminent",
        ),
        0.85,
    ),
    S(
        "ray-autoscaler-instance-terminated",
        (r"will be terminated soon \(reason: ",),
        r"Instance (?P<inst>\S+) \(node IP: (?P<ip>[\d.]+)\) will be terminated soon \(reason: (?P<why>[^)]+)\)",
        "The Ray autoscaler reports that nodes of the cluster are being taken away (a "
        "Kubernetes pod termination, spot reclaim, preemption or scale-down): the workers "
        "on them go, and what fails next in the job is a consequence.",
        "INFRA",
        "crash",
        "fatal",
        "Find why the pods/instances were terminated (kubectl get events, the node pool's "
        "preemption or scale-down history); resume from the last checkpoint and make the "
        "workers checkpoint and tear down on SIGTERM.",
        (
            "(autoscaler +44m27s) Instance k-7c3d91be0001 (node IP: 10.1.140.199) will be terminated soon (reason: kubernetes-pod-termination).",
        ),
        0.85,
    ),
    S(
        "tpu-lame-workers",
        (r"lame workers found",),
        r"lame workers found: (?P<what>.*)",
        "The TPU host lost the heartbeat of its TPU workers: the TPU was preempted, taken for "
        "maintenance or restarted under the job.",
        "INFRA",
        None,
        "fatal",
        "Check the TPU's state and history (gcloud compute tpus describe / operations list); "
        "recreate it and resume from the last checkpoint, and make the training loop exit "
        "when the workers are lost so a restart can run.",
        (
            "I0611 14:34:21.925864 139846025713472 session_support.py:391] ShutdownHook: lame workers found: HeartbeatManager(/job:worker/replica:0/task:0/device:CPU:0)",
        ),
        0.8,
    ),
    S(
        "slurm-node-failure",
        (r"error: Node failure on ",),
        r"Node failure on (?P<host>[\w.-]+)",
        "SLURM lost a node of the allocation (it stopped responding or rebooted).",
        "INFRA",
        None,
        "fatal",
        "Check the node's state and reason (`scontrol show node`, `sacct -j <job> -o NodeList,State`); resubmit excluding it.",
        ("salloc: error: Node failure on wk-1",),
        0.85,
    ),
    S(
        "ray-node-marked-dead",
        (r"has been marked dead because the (?:detector|monitor) has missed too many heartbeats",),
        r"The node with (?:node|client) id:? \w+(?: and (?:ip|address): (?P<host>[\w.:-]+))?"
        r"(?: and node name: \S+)? has been marked dead",
        "Ray lost a node of the cluster (it was shut down, preempted, crashed or stopped "
        "answering heartbeats): the workers on it are gone and the job waits or fails on them.",
        "INFRA",
        None,
        "fatal",
        "Check why the node went away (its instance/pod history, raylet.out and dmesg on it); "
        "restart from the last checkpoint on healthy nodes.",
        (
            "2022-02-15 16:53:52,096\tWARNING worker.py:1462 -- The node with node id: 3c9e71a05b2f84d6e0a1c7b95f3d28e4a6b1907c5d2e8f4a3b6c1d09 and ip: 10.128.0.103 has been marked dead because the detector has missed too many heartbeats from it. This can happen when a raylet crashes unexpectedly or has lagging heartbeats.",
        ),
        0.8,
    ),
    S(
        "slurm-batch-script-missing",
        (r"execve\(\): [^ \n]*slurm_script: No such file or directory",),
        r"execve\(\): (?P<path>\S*slurm_script): No such file or directory",
        "slurmstepd could not start the job's batch script from the node's slurmd spool "
        "directory: the node's local storage or mount is broken, the job never ran.",
        "INFRA",
        "crash",
        "fatal",
        "Resubmit excluding the node (`--exclude`) and have it drained and checked (its "
        "SlurmdSpoolDir / tmp mount); other jobs on it fail the same way.",
        (
            "slurmstepd: error: execve(): /tmp/slurmd/job00412/slurm_script: No such file or directory",
        ),
        0.85,
    ),
    S(
        "slurm-task-launch-failed",
        (r"Task launch for \S+ failed on node ", r"Application launch failed: "),
        r"Task launch for \S+ failed on node (?P<host>[\w.-]+): (?P<why>.+)|Application launch failed: (?P<why2>.+)",
        "srun could not start the job step's tasks on a node (e.g. the job credential was "
        "refused as expired after a reboot or clock skew): the program never ran there.",
        "INFRA",
        "crash",
        "fatal",
        "Check the named node's slurmd and clock (`scontrol show node`, munge/NTP after a "
        "reboot); resubmit excluding it until it is fixed.",
        (
            "srun: error: Task launch for 36.0 failed on node cn131: Job credential expired",
            "srun: error: Application launch failed: Job credential expired",
        ),
        0.85,
    ),
    S(
        "rendezvous-closed",
        (r"RendezvousClosedError",),
        r"RendezvousClosedError",
        "The elastic rendezvous was closed: another agent failed or the job was scaled down/stopped.",
        "INFRA",
        "crash",
        "error",
        "Look at the other nodes' agents for the first failure; check min/max nodes and restarts.",
        ("torch.distributed.elastic.rendezvous.api.RendezvousClosedError",),
        0.7,
    ),
    S(
        "rendezvous-timeout",
        (r"RendezvousTimeoutError",),
        r"RendezvousTimeoutError",
        "The elastic agent gave up waiting for the rendezvous: not every node joined within "
        "the rendezvous timeout, so no worker was started.",
        "INFRA",
        "crash",
        "error",
        "Check that every node's agent was started with the same --rdzv_id/--rdzv_endpoint and "
        "--nnodes, reaches the endpoint, and started before the timeout (join_timeout).",
        (
            "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError",
            '    "message": "RendezvousTimeoutError: ",',
        ),
        0.7,
    ),
    S(
        "rendezvous-keepalive-failed",
        (r"failed to send a keep-alive heartbeat to the rendezvous",),
        r"The node '(?P<node>[^']+)' has failed to send a keep-alive heartbeat",
        "An elastic agent lost the rendezvous store: a node (or the store's host) went away.",
        "INFRA",
        "hang",
        "error",
        "Find the node that died first (scheduler/node logs); the survivors wait until their timeout.",
        (
            "WARNING:torch.distributed.elastic.rendezvous.dynamic_rendezvous:The node 'r7i4n3-ib0_163508_0' has failed to send a keep-alive heartbeat to the rendezvous 'none' due to an error of type RendezvousConnectionError.",
        ),
        0.75,
    ),
    S(
        "k8s-evicted",
        (r"Evicted  ", r"The node was low on resource", r"The node had condition: \["),
        # a pod listing with the node column before the kubelet's message ("Evicted
        # <node> Pod The node had condition: […]") names the node, and so does an events
        # listing's SOURCE column ("Evicted kubelet, <node> The node was low on …")
        r"Evicted +(?:kubelet, )?(?P<host>[\w.-]+) +(?:Pod )?The node"
        r"|low on resource: (?P<resource>[\w-]+)"
        r"|The node had condition: \[(?P<cond>\w+)\]|Evicted",
        "Kubernetes evicted the pod (node pressure on memory/disk).",
        "INFRA",
        "crash",
        "fatal",
        "Set requests/limits that match use; check the node's pressure and the pod's QoS class.",
        (
            "4m11s       Warning   Evicted               pod/egg-5c8b7f4d9-t6wzn    The node was low on resource: memory. Container egg was using 5053216Ki, which exceeds its request of 0.",
            "4m7s        Warning   Evicted               pod/egg-5c8b7f4d9-h3jvb    The node had condition: [MemoryPressure].",
            "log-cluster-train-default-0-classifier-7c9d5e4fvkc4t   ml-team-ws                                         Evicted   rk-07-09-compute   Pod The node had condition: [DiskPressure]. ",
            "2m          2m           1         jupyter-user1.1563b7d2a0c4e9f1   Pod                                     Warning   Evicted   kubelet, gke-kf-cluster-default-pool-5e1c9a2b-q7xd   The node was low on resource: memory.",
        ),
        0.85,
    ),
    S(
        "container-runtime-start-failed",
        (
            r"OCI runtime (?:create|exec) failed",
            r"nvidia-container-cli(?:\.real)?: initialization error",
        ),
        r"nvidia-container-cli(?:\.real)?: initialization error: (?P<detail>[\w :.,'-]+)"
        r"|OCI runtime (?P<op>create|exec) failed",
        "The container runtime could not start the job's container (the OCI runtime or the "
        "NVIDIA prestart hook failed): the training program never ran on that node.",
        "INFRA",
        "crash",
        "fatal",
        "Repair the node's container GPU runtime (driver and nvidia-container-toolkit install; "
        "`nvidia-container-cli -k -d /dev/tty info`, restart the daemon) or run elsewhere.",
        (
            'docker: Error response from daemon: OCI runtime create failed: container_linux.go:345: starting container process caused "process_linux.go:424: container init caused \\"process_linux.go:407: running prestart hook 1 caused \\\\\\"error running hook: exit status 1, stdout: , stderr: exec command: [/usr/bin/nvidia-container-cli --load-kmods configure --ldconfig=@/sbin/ldconfig.real --device=all --compute --utility --require=cuda>=9.0 --pid=27514 /var/lib/docker/overlay2/5c0f2e9a81d47b3e6a0c9d2f1e8b7a64c3d5e2f1a0b9c8d7e6f5a4b3c2d1e0f9/merged]\\\\\\\\nnvidia-container-cli: initialization error: driver error: failed to process request\\\\\\\\n\\\\\\"\\"": unknown.',
        ),
        0.85,
    ),
    S(
        "ib-memlock-limit",
        (
            r"ibv_reg_mr[a-z0-9_]* failed with error Cannot allocate memory",
            r"ibv_reg_dmabuf_mr failed with error Cannot allocate memory",
            r"Call to ibv_create_qp failed",
        ),
        r"ibv_(?P<verb>reg_(?:dmabuf_)?mr\w*|create_qp) failed",
        "InfiniBand could not pin memory / create a queue pair: the locked-memory limit (ulimit -l) "
        "is too low, or NCCL asks for more than it allows (a large NCCL_BUFFSIZE, many channels).",
        "INFRA",
        None,
        "fatal",
        "Set `ulimit -l unlimited` (limits.conf, the container's --ulimit memlock=-1, slurmd's LimitMEMLOCK).",
        (
            "gpu-t04:10561:10647 [0] misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory",
            "gpu-w07 [0] misc/ibvwrap.cu:269 WARN Call to ibv_create_qp failed",
            "[2025-05-07 17:17:39] node-c3:427:3611 [5] misc/ibvwrap.cc:183 NCCL WARN Call to ibv_reg_dmabuf_mr failed with error Cannot allocate memory",
        ),
        0.85,
    ),
    S(
        "efa-enomem-memlock",
        (r"Libfabric error: \(-12\) Cannot allocate memory",),
        r"Libfabric error: \(-12\) Cannot allocate memory",
        "The EFA libfabric provider could not allocate/register its buffers (ENOMEM): almost "
        "always the locked-memory limit (ulimit -l) of the job's environment is too low.",
        "INFRA",
        None,
        "fatal",
        "Set `ulimit -l unlimited` where the ranks run (limits.conf, the container's --ulimit "
        "memlock=-1, slurmd's LimitMEMLOCK) and check it from inside the launcher.",
        ("Libfabric error: (-12) Cannot allocate memory",),
        0.85,
    ),
    # --- NETWORK -------------------------------------------------------------------
    S(
        "efa-ofi-failure",
        (r"NET/OFI Couldn't open", r"Failed to process command ALLOC_PD"),
        r"NET/OFI Couldn't open (?P<what>\w+)|Failed to process command ALLOC_PD",
        "The EFA/libfabric provider could not open its resources.",
        "NETWORK",
        None,
        "fatal",
        "Check the EFA driver/aws-ofi-nccl versions and the security group; run fi_info -p efa on the node.",
        (
            "WARN: Function: create_nccl_ofi_component Line: 459: NET/OFI Couldn't open AV. RC: -22, ERROR: Invalid argument",
            "[ 1632.420956] infiniband efa_0: Failed to process command ALLOC_PD (opcode 14) comp_status 1 err -12",
        ),
        0.85,
        local=True,
    ),
    S(
        "efa-cuda-memreg-nccl219-libfabric",
        (
            r"NET/OFI Unable to register memory \(type = 2\)",
            r"cuda_set_sync_memops\(\):[0-9]+<warn> Failed to perform cuPointerSetAttribute",
        ),
        r"NET/OFI Unable to register memory \(type = 2\) for device (?P<dev>\d+)\. RC: -22"
        r"|cuda_set_sync_memops\(\):\d+<warn> Failed to perform cuPointerSetAttribute: (?P<why>\S+)",
        "The OFI plugin could not register a GPU buffer with EFA (EINVAL): the known "
        "incompatibility of NCCL 2.19+ with the Libfabric of EFA installers before 1.29 (its "
        "CUDA sync-memops call is not supported), a software version mix, not the fabric.",
        "SOFTWARE",
        None,
        "fatal",
        "Set FI_EFA_SET_CUDA_SYNC_MEMOPS=0, or upgrade the EFA installer to 1.29+, or use NCCL "
        "2.18.",
        (
            "ip-10-31-40-103:36870:36991 [0] register_mr_buffers:544 NCCL WARN NET/OFI Unable to register memory (type = 2) for device 0. RC: -22, Error: Invalid argument",
            "libfabric:652244:1713524816::core:core:cuda_set_sync_memops():207<warn> Failed to perform cuPointerSetAttribute: CUDA_ERROR_NOT_SUPPORTED:operation not supported",
        ),
        0.85,
        shared=True,
    ),
    S(
        "ofi-request-completed-with-error",
        (r"NET/OFI Request \S+ completed with error",),
        r"NET/OFI Request \S+ completed with error\. RC: (?P<rc>-?\d+)\. Error: (?P<code>-?\d+) \((?P<what>[A-Z_]+)\)",
        "A send/receive posted through the libfabric (OFI) network plugin completed with an error "
        "(UNDELIVERABLE: the fabric could not deliver to the peer endpoint; the peer's NIC, link "
        "or the peer process being gone).",
        "NETWORK",
        None,
        "fatal",
        "Check the fabric between the two nodes (fi_info, the NIC's error counters, the switch "
        "ports) and whether the peer process was still alive; then rerun with NCCL_DEBUG=INFO.",
        (
            "[rank3]: NET/OFI Request 0x7f14cc5b60c0 completed with error. RC: 113. Error: 2 (UNDELIVERABLE). Completed length: 0",
        ),
        0.85,
    ),
    S(
        "efa-internal-error",
        (r"EFA internal error: \([0-9]+\)",),
        r"EFA internal error: \((?P<code>\d+)\) (?P<what>.+)",
        "The EFA libfabric provider hit an internal error and aborts the process (the "
        "'Libfabric error' line just above it gives the errno).",
        "NETWORK",
        None,
        "fatal",
        "Read the 'Libfabric error' line above it; check the EFA driver/installer and "
        "aws-ofi-nccl versions and the instance's EFA devices (fi_info -p efa).",
        ("EFA internal error: (4112) Failure to post internal receive buffers",),
        0.6,
    ),
    S(
        "ib-async-port-error",
        (r"NET/IB ?: (?:\S+ )?Got async event : port error",),
        r"NET/IB ?: (?:(?P<dev>\S+) )?Got async event : port error",
        "The InfiniBand port of this process's NIC reported a port error (the link went down or "
        "flapped): every connection through that port fails after it.",
        "NETWORK",
        None,  # a WARN line: the collectives stall or fail after it
        "error",
        "Check that node's IB link (ibstat, the port's error counters, the cable and the switch "
        "port) and drain the node until the link is stable.",
        (
            "gpu48:34050:34121 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : port error",
        ),
        0.9,
        local=True,
    ),
    S(
        "ib-async-catastrophic-error",
        (r"NET/IB ?: (?:\S+ )?Got async event : local catastrophic error",),
        r"NET/IB ?: (?:(?P<dev>\S+) )?Got async event : local catastrophic error",
        "The InfiniBand adapter of this process reported a local catastrophic error: the HCA "
        "itself failed (firmware or hardware fault) and every connection through it is lost.",
        "NETWORK",
        None,  # a WARN line: the collectives stall or fail after it
        "error",
        "Drain that node; check the adapter (dmesg for mlx5 health/syndrome messages, "
        "ibstat, the firmware version) and reset or replace it before putting it back.",
        (
            "2021-03-14T16:13:44.884Z: [1,12]<stdout>:container-e311-1712000000000-50417-01-000057:915:964 [0] transport/net_ib.cu:80 NCCL WARN NET/IB : Got async event : local catastrophic error",
        ),
        0.9,
        local=True,
    ),
    S(
        "ib-async-event",
        (
            r"NET/IB ?: (?:\S+ )?Got async event : ",
            r"NET/IB ?: (?:\S+ )?async fatal event on (?:QP|CQ|SRQ) ",
        ),
        r"NET/IB ?: (?:(?P<dev>\S+) )?(?:Got async event|async fatal event on (?:QP|CQ|SRQ) "
        r"\([^)]*\)) ?: (?P<event>.+)",
        "The InfiniBand adapter of this process reported an asynchronous error on its own queues "
        "(a local access violation, a work queue or completion queue error): the connections "
        "through it fail after it.",
        "NETWORK",
        None,  # a WARN line: the collectives stall or fail after it
        "error",
        "Drain that node; check the adapter and its driver (dmesg for mlx5 messages, the firmware "
        "and OFED versions, ibstat) and, for a local access violation, the memory registration "
        "path (GPUDirect RDMA / nvidia-peermem, NCCL's IB plugin) before putting it back.",
        (
            "2025-10-03 15:39:31.043 +08:00 [2025-10-03 07:39:30] h100-41:251:1233 [0] transport/net_ib.cc:180 NCCL WARN NET/IB : mlx5_ib0:1 async fatal event on QP (0x7f69f01519a8): local access violation work queue error",
            "node317:128411:128475 [0] transport/net_ib.cc:101 NCCL WARN NET/IB : mlx5_0:1 Got async event : local access violation work queue error",
        ),
        0.9,  # the adapter's own error: the completion errors on its peers follow it
        local=True,
    ),
    S(
        "ib-completion-error",
        (
            r"Got completion from peer .* with error [0-9]+",
            r"NET/IB ?: Got completion with error [0-9]+",
            r"Got completion from peer .* with status=[0-9]+",
        ),
        r"Got completion (?:from peer (?P<peer>\S+) )?with (?:error |status=)(?P<code>\d+)",
        "An InfiniBand work request failed with the error status the line names (12 = transport "
        "retries exceeded, the link or the peer's port; 4 = a local protection error on this "
        "node's memory registration; 9 = the peer refused the request; 5 = flushed after an "
        "earlier error).",
        "NETWORK",
        None,
        "fatal",
        "Check the port counters (ibdiagnet / perfquery) and the peer's link; NCCL_IB_TIMEOUT only hides it.",
        (
            "NET/IB : Got completion from peer 10.214.147.122<39138> with error 12, opcode 0, len 0, vendor err 129",
            "gpu-r05:41822:41899 [0] transport/net_ib.cu:788 NCCL WARN NET/IB : Got completion with error 12, opcode 1, len 0, vendor err 129",
            "[2025-08-19 14:07:52] train-scale-512-master-0:617:2799 [3] transport/net_ib.cc:2360 NCCL WARN NET/IB: Got completion from peer 10.44.12.84<53393> with status=12 opcode=1 len=5222 vendor err 129 (Send) localGid ::ffff:10.44.20.87 remoteGids::ffff:10.44.20.74 hca mlx5_26",
        ),
        0.9,
    ),
    S(
        "nccl-socket-recv-timed-out",
        (r"Call to (?:recv|send) (?:from|to) [^ \n]+ failed : Connection timed out",),
        r"(?:Net : |socket[A-Z]\w*: )Call to (?:recv|send) (?:from|to) (?P<peer>\S+) failed : (?P<why>Connection timed out)",
        "An established NCCL socket connection to a peer timed out (ETIMEDOUT): the path "
        "between the hosts dropped it (a process that dies has its connections reset or "
        "closed by its kernel, not left to time out).",
        "NETWORK",
        None,  # a WARN line: the process may still be waiting
        "error",
        "Check the network path between the two hosts (pod network, NAT/conntrack and "
        "firewall idle timeouts, a flapping link) and the peer host's health.",
        (
            "[15]trainer-23:83:2526 [0] misc/socket.cc:503 NCCL WARN Net : Call to recv from 10.96.188.199<41468> failed : Connection timed out",
        ),
        0.85,
    ),
    S(
        "nccl-socket-peer-gone",
        (r"Net : Call to (?:recv|send)", r"socket[A-Z][A-Za-z]+: Call to (?:recv|send)"),
        r"(?:Net : |socket[A-Z]\w*: )Call to (?:recv|send) (?:from|to) (?P<peer>\S+) failed : (?P<why>.+)",
        "NCCL's socket layer lost a connection to a peer (its own WARN, or the 'Last error' of an "
        "ncclRemoteError/ncclSystemError): as often a peer process that died as a broken link.",
        "NETWORK",
        None,  # a WARN line: the process may still be waiting
        "error",
        "Look first for a rank that died just before (OOM, segfault, exit); if none, check the "
        "link to the peer's address (NIC, switch port, firewall).",
        (
            "gpuq-st-p4d24xlarge-3:428021:428235 [1] misc/socket.cc:518 NCCL WARN Net : Call to recv from 10.200.84.247<58355> failed : Broken pipe",
            "socketProgressOpt: Call to recv from 10.31.7.142<33759> failed : Connection reset by peer",
        ),
        0.5,  # the same words when the peer process exited
    ),
    S(
        "nccl-socket-call-failed-old",
        (r"WARN Call to (?:recv|send|write|read) failed : ",),
        r"WARN Call to (?P<call>recv|send|write|read) failed : (?P<why>[^.]+)",
        "NCCL 2.1-2.4 lost a socket connection to a peer (bootstrap or socket transport; these "
        "releases name no peer address): a peer process that died or a connection the network "
        "dropped.",
        "NETWORK",
        None,  # a WARN line: the process may still be waiting
        "error",
        "Look first for a rank that died just before; if none, check the interface NCCL uses "
        "between the hosts (NCCL_SOCKET_IFNAME) and the route and firewall between them.",
        (
            "gpu-srv015:31244:31351 [3] include/socket.h:194 WARN Call to recv failed : Connection reset by peer",
            "job0-7h3kqp:15:91 [3] include/socket.h 398 NCCL WARN Call to write failed : Connection reset by peer.",
        ),
        0.5,  # the same words when the peer process exited
    ),
    S(
        "nccl-socket-create-failed",
        (r"WARN Socket creation failed : ",),
        r"WARN Socket creation failed : (?P<why>.+)",
        "NCCL could not create a socket on the interface it picked: the process has no usable "
        "IP interface (a container without the host's network, an interface without an "
        "address of the family NCCL asked for).",
        "NETWORK",
        None,  # a WARN line: the call's error return decides how the process ends
        "error",
        "Give the container the node's network (host networking) or point NCCL_SOCKET_IFNAME "
        "at the interface that carries the node's address.",
        (
            "4b7d02c9e1f3:2856:2856 [0] include/socket.h:311 WARN Socket creation failed : Address family not supported by protocol",
        ),
        0.85,
        local=True,
    ),
    S(
        "nccl-socket-init-bad-address-family",
        (r"ncclSocketInit: connecting to address",),
        r"ncclSocketInit: connecting to address\s+(?:(?P<addr>\S+)\s+)?with family "
        r"(?P<family>\d+) is neither AF_INET\(2\) nor AF_INET6\(10\)",
        "NCCL tried to connect to a socket address that was never filled in (its family is "
        "garbage): the interface NCCL_SOCKET_IFNAME names does not exist on the host, or the "
        "ranks exchanged addresses of different network transports or plugins.",
        "NETWORK",
        None,  # the error return decides how the process ends
        "error",
        "Check that NCCL_SOCKET_IFNAME names an interface every node has (ip -br addr) and that "
        "every node loads the same NCCL network plugin.",
        (
            "[trainer0|0]:ncclSocketInit: connecting to address  with family 59936 is neither AF_INET(2) nor AF_INET6(10)",
        ),
        0.85,
        shared=True,
    ),
    S(
        "nccl-socket-unreachable",
        (r"Net : Connect to ", r"socketPollConnect: Connect to [^ \n]+ returned [0-9]+\(No route"),
        r"(?:Net : |socket[A-Z]\w*: )Connect to (?P<peer>\S+) (?:failed : |returned \d+\()(?P<why>No route to host|Network is unreachable)",
        "NCCL could not open a socket to a peer's address: no route to it (interface, routing, "
        "firewall or a NIC that is down).",
        "NETWORK",
        None,  # a WARN line: the process may still be waiting
        "error",
        "Check NCCL_SOCKET_IFNAME and the route between the nodes (ip route, ping the peer's "
        "address from the failing node).",
        (
            "wn-3:925:952 [0] include/socket.h:409 NCCL WARN Net : Connect to 10.0.1.9<54263> failed : No route to host",
            "gn-05:240:240 [6] misc/socket.cc:533 NCCL WARN socketPollConnect: Connect to 10.8.0.4<56849> returned 113(No route to host) errno 115(Operation now in progress)",
        ),
        0.8,
    ),
    S(
        "c10d-store-unreachable",
        (
            r"RendezvousConnectionError",
            r"client socket has timed out after",
            r"TCP client failed to connect",
        ),
        r"RendezvousConnectionError|client socket has timed out after (?P<s>\d+)s while trying to connect to (?P<addr>\S+)|TCP client failed to connect/validate to host (?P<host>\S+)",
        "The c10d store (rendezvous/master address) cannot be reached from this node.",
        "NETWORK",
        None,
        "error",
        "Check MASTER_ADDR/port reachability from every node (firewall, the interface the address is on).",
        (
            '    "message": "RendezvousConnectionError: The connection to the C10d store has failed. See inner exception for details.",',
            "[E socket.cpp:860] [c10d] The client socket has timed out after 60s while trying to connect to 10.0.0.1:1234",
            "[W530 16:56:01.831041000 TCPStore.cpp:347] [c10d] TCP client failed to connect/validate to host 10.64.0.7:59782 - retrying (try=6, timeout=1800000ms, delay=5241ms): Connection reset by peer",
        ),
        0.75,
    ),
    S(
        "c10d-socket-reset",
        (r"Error: Connection reset by peer",),
        r"^(?:RuntimeError|(?:torch\.distributed\.)?DistNetworkError): (?P<why>Connection reset by peer)\s*$",
        "A c10d store or process-group socket was closed by the other side while the group was "
        "being set up or used (the bare RuntimeError of torch's TCPStore/ProcessGroup code).",
        "NETWORK",
        "crash",
        "error",
        "Check that the peer process was still alive, then the interfaces both sides use "
        "(NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME) and the route and firewall between the hosts.",
        ("RuntimeError: Connection reset by peer",),
        0.6,
    ),
    S(
        "gloo-connect-failed",
        (r"connectFullMesh failed", r"gloo/transport/tcp/pair\.cc:[0-9]+\] connect "),
        r"connectFullMesh failed|pair\.cc:\d+\] connect (?P<addr>\S+): (?P<why>.*)",
        "Gloo could not connect its peers: the interface chosen (GLOO_SOCKET_IFNAME) is not reachable between nodes.",
        "NETWORK",
        "crash",
        "fatal",
        "Set GLOO_SOCKET_IFNAME/NCCL_SOCKET_IFNAME to the interface the nodes share; check /etc/hosts maps the host name to that address, not 127.0.1.1.",
        (
            "(RayWorkerWrapper pid=802, ip=10.147.43.24) [rank1]:[E701 08:52:46.164295950 ProcessGroupGloo.cpp:145] Gloo connectFullMesh failed with [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:144] no error",
            "  what():  [/opt/conda/conda-bld/pytorch_1544084119927/work/third_party/gloo/gloo/transport/tcp/pair.cc:724] connect [127.0.1.1]:3210: Connection refused",
        ),
        0.85,
    ),
    S(
        "gloo-interface-no-address",
        (r"gloo/transport/tcp/device\.cc:[0-9]+\] (?:ifa|rp) != nullptr",),
        r"device\.cc:\d+\] (?:ifa|rp) != nullptr\. Unable to find address for: (?P<name>\S+)",
        "Gloo found no address to bind: the interface GLOO_SOCKET_IFNAME names has none on this "
        "machine (ifa), or the machine's own hostname resolves to nothing usable (rp).",
        "NETWORK",
        "crash",
        "fatal",
        "Set GLOO_SOCKET_IFNAME to an interface that exists and carries the node's address (ip "
        "-4 addr); make the hostname resolve to that address (/etc/hosts, the container's).",
        (
            "RuntimeError: [enforce fail at /root/pytorch/third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != nullptr. Unable to find address for: bond1",
            "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:127] rp != nullptr. Unable to find address for: dgx-7.lab",
        ),
        0.9,
        shared=True,
    ),
    S(
        "nccl-socket-connect-failed",
        (r"\.h:[0-9]+ (?:NCCL )?WARN (?:Net : )?(?:Call to )?[Cc]onnect(?: to)? ",),
        r"WARN (?:Net : )?(?:Call to )?[Cc]onnect(?: to (?P<peer>\S+))? failed ?: (?P<why>.*)",
        "NCCL's bootstrap/socket connect to a peer failed (routing, firewall, wrong interface).",
        "NETWORK",
        None,
        "fatal",
        "Set NCCL_SOCKET_IFNAME to the interface the nodes share and check the route/firewall between them.",
        (
            "gpu-q-144-103:82123:82181 [0] include/socket.h:360 WARN Call to connect failed : Connection timed out",
        ),
        0.85,
    ),
    # --- SOFTWARE ------------------------------------------------------------------
    S(
        "nccl-net-id-not-found",
        (r"NCCL WARN Could not find NET with id [0-9]+",),
        r"Could not find NET with id (?P<id>\d+)",
        "NCCL's topology search picked a network device it then could not find: a bug of NCCL "
        "2.26's multi-node search (fixed in 2.27), seen with the containers that ship it.",
        "SOFTWARE",
        "crash",
        "fatal",
        "Use an NCCL of 2.27 or later (a newer container, or the nvidia-nccl wheel on the library "
        "path); as a stopgap pin the network with NCCL_NET and NCCL_IB_HCA.",
        ("graph/topo.h:230 NCCL WARN Could not find NET with id 0",),
        0.75,
    ),
    S(
        "nccl-topo-reverse-path",
        (r"Failed to find reverse path from remNode",),
        r"Failed to find reverse path from remNode (?P<rem>\S+) nlinks (?P<n>\d+) to node (?P<node>\S+)",
        "NCCL's topology search could not walk back from one device to another: the NCCL in "
        "use does not understand this machine's PCIe/NVLink layout (a release older than the "
        "GPUs, or a driver/topology it mis-reads); init fails with an internal error.",
        "SOFTWARE",
        None,
        "fatal",
        "Use an NCCL release that supports these GPUs (the one torch bundles, or a newer "
        "container) and check NCCL_TOPO_FILE and the driver version, then retry.",
        (
            "opt-1_3b.0 [stderr] Failed to find reverse path from remNode 0/5f000 nlinks 4 to node 0/cb000",
        ),
        0.85,
    ),
    S(
        "nccl-topo-xml-attribute-missing",
        (r"WARN Attribute [a-zA-Z_]+ of node [a-zA-Z_]+ not found",),
        r"WARN Attribute (?P<attr>\w+) of node (?P<node>\w+) not found",
        "NCCL could not build its topology: an XML node lacks an attribute. The topology came "
        "from a file (NCCL_TOPO_FILE, a network plugin's static topology) that does not fit "
        "the GPUs/CPUs in use, or from an NCCL version with that bug; init fails with an "
        "internal error.",
        "SOFTWARE",
        None,
        "fatal",
        "Unset NCCL_TOPO_FILE (check /etc/nccl.conf and the network plugin's defaults) or "
        "upgrade NCCL / the network plugin, then retry.",
        (
            "7f3c1d9e40ab:3318:3391 [1] graph/xml.h:101 NCCL WARN Attribute arch of node cpu not found",
            "graph/xml.h:77 NCCL WARN Attribute arch of node cpu not found",
        ),
        0.8,
        shared=True,  # one topology file / NCCL build for every rank
    ),
    S(
        "no-kernel-image",
        (
            r"no kernel image is available for execution",
            r"driver version is insufficient for CUDA runtime",
            r"NVIDIA driver on your system is too old",
        ),
        r"no kernel image is available|driver version is insufficient|NVIDIA driver on your "
        r"system is too old(?: \(found version (?P<driver>\d+)\))?",
        "The binaries do not match the GPU or driver (compute capability not built, driver too old).",
        "SOFTWARE",
        "crash",
        "fatal",
        "Install a build for this GPU's compute capability / a driver new enough for the CUDA runtime.",
        (
            "THCudaCheck FAIL file=/opt/pytorch/pytorch/aten/src/THC/generic/THCTensorMath.cu line=35 error=209 : no kernel image is available for execution on the device",
            "Wed Oct 16 13:49:06 2019[1,10]<stdout>:F1016 13:49:06.743296 18410 hl_cuda_device.cc:565] Check failed: cudaSuccess == cudaStat (0 vs. 35) Cuda Error: CUDA driver version is insufficient for CUDA runtime version",
            "The NVIDIA driver on your system is too old (found version 10010).",
            "(VllmWorkerProcess pid=18374) ERROR 07-14 09:41:23 multiproc_worker_utils.py:226] RuntimeError: CUDA error: no kernel image is available for execution on the device",
        ),
        0.9,
        shared=True,  # one build (or driver image) for every rank on that GPU model
    ),
    S(
        "checkpoint-shape-mismatch",
        (r"size mismatch for [^ \n]+: copying a param with shape",),
        r"size mismatch for (?P<param>[^:]+): copying a param with shape (?P<ckpt>torch\.Size\(\[[^\]]*\]\))",
        "The checkpoint was saved for a different model configuration than the one loading it.",
        "SOFTWARE",
        "crash",
        "fatal",
        "Load with the configuration the checkpoint was saved with (sizes, TP/PP degree, ZeRO stage).",
        (
            "[rank1]:        size mismatch for model.layers.1.self_attn.o_proj.weight: copying a param with shape torch.Size([1024, 1024]) from checkpoint, the shape in current model is torch.Size([4096, 4096]).",
        ),
        0.9,
    ),
    S(
        "ddp-unfinished-reduction",
        (r"Expected to have finished reduction in the prior iteration",),
        r"Expected to have finished reduction in the prior iteration before starting a new one",
        "a DDP gradient reduction left unfinished by the last iteration: some parameters "
        "took no part in the loss (a branch the forward pass skipped, outputs left out of "
        "the loss), so their gradients were never reduced.",
        "SOFTWARE",
        "crash",
        "fatal",
        "Pass find_unused_parameters=True to DistributedDataParallel (the framework's "
        "find_unused_parameters setting), or make every parameter take part in the loss on "
        "every rank; TORCH_DISTRIBUTED_DEBUG=DETAIL names the parameters.",
        (
            "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. This error indicates that your module has parameters that were not used in producing loss. You can enable unused parameter detection by (1) passing the keyword argument `find_unused_parameters=True` to `torch.nn.parallel.DistributedDataParallel`; (2) making sure all `forward` function outputs participate in calculating loss. If you already have done the above two steps, then the distributed data parallel module wasn't able to locate the output tensors in the return value of your module's `forward` function. Please include the loss function and the structure of the return value of `forward` of your module when reporting this issue (e.g. list, dict, iterable).",
        ),
        0.9,
    ),
    S(
        "ddp-params-without-grad-on-rank",
        (r"did not receive grad for rank [0-9]",),
        r"Parameter(?:s| indices) which did not receive grad for rank (?P<rank>\d+)",
        "parameters that got no gradient on this rank (DDP lists them): the forward pass on "
        "that rank skipped them (a rank- or data-dependent branch), so the reduction of the "
        "previous iteration could not finish.",
        "SOFTWARE",
        "crash",
        "fatal",
        "Find the branch that skips the listed parameters on that rank (a batch without "
        "targets, a frozen or conditional head) and make them take part in the loss, or pass "
        "find_unused_parameters=True to DistributedDataParallel.",
        ("Parameter indices which did not receive grad for rank 3: 444 445 446 447 448 449",),
        0.95,
    ),
    S(
        "zero-param-reduced-twice",
        (r"has already been reduced\. +Gradient computed twice",),
        r"The parameter (?P<param>\d+) has already been reduced\. +Gradient computed twice",
        "a parameter whose gradient DeepSpeed ZeRO was asked to reduce twice in one step: "
        "re-entrant activation checkpointing (or a parameter used twice, a shared or "
        "Siamese module) produced a second gradient for a partition already reduced.",
        "SOFTWARE",
        "crash",
        "fatal",
        "Use non-reentrant gradient checkpointing (use_reentrant=False) or disable it, or "
        "drop to ZeRO stage 1 for models that reuse a module; the parameter id names it.",
        (
            "[default0]:AssertionError: The parameter 388 has already been reduced.             Gradient computed twice for this partition.             Multiple gradient reduction is currently not supported",
        ),
        0.9,
    ),
    S(
        "nccl-duplicate-gpu",
        (r"Duplicate GPU detected : rank",),
        r"Duplicate GPU detected : rank (?P<a>\d+) and rank (?P<b>\d+) both on CUDA device "
        r"(?P<busid>[0-9a-fA-F]+)",
        "two ranks opened the same GPU: NCCL refuses a communicator with two ranks on one "
        "device (invalid usage). The processes were not pinned to their own GPU (the local "
        "rank unused, CUDA_VISIBLE_DEVICES the same for all, a hard-coded device).",
        "SOFTWARE",
        "crash",
        "fatal",
        "Pin each process to its local rank's GPU (torch.cuda.set_device(local_rank), "
        "hvd.local_rank(), or one CUDA_VISIBLE_DEVICES entry per process) and check the "
        "launcher gives every process its own GPU.",
        (
            "[1,2]<stdout>:gpu-c03:29880:30398 [0] init.cc:497 NCCL WARN Duplicate GPU detected : rank 2 and rank 0 both on CUDA device 1000",
        ),
        0.95,
        shared=True,  # the launch configuration of every process, not one rank's fault
    ),
    S(
        "binary-file-read-as-text",
        (r"can't decode byte 0x80 in position 0: invalid start byte",),
        r"codec can't decode byte 0x80 in position 0: invalid start byte",
        "A binary file was read as text: its first byte 0x80 is how a pickle (and other binary "
        "formats) starts, so the file was opened without 'rb' or a text reader was pointed at "
        "a binary file.",
        "SOFTWARE",
        "crash",
        "fatal",
        "Open the file in binary mode ('rb') where it is loaded, or point the text reader at "
        "the text file it expects.",
        (
            "UnicodeDecodeError: 'utf-8' codec can't decode byte 0x80 in position 0: invalid start byte",
        ),
        0.65,
    ),
    S(
        "undefined-symbol",
        (r"undefined symbol: ",),
        r"undefined symbol: (?P<symbol>\S+)",
        "A compiled extension does not match the library it links against (mixed versions/wheels).",
        "SOFTWARE",
        "crash",
        "fatal",
        "Rebuild the extension against the installed framework, or remove the duplicate library (pip list | grep nvidia).",
        (
            "ImportError: /home/runner/.local/lib/python3.10/site-packages/torch/lib/libtorch_cuda.so: undefined symbol: ncclMemFree",
        ),
        0.9,
    ),
    # --- symptoms: a process ended (no category; the verdict's crash-or-hang rule) -------
    S(
        "tcpstore-server-gone",
        (
            r"recvValue failed on SocketImpl\(",
            r"maybe TCPStore server has shut down too early",
        ),
        r"recvValue failed on SocketImpl\([^)]*remote=\[(?P<peer>[^\]]+)\]|maybe TCPStore server has shut down too early",
        "A process lost its connection to the rendezvous store (the store's server, in rank 0's "
        "process or the launcher on the first node, closed it): that process or node ended, "
        "or the connection to it broke.",
        None,
        None,
        "error",
        "Read the first node's rank 0 (or its launcher) at that time: why it ended; then the "
        "network path to it.",
        (
            "[W1009 03:54:49.636977195 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=15, addr=[a4b19e07c2d8-node-0-1.a4b19e07c2d8.kubeflow-user-example-com.svc.cluster.local]:60560, remote=[a4b19e07c2d8-node-0-0.a4b19e07c2d8.kubeflow-user-example-com.svc.cluster.local]:29500): failed to recv, got 0 bytes Exception raised from recvBytes at /pytorch/torch/csrc/distributed/c10d/Utils.hpp:678 (most recent call first): frame #0: c10::Error::Error(c10::SourceLocation, std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >) + 0x98 (0x7f0ec5b785e8 in /opt/conda/lib/python3.11/site-packages/torch/lib/libc10.so) frame #1: <unknown function> + 0x5ba8bfe (0x7f0eaa0afbfe in /opt/conda/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so)",
            '[rank87]:[W1104 01:29:53.261611977 ProcessGroupNCCL.cpp:1783] [PG ID 0 PG GUID 0 Rank 87] Failed to check the "should dump" flag on TCPStore, (maybe TCPStore server has shut down too early), with error: Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?',
        ),
        0.35,
    ),
    S(
        "glog-check-failed",
        (r"\*\*\* Check failure stack trace: \*\*\*",),
        r"\*\*\* Check failure stack trace: \*\*\*",
        "A C++ library's CHECK (glog: XLA, TensorFlow, a transport plugin) failed and aborted the "
        "process; the 'Check failed:' line above says what.",
        None,
        "crash",
        "fatal",
        "Read the 'Check failed:' line and the F-level line before it for the condition that failed.",
        ("*** Check failure stack trace: ***",),
        0.3,
    ),
    S(
        "nccl-unique-id-not-published",
        (r"is setting up NCCL communicator and retrieving ncclUniqueId from \[[0-9]+\]",),
        r"\[(?P<waiter>\d+)\] is setting up NCCL communicator and retrieving ncclUniqueId from "
        r"\[(?P<missing>\d+)\]",
        "A rank waited in the store for the NCCL id that the group's first rank publishes when it "
        "creates the communicator, and it never came: that rank had not reached the collective "
        "(still loading, stuck, or gone).",
        None,
        "hang",
        "error",
        "Read the named rank's last lines: what it was doing instead of the first collective "
        "(loading weights or data can outlast the timeout; raise it where the process group is "
        "created).",
        (
            "torch.distributed.DistBackendError: [3] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c1",
        ),
        0.4,
    ),
    S(
        "pyxis-fatal",
        (r"pyxis: +FATAL ERROR:",),
        r"pyxis: +FATAL ERROR:(?P<what>.*)",
        "pyxis (SLURM's container plugin) stopped on a fatal error while preparing the container: "
        "the step does not start.",
        None,
        "crash",
        "fatal",
        "Read the pyxis lines around it for what failed (space in its runtime path, the image).",
        ("slurmstepd: error: pyxis:     FATAL ERROR:Failed to write to output filesystem",),
        0.3,
    ),
    S(
        "xla-rendezvous-stuck",
        (r"rendezvous\.cc:[0-9]+\] This thread has been waiting for ",),
        r"This thread has been waiting for `(?P<what>[^`;]*)",
        "An XLA rendezvous (setting up or running a collective across devices) is still waiting "
        "for threads that have not joined: a process or device of the collective never arrived.",
        None,
        "hang",
        "warning",  # XLA says so after 10 s: only a wait that goes on is a hang
        "Find the process whose devices never joined (each host must run the same collective); "
        "read its last lines.",
        (
            "2026-01-13 17:14:59.920189: E external/xla/xla/service/rendezvous.cc:38] This thread has been waiting for `initialize clique for rank 6; clique=devices=[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]; stream=0; run_id=724296073` for 10 seconds and may be stuck. Expected 8 threads to join the rendezvous, but not all of them arrived on time.",
        ),
        0.4,
    ),
    S(
        "horovod-stalled-ranks",
        (r"Stalled ops:", r"\[missing ranks: [0-9]", r"\[ready ranks: [0-9]"),
        r"(?:Stalled ops:.*?)?(?:\[missing ranks: (?P<missing>[\d, ]+)\]"
        r"|\[ready ranks: (?P<ready>[\d, ]+)\])|Stalled ops:",
        "Horovod's stall check: some ranks submitted a collective and wait for the others, which "
        "never submitted it (the ranks listed as missing, or all but the ready ones).",
        None,
        "hang",
        "error",
        "Read the missing ranks' last lines; if they are alive, compare the tensor names each rank "
        "submits (a name that differs by rank never matches).",
        (
            "[1,0]<stderr>:Stalled ops:HorovodBroadcast_dense_1_bias_0 [missing ranks: 1]",
            "model/model/DistributedAdamOptimizer_Allreduce/HorovodAllreduce_model_model_gradients_AddN_58_0 [ready ranks: 1], ",
        ),
        0.4,
    ),
    S(
        "vllm-shm-broadcast-stalled",
        (r"No available shared memory broadcast block found in [0-9]+ seconds",),
        r"No available shared memory broadcast block found in (?P<s>\d+) seconds",
        "vLLM's engine could not hand work to its workers for a minute: they stopped taking it "
        "(a worker hung, or is compiling or quantizing for that long).",
        None,
        "hang",
        "warning",
        "Dump the workers' stacks (py-spy dump) to see where they wait; if they are compiling, "
        "wait or warm the cache.",
        (
            "(EngineCore_DP1 pid=2318) INFO 04-19 14:44:28 [shm_broadcast.py:681] No available shared memory broadcast block found in 60 seconds. This typically happens when some processes are hanging or doing some time-consuming work (e.g. compilation, weight/kv cache quantization).",
        ),
        0.4,
    ),
    S(
        "tf-collective-deadline-exceeded",
        (r"BaseCollectiveExecutor::StartAbort DEADLINE_EXCEEDED",),
        r"BaseCollectiveExecutor::StartAbort DEADLINE_EXCEEDED",
        "TensorFlow aborted a collective when a call to another worker hit its deadline: that "
        "worker (or the link to it) did not answer.",
        None,
        None,
        "error",
        "Read the other workers' logs at that time; check that every worker started and that the "
        "chief's address in TF_CONFIG is reachable.",
        (
            "2026-03-17 11:10:57.934361: E tensorflow/core/common_runtime/base_collective_executor.cc:249] BaseCollectiveExecutor::StartAbort DEADLINE_EXCEEDED: Deadline Exceeded",
        ),
        0.45,
    ),
    S(
        "openmpi-signal-host",
        (r"\] Signal: [A-Z][a-z]+[a-z ]* \([0-9]+\)",),
        r"\[(?P<host>[A-Za-z][\w.-]*):\d+\] Signal: (?P<signal>[A-Za-z][A-Za-z ]*) \((?P<n>\d+)\)",
        "Open MPI's signal handler reports the signal that ended a process, and on which node.",
        None,
        "crash",
        "fatal",
        "Read that process's own last lines on that node (and the backtrace under this line).",
        ("[dgx-b12:13871] Signal: Segmentation fault (11)",),
        0.3,
    ),
    S(
        "gloo-op-timeout",
        (
            r"Timed out waiting [0-9]+ms for (?:send|recv) operation to complete",
            r"Application timeout caused pair closure",
        ),
        r"Timed out waiting (?P<ms>\d+)ms for (?P<op>send|recv) operation to complete"
        r"|Application timeout caused pair closure",
        "A Gloo operation (a CPU-side collective, barrier or send/recv) waited its whole timeout "
        "for a peer that never took part: the peer is stuck, busy elsewhere, or gone.",
        None,
        "hang",
        "error",
        "Find the peer that did not reach the same operation (its own last lines, a stack dump "
        "with py-spy); raise the timeout only if it was merely slow.",
        (
            "vllm-qwen-72b-instruct  | (VllmWorker rank=0 pid=231) ERROR 03-02 13:45:00 [parallel_state.py:1158] Error ignored in is_in_the_same_node: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:133] Timed out waiting 1800000ms for send operation to complete",
            "(VllmWorkerProcess pid=81) ERROR 05-02 01:30:49 multiproc_worker_utils.py:225] Exception in worker VllmWorkerProcess while processing method start_worker_execution_loop: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation to complete, Traceback (most recent call last):",
            "ERROR 01-19 20:44:06 engine.py:400] RuntimeError: Application timeout caused pair closure",
        ),
        0.4,
    ),
    S(
        "store-wait-timeout",
        (r"wait timeout after [0-9]+ms, keys: ",),
        r"wait timeout after (?P<ms>\d+)ms, keys: (?P<keys>\S+)",
        "A process waited for a key in the rendezvous store that another process was to set and "
        "never did (that process is stuck, slower by more than the timeout, or gone).",
        None,
        "hang",
        "error",
        "Find the process that sets that key (the key names the group and the step) and read "
        "its last lines; raise the timeout only if it was merely slow.",
        (
            "[rank0]: torch.distributed.DistStoreError: wait timeout after 300000ms, keys: /broadcast_from/0/75465",
        ),
        0.4,
    ),
    S(
        "orte-lost-daemon",
        (r"ORTE has lost communication with its daemon located on node",),
        r"ORTE has lost communication with its daemon located on node",
        "Open MPI's mpirun lost the daemon it runs on a node (the node went down, rebooted or "
        "ran out of memory, or its TCP connection broke) and terminates the job.",
        None,
        "crash",
        "fatal",
        "Check the node named below it (or in the scheduler's log): uptime, kernel log, memory; "
        "then the network between it and the launcher.",
        (" ORTE has lost communication with its daemon located on node:",),
        0.3,
    ),
    S(
        "orte-remote-daemon-node",
        (r"Remote daemon: \[\[[0-9]+,[0-9]+\],[0-9]+\] on node ",),
        r"Remote daemon: \[\[\d+,\d+\],\d+\] on node (?P<host>[\w.-]+)",
        "Open MPI's mpirun lost its daemon on this node (the node went down, rebooted or ran "
        "out of memory, or its TCP connection broke) and terminates the job.",
        None,
        "crash",
        "fatal",
        "Check that node: uptime, kernel log, memory; then the network to it.",
        ("  Remote daemon: [[43015,0],20] on node tf-bert-tok-lr-5e-6-fp32-1568214407-worker-19",),
        0.3,
    ),
    S(
        "sge-commlib-read-error",
        (r"commlib error: got read error \(closing ",),
        r'commlib error: got read error \(closing "(?P<host>[\w.-]+)/',
        "Grid Engine lost the connection to a task's shepherd on a node (the node went down, or "
        "the connection broke): the task on it is gone.",
        None,
        "crash",
        "error",
        "Check the node named: uptime, kernel log, the execd's messages file.",
        (
            'error: commlib error: got read error (closing "ip-10-41-7-23.ec2.internal/shepherd_ijs/1")',
        ),
        0.3,
    ),
    S(
        "cray-mpich-abort",
        (r"MPICH ERROR \[Rank [0-9]+\] \[job id ",),
        r"MPICH ERROR \[Rank (?P<rank>\d+)\] \[job id [^\]]*\] \[[^\]]*\] \[(?P<host>[\w.-]+)\] - Abort",
        "A rank called MPI_Abort (Cray MPICH names its rank and node): that rank failed first "
        "and took the job down.",
        None,
        "crash",
        "fatal",
        "Read that rank's own lines just before this one for why it aborted.",
        (
            "2047: MPICH ERROR [Rank 2047] [job id 51274906.0] [Fri Aug 21 22:45:13 2026] [nid002817] - Abort(1) (rank 2047 in comm 432): application called MPI_Abort(comm=0xC4000001, 1) - process 2047",
        ),
        0.3,
    ),
    S(
        "cuda-devices-unavailable",
        (r"cudaErrorDevicesUnavailable", r"CUDA-capable device\(s\) is/are busy or unavailable"),
        r"cudaErrorDevicesUnavailable|CUDA-capable device\(s\) is/are busy or unavailable",
        "CUDA could not open the GPU this process was given: another process holds it in "
        "exclusive compute mode, or the GPU is in a bad state.",
        None,
        None,
        "error",
        "nvidia-smi on that node: compute mode, processes on the GPU, and its health (Xid "
        "lines in the kernel log); give each rank its own GPU.",
        (
            "2047: cudaSetDevice(cuda_device_id) error( cudaErrorDevicesUnavailable): CUDA-capable device(s) is/are busy or unavailable /global/u1/u/user1/E3SM/E3SM_SRC1/externals/ekat/extern/kokkos/core/src/Cuda/Kokkos_Cuda_Instance.cpp:544",
        ),
        0.5,
        local=True,
    ),
    S(
        "deepspeed-launcher-exit",
        (r"\] exits with return code = ",),
        r"(?:'--local_rank=(?P<local_rank>\d+)'.*)?\] exits with return code = (?P<exitcode>-?\d+)",
        "The deepspeed launcher reports that one of its worker processes ended with a non-zero "
        "return code and kills the others; --local_rank names that worker on its node. A "
        "negative code is the signal that killed it: -9 (SIGKILL) is most often the host's OOM "
        "killer (CPU offload, data-loader workers, pinned buffers), -7 a bus error.",
        None,
        "crash",
        "fatal",
        "Read that worker's own output above this line for its error; for -9 check the node's "
        "kernel log (dmesg) for the OOM killer, `sacct` MaxRSS or the container's memory limit, "
        "and the 'CPU Virtual Memory' lines DeepSpeed prints.",
        (
            "[2024-03-02 14:10:05,377] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python3', '-u', 'train.py', '--local_rank=6', '--deepspeed', 'ds_config_zero3_offload.json'] exits with return code = -9",
            "[2024-05-20 09:14:31,611] [ERROR] [launch.py:321:sigkill_handler] ['/data/user/gpt-neox/.venv/bin/python', '-u', 'train.py', '--local_rank=3', '--deepspeed_config', 'eyJ0cmFpbl9iYXRjaF9zaXplIjogMTZ9', '--megatron_config', 'eyJ0cmFpbl9iYXRjaF9zaXplIjogMTZ9'] exits with return code = 1",
        ),
        0.3,
    ),
    S(
        "shell-job-killed",
        (r"[0-9] Killed  ",),
        r"(?P<pid>\d+) (?P<how>Killed) {2,}(?P<cmd>\S.*)",
        "The shell (a batch or container entry script) reports that the command it ran was "
        "killed: 'Killed' is SIGKILL, most often the kernel's or the container's OOM killer.",
        None,
        "crash",
        "fatal",
        "Check the node's kernel log (dmesg) for the OOM killer and the job's or container's "
        "memory limit (`sacct` MaxRSS, the cgroup's memory.events).",
        (
            "/pai/bootstrap/docker_bootstrap.sh: line 159:   943 Killed                  /usr/bin/python3 Res-click-adCategory.py",
            "/var/spool/slurmd/job06243/slurm_script: line 28: 47218 Killed                  python3 main.py --prop hform --epochs 400 --lr_milestones 50 100 200 --gamma 0.25 --normalizing_const_AO 10000.0 --lr_generator 0.001 --lr_conv 0.001",
        ),
        0.3,
    ),
    S(
        "srun-task-failed",
        (r"srun: error: [^ \n]+: task [0-9]+: ",),
        r"srun: error: (?P<host>[\w.-]+): task (?P<rank>\d+): (?P<how>Killed|Out Of Memory|Aborted"
        r"|Segmentation fault|Bus error|Exited with exit code \d+)",
        "srun reports that one task of the step ended (killed, out of memory, aborted or a "
        "non-zero exit): the task index is the rank that failed, on that node.",
        None,
        "crash",
        "fatal",
        "Read that task's own output just before this line for what ended it (`srun -l` "
        "prefixes every line with its task index); for Killed/Out Of Memory check `sacct -j "
        "<job> -o MaxRSS,ReqMem`.",
        (
            "srun: error: hpcn05: task 0: Killed",
            "srun: error: gpu-r07: task 0: Aborted (core dumped)",
        ),
        0.3,
    ),
    S(
        "mpirun-rank-signal",
        (r"mpirun noticed that process rank [0-9]+ with PID",),
        r"mpirun noticed that process rank (?P<rank>\d+) with PID \d+ on node (?P<host>[\w.-]+)"
        r" exited on signal (?P<signal>\d+)(?: \((?P<how>[^)]+)\))?",
        "mpirun reports the first rank that died of a signal: that rank, on that node, failed "
        "first and mpirun aborted the others (signal 9 is the OOM killer or the scheduler, 6 an "
        "abort, 11 a segfault).",
        None,
        "crash",
        "fatal",
        "Read that rank's own output (mpirun --tag-output prefixes it [1,N]) for what ended it; "
        "for signal 9 check the node's kernel log for the OOM killer (dmesg, sacct MaxRSS).",
        (
            "mpirun noticed that process rank 7 with PID 0 on node gpu-k11 exited on signal 9 (Killed).",
        ),
        0.3,
    ),
    S(
        "rocm-hw-exception",
        (r"HW Exception by GPU node-[0-9]+ \(Agent handle: ",),
        r"HW Exception by GPU node-(?P<node>\d+) \(Agent handle: \w+\) reason ?:(?P<reason>.*)",
        "The ROCm runtime reports that a GPU stopped the process's queue (reason 'GPU Hang': "
        "the GPU's scheduler found a queue that no longer progressed) and aborts the process; "
        "a kernel that never finishes and a failing GPU read the same.",
        None,
        "crash",
        "fatal",
        "Read the kernel log of that node at that time (amdgpu ring timeouts, RAS hardware "
        "errors, a GPU reset); if the same GPU hangs again, drain it and run the vendor's "
        "diagnostics.",
        ("HW Exception by GPU node-4 (Agent handle: 0x1ebc04e0) reason :GPU Hang",),
        0.3,
    ),
    S(
        "mpich-hydra-bad-termination",
        (r"=   PID [0-9]+ RUNNING AT ",),
        r"=   PID (?P<pid>\d+) RUNNING AT (?P<host>[\w.-]+)",
        "MPICH's (Hydra) mpiexec reports the process that terminated badly and the host it ran "
        "on, then cleans up the others; the EXIT CODE line below it says how it ended.",
        None,
        "crash",
        "fatal",
        "Read that process's own output for its error; with exit code 9 (SIGKILL) check the "
        "host's kernel log for the OOM killer.",
        ("=   PID 47316 RUNNING AT ws-desk07",),
        0.3,
    ),
    S(
        "mpich-hydra-exit-code",
        (r"=   EXIT CODE: [0-9]+",),
        # Hydra prints the number of the signal that killed the process (9: SIGKILL) as its
        # exit code; a process's own exit status would be 0-255 too, but 9 is SIGKILL's
        r"=   EXIT CODE: (?:(?P<signal>9)|(?P<code>\d+))\b",
        "MPICH's (Hydra) mpiexec gives the exit code of the process that terminated badly: 9 is "
        "SIGKILL (most often the kernel's OOM killer), 134 an abort (128 + 6), 139 a segfault.",
        None,
        "crash",
        "fatal",
        "For 9 check the host's kernel log (dmesg) for the OOM killer and the job's memory "
        "limit; otherwise read the process's own last lines.",
        ("=   EXIT CODE: 9",),
        0.3,
    ),
    S(
        "nccl-tests-failure",
        (r"NCCL failure \S+:[0-9]+ '", r"Test CUDA failure \S+:[0-9]+"),
        r"(?:Test )?NCCL failure (?P<src>\S+) '(?P<why>[^']*)'|Test CUDA failure (?P<csrc>\S+:\d+)",
        "nccl-tests stopped on an NCCL (or CUDA) error and exits: the quoted text is only "
        "NCCL's error class (some releases print 'internal error' whatever failed), the NCCL "
        "WARN line above it names the call that failed; a CUDA failure is the device's own "
        "(busy or unavailable: look at the kernel log for that GPU).",
        None,
        "crash",
        "fatal",
        "Rerun with NCCL_DEBUG=WARN (or INFO) and read the first WARN of that host; if none "
        "explains it, try another NCCL release.",
        (
            "gpu-d03: Test NCCL failure common.cu:1012 'internal error - please report this issue to the NCCL developers / '",
            "gpu-r05: Test NCCL failure common.cu:343 'unhandled cuda error'",
            "Test CUDA failure common.cu:1007",
            "NCCL failure common.cu:874 'unhandled system error'",
        ),
        0.3,
    ),
    S(
        "mpirun-first-nonzero-exit",
        (r"Process name: \[\[[0-9]+,[0-9]+\],[0-9]+\]",),
        r"Process name: \[\[\d+,\d+\],(?P<rank>\d+)\]",
        "mpirun names the first process that exited with a non-zero status (its rank is the "
        "last number of [[job,1],rank]): that rank failed first and the others were aborted.",
        None,
        "crash",
        "fatal",
        "Read that rank's own output (mpirun --tag-output prefixes it [1,N]) for the error that "
        "ended it, above any 'has been shut down' echoes of the other ranks.",
        ("  Process name: [[41207,1],0]",),
        0.3,
    ),
    S(
        "spawn-process-signal",
        (r"process [0-9]+ terminated with signal SIG[A-Z]+",),
        r"process (?P<rank>\d+) terminated with signal (?P<signal>SIG[A-Z]+)",
        "torch.multiprocessing.spawn reports that one spawned worker died of a signal (SIGKILL: "
        "the OOM killer or the scheduler; SIGABRT: an abort; SIGSEGV: a segfault); the index "
        "is the worker's spawn index, its rank on a single machine.",
        None,
        "crash",
        "fatal",
        "Read that worker's own last lines for what ended it; for SIGKILL check the kernel log "
        "for the OOM killer (dmesg, journalctl -k) and the job's memory limit.",
        (
            "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal SIGKILL",
            "Exception: process 1 terminated with signal SIGKILL",
        ),
        0.3,
    ),
    S(
        "exit-code-by-signal",
        (r"exit code [0-9]+ \(interrupted by signal [0-9]+",),
        r"exit code (?P<code>\d+) \(interrupted by signal (?P<signal>\d+): (?P<how>\w+)\)",
        "The process was ended by a signal (IDE/launcher wording; exit code 128 + the signal: "
        "137 is SIGKILL, most often the kernel OOM killer).",
        None,
        "crash",
        "fatal",
        "For SIGKILL check the kernel log for the OOM killer and watch the process's resident "
        "memory over the run; other signals: read the last lines before it.",
        ("Process finished with exit code 137 (interrupted by signal 9: SIGKILL)",),
        0.3,
    ),
    S(
        "process-ended",
        (
            r"Aborted \(core dumped\)",
            r"terminate called (?:after throwing|without an active)",
            r"uncaught exception during training",
            r"Your application will now abort\(\)",
        ),
        r"(?P<how>Aborted \(core dumped\)|terminate called|uncaught exception|will now abort)",
        "A process ended: the C++ runtime aborted it, the shell reports a core dump, or the "
        "launcher reports an uncaught exception: the failure is a crash, its cause is in the "
        "lines before.",
        None,
        "crash",
        "fatal",
        "Read the lines just before it in the same process's output for the error that ended it.",
        (
            "Aborted (core dumped)",
            "terminate called after throwing an instance of 'std::runtime_error'",
            "terminate called without an active exception",
            "ERROR - container_support.training - uncaught exception during training: : Unable to connect to endpoint",
            "Your application will now abort().",
        ),
        0.3,
    ),
    S(
        "live-process-stack",
        (r"#[0-9]+ +0x[0-9a-f]+ in [A-Za-z_][A-Za-z0-9_@.]* \(",),
        r"#\d+\s+0x[0-9a-f]+ in (?P<func>[A-Za-z_][\w@.]*) \(",
        "A thread's stack taken from a process that was still running (gdb attached to it): "
        "the process had not exited, it was waiting.",
        None,
        "hang",
        "warning",
        "Read where the threads wait: a socket or a condition variable in NCCL's proxy or "
        "network thread is a lost peer connection, a collective kernel a peer that never "
        "joined.",
        (
            "#0  0x00007f7a2620c965 in pthread_cond_wait@@GLIBC_2.3.2 () from /usr/lib64/libpthread.so.0",
        ),
        0.1,
    ),
    S(
        "nccl-error-return",
        (r"INFO \S+\.(?:cc|cu|h|c):[0-9]+ -> [1-9]",),
        r"INFO (?P<src>\S+\.(?:cc|cu|h|c)):(?P<at>\d+) -> (?P<code>[1-9]\d*)",
        "NCCL returned an error code to its caller (1 unhandled CUDA error, 2 system error, "
        "3 internal error, 4 invalid argument, 5 invalid usage, 6 remote error): the trace "
        "walks up to the framework, which raises it and the process ends. The cause is the "
        "first NCCL WARN line above the trace.",
        None,
        "crash",
        "error",
        "Read the first NCCL WARN line above the trace in the same process's output: it names "
        "the call that failed.",
        (
            "gpuq-st-p4d24xlarge-3:428021:428235 [1] NCCL INFO misc/socket.cc:535 -> 6",
            "gpuq-st-p4d24xlarge-3:428021:428235 [1] NCCL INFO proxy.cc:991 -> 6",
            "gpu-q-144-103:82123:82182 [0] INFO bootstrap.cu:259 -> 2",
        ),
        0.2,
    ),
)

BY_ID: dict[str, Signature] = {s.id: s for s in CATALOGUE}
# prefilter pattern → signature, in catalogue order (the scanner's match ids index this)
SIG_PATTERNS: tuple[tuple[str, Signature], ...] = tuple(
    (p, s) for s in CATALOGUE for p in s.prefilter
)


def match(
    message: str, sigs: Sequence[Signature] | None = None
) -> tuple[Signature, dict[str, str]] | None:
    """The first signature (catalogue order) whose regex matches ``message``."""
    for s in sigs if sigs is not None else CATALOGUE:
        m = s.rx.search(message)
        if m:
            return s, {k: v for k, v in m.groupdict().items() if v is not None}
    return None


# --- when no signature knows the failure: the exception's type and message decide ---------


@dataclass(frozen=True)
class ExceptionRule:
    types: tuple[str, ...]  # exception class names (last dotted part); () = any type
    message: str  # regex searched in the message; "" = any message
    category: str
    confidence: float
    why: str
    rx: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rx", lazy_compile(self.message))


E = ExceptionRule
_STORE = (
    r"\b(?:s3|S3|gs://|GCS|gcsfs|blob\.core\.windows|boto|botocore|[Cc]url|AccessDenied|NoSuchKey"
    r"|endpoint URL)\b"
)
EXCEPTION_RULES: tuple[ExceptionRule, ...] = (
    # datasets checks free space itself before preparing: "OSError: Not enough disk space."
    E(
        (),
        r"No space left on device|\[Errno 28\]|ENOSPC|Not enough disk space",
        "STORAGE_IO",
        0.85,
        "ENOSPC: disk full",
    ),
    E(
        (),
        r"Input/output error|\[Errno 5\]|Stale file handle|\[Errno 116\]|[Dd]isk quota exceeded|"
        r"\[Errno 122\]|Read-only file system|\[Errno 30\]|\[Errno 70\] Communication error on send",
        "STORAGE_IO",
        0.8,
        "EIO/ESTALE/EDQUOT/EROFS/ECOMM: the file system failed",
    ),
    E(
        (),
        r"(?:File|file) .* cannot be opened|[Ff]ailed to (?:save|write|open) (?:the )?checkpoint|"
        r"PytorchStreamWriter failed|unexpected pos \d+ vs",
        "STORAGE_IO",
        0.7,
        "a checkpoint file could not be written/opened",
    ),
    E((), _STORE, "STORAGE_IO", 0.65, "an object-store request failed"),
    E(
        ("FSTimeoutError",),
        "",
        "STORAGE_IO",
        0.65,
        "a remote file system (fsspec: S3, GCS, HTTP) did not answer in time",
    ),
    E(
        ("OSError",),
        r"\[Errno 107\] Transport endpoint is not connected",
        "STORAGE_IO",
        0.6,
        "ENOTCONN on a file: a FUSE mount (Drive, s3fs, gcsfuse, blobfuse) lost its daemon",
    ),
    E(
        ("MemoryError", "OutOfMemoryError", "ResourceExhaustedError"),
        "",
        "OOM",
        0.8,
        "an out-of-memory exception",
    ),
    E((), r"Cannot allocate memory|\[Errno 12\]", "OOM", 0.6, "ENOMEM"),
    E(
        (),
        r"terminated with signal SIGKILL",
        "OOM",
        0.55,
        "a worker killed by SIGKILL, most often the kernel OOM killer",
    ),
    E(("FloatingPointError",), "", "NUMERICAL", 0.7, "a floating-point (NaN/Inf) check"),
    E(
        (
            "UnidentifiedImageError",
            "DecompressionBombError",
            "JSONDecodeError",
            "UnicodeDecodeError",
            "ArrowInvalid",
            "ArrowTypeError",
            "ParserError",
            "EmptyDataError",
            "BadZipFile",
            "ReadError",
            "DatasetGenerationError",
            "DatasetGenerationCastError",
            "CastError",
            "LibsndfileError",
            "DECORDError",
        ),
        "",
        "DATA",
        0.65,
        "a sample or dataset file could not be decoded",
    ),
    E(
        ("KeyError", "IndexError", "ValueError", "TypeError", "RuntimeError"),
        r"collate|__getitem__|[Dd]ata[Ll]oader worker|in DataLoader|default_collate",
        "DATA",
        0.55,
        "an exception raised while loading/collating samples",
    ),
    E(("RendezvousClosedError",), "", "INFRA", 0.6, "the elastic rendezvous was closed"),
    E(("RendezvousTimeoutError",), "", "INFRA", 0.55, "not every node joined the rendezvous"),
    E(
        (
            "DistNetworkError",
            "RendezvousConnectionError",
            "ConnectionRefusedError",
            "ConnectionResetError",
            "ConnectionAbortedError",
        ),
        "",
        "NETWORK",
        0.55,
        "a connection between processes failed",
    ),
    E(("PermissionError",), "", "INFRA", 0.5, "EACCES: permissions of a path or device"),
    # An exception no rule above knows, of any type: what its message says of the failure
    # (its words, not its type — a ValueError or RuntimeError raised by a library's own
    # check), before the type alone calls it a programming error.
    E(
        (),
        r"[Oo]ut of (?:device |GPU |host )?memory|\bOOM\b|RESOURCE_EXHAUSTED|"
        r"[Ff]ailed to allocate|[Mm]emory (?:exhausted|limit exceeded)",
        "OOM",
        0.6,
        "the message says memory ran out",
    ),
    E(
        (),
        r"\b(?:NaN|nan|NAN)s?\b|(?<![\w.])-?(?:inf|Inf|Infinity)\b|not finite|[Nn]on-?finite",
        "NUMERICAL",
        0.55,
        "the message names NaN/Inf values",
    ),
    E(
        (),
        r"[Cc]annot identify|[Uu]nknown (?:file )?format|[Ff]ailed to decode|[Cc]ould not decode|"
        r"[Uu]nable to decode|[Mm]alformed|[Ii]nvalid (?:image|audio|header|magic)|"
        r"truncated (?:image|file|record|sample)",
        "DATA",
        0.55,
        "the message says an input could not be decoded",
    ),
    E(
        (),
        r"[Cc]onnection (?:refused|reset|timed out|closed by)|[Nn]etwork is unreachable|"
        r"[Nn]o route to host|[Nn]ame or service not known|[Tt]emporary failure in name resolution",
        "NETWORK",
        0.5,
        "the message says a connection failed",
    ),
    E(
        (
            "ModuleNotFoundError",
            "ImportError",
            "AttributeError",
            "TypeError",
            "NameError",
            "SyntaxError",
            "AssertionError",
            "NotImplementedError",
            "UnboundLocalError",
            "ZeroDivisionError",
            "KeyError",
            "IndexError",
            "ValueError",
            "RecursionError",
            "FileNotFoundError",
        ),
        "",
        "SOFTWARE",
        0.5,
        "a programming/configuration error in the training code or its libraries",
    ),
    E((), "", "SOFTWARE", 0.4, "an uncaught exception no rule knows"),
)


def exception_rule(etype: str, message: str) -> ExceptionRule:
    """The first rule of ``EXCEPTION_RULES`` that fits (the last rule fits everything)."""
    short = etype.rsplit(".", 1)[-1]
    for r in EXCEPTION_RULES:
        if r.types and short not in r.types:
            continue
        if r.message and not r.rx.search(message):
            continue
        return r
    return EXCEPTION_RULES[-1]
