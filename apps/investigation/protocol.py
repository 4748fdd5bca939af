"""The investigation protocol as data: what each phase asks, what people record there,
the known fixes per failure category, and the prevention checklists.

Shown on the incident page beside that phase's findings; the checklists seed the
prevention action items.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PhaseGuide:
    phase: str
    goal: str
    questions: tuple[str, ...]
    record: str


PHASES: dict[str, PhaseGuide] = {
    "triage": PhaseGuide(
        phase="triage",
        goal="Is this urgent? What is broken?",
        questions=(
            "Is training still running? (yes → performance investigation; no → crash investigation)",
            "If it crashed, when: immediately (configuration or environment), after warm-up "
            "(numerical instability or resource exhaustion), or after hours or days "
            "(hardware failure or a rare race)?",
            "What are the symptoms: all ranks crashed (collective failure or shared resource), "
            "one rank crashed (local hardware or OOM), the job hangs (deadlock or straggler), "
            "or it is slow (performance regression)?",
            "Is the loss still decreasing? Is the step time stable?",
        ),
        record="Severity and category; upload every rank's logs and the metrics.",
    ),
    "localization": PhaseGuide(
        phase="localization",
        goal="Where is the problem?",
        questions=(
            "Did training ever start? If not: CUDA, NCCL, MASTER_ADDR/PORT, WORLD_SIZE, "
            "a writable checkpoint directory.",
            "Which ranks and which hosts: is it all of them, a node, or one rank?",
            "Which rank signalled first, and which only observed another rank's failure?",
            "Per rank: is compute time the same everywhere while communication differs?",
            "If it stalled: has the loss ever decreased; did the learning rate, batch size "
            "or data change?",
        ),
        record="The ranks and hosts involved, and the hypotheses to test.",
    ),
    "isolation": PhaseGuide(
        phase="isolation",
        goal="What exactly is failing?",
        questions=(
            "Bisect: at what scale, batch size or layer does it start to fail?",
            "Does compute alone work? Communication alone (nccl-tests on affected vs "
            "unaffected nodes)? Memory allocation alone? Data loading alone?",
            "Is the slow path always through the same node, switch or link?",
            "For each hypothesis: what would we expect if it were true, and what did the "
            "test show?",
        ),
        record="Each hypothesis marked supported, refuted or inconclusive, with the test "
        "that was run, its result and evidence.",
    ),
    "root_cause": PhaseGuide(
        phase="root_cause",
        goal="Why is it failing?",
        questions=(
            "Why did the symptom happen? Ask why again of each answer, about five times.",
            "Is each answer backed by evidence (a log line, a metric, a test result)?",
            "Which events preceded the failure: LR changes, batch-size changes, checkpoint "
            "saves, evaluation?",
            "What contributed without being the cause?",
        ),
        record="A Five Whys chain; its last level is the root cause. Contributing factors "
        "beside it.",
    ),
    "resolution": PhaseGuide(
        phase="resolution",
        goal="How do we fix it and prevent it?",
        questions=(
            "What is the immediate fix, and what is the structural one?",
            "Compared with the baseline over several trials, is the problem gone, and did "
            "anything get worse (step time, throughput, peak memory)?",
            "Which checklist item would have caught this before the run?",
        ),
        record="The fix applied, its verification (FIXED / NOT_FIXED / REGRESSION / "
        "INCONCLUSIVE) and the prevention action items with owners and due dates.",
    ),
}


# Known fixes per failure category: (title, detail).
FIXES: dict[str, dict[str, list[tuple[str, str]]]] = {
    "OOM": {
        "immediate": [
            (
                "Reduce the batch size",
                "Halve the micro-batch size; keep the global batch with gradient accumulation.",
            ),
            ("Enable activation (gradient) checkpointing", "Trade recomputation for memory."),
            ("Use mixed precision", "bf16/fp16 autocast with a gradient scaler."),
        ],
        "structural": [
            ("Shard optimizer state and parameters", "FSDP or ZeRO-3."),
            ("Offload activations", "Offload activations to CPU memory."),
            ("Model parallelism", "Split the model across GPUs (tensor or pipeline)."),
        ],
    },
    "NETWORK": {
        "immediate": [
            (
                "Drain the affected node or link",
                "Exclude the host and resume from the last checkpoint.",
            ),
            (
                "Raise the collective timeout while investigating",
                "e.g. a 30-minute NCCL timeout, so one slow rank does not kill the job.",
            ),
        ],
        "structural": [
            ("Periodic nccl-tests health checks", "Alert when bus bandwidth drops >20 %."),
            ("Monitor link errors", "Replace optics proactively above a CRC error rate."),
        ],
    },
    "TIMEOUT": {
        "immediate": [
            ("Increase the timeout", "e.g. NCCL timeout 1800 s."),
            ("Find and drain the straggler", "Compare per-rank step time; exclude the slow node."),
        ],
        "structural": [
            ("Balance the workload", "Equal batch distribution across ranks."),
            ("Straggler detection", "Monitor per-rank timing."),
            ("Asynchronous data loading", "Several workers with prefetch."),
        ],
    },
    "DATA": {
        "immediate": [
            (
                "Restart from the last checkpoint with the data loader fixed",
                "Skip or repair the shard that stalled.",
            ),
        ],
        "structural": [
            ("Prefetch and balance shards", "Data loader workers with prefetch; even sharding."),
            ("Data-loader timeouts", "Fail fast with the shard name instead of hanging."),
        ],
    },
    "NUMERICAL": {
        "immediate": [
            ("Reduce the learning rate", "e.g. x0.1, restart from the last good checkpoint."),
            ("Add gradient clipping", "clip the global grad norm at 1.0."),
            ("Dynamic loss scaling", "A gradient scaler with back-off."),
        ],
        "structural": [
            ("Review initialisation", "Initialisation suited to the depth."),
            ("Add normalisation", "Normalise between layers."),
            ("Numerically stable attention", "Guards against overflow in attention."),
        ],
    },
    "HARDWARE": {
        "immediate": [
            ("Drain the faulty GPU or node", "Exclude it and resume from the last checkpoint."),
        ],
        "structural": [
            ("Automatic node health checks", "Run GPU diagnostics before jobs start."),
            ("Automatic restart on failure", "Resume from checkpoint on another node."),
        ],
    },
    "STORAGE_IO": {
        "immediate": [
            ("Retry the checkpoint write elsewhere", "Free space or use another path."),
        ],
        "structural": [
            ("Plan checkpoint storage capacity", "Alert before the volume fills."),
            ("Asynchronous checkpointing", "Do not block training on storage."),
        ],
    },
    "PERFORMANCE": {
        "immediate": [
            ("Enable compute/communication overlap", "e.g. DDP bucket_cap_mb=25."),
            ("Check thermal throttling", "Monitor GPU temperature and clocks."),
        ],
        "structural": [
            ("Profile and optimise", "Find the bottleneck with a profiler."),
            ("Tune the bucket size", "Measure several sizes."),
            ("Enable TF32/bf16", "Mixed precision training."),
        ],
    },
}
# Shapes map onto the table when the category is unknown.
SHAPE_TO_CATEGORY = {"slow": "PERFORMANCE", "hang": "TIMEOUT", "diverge": "NUMERICAL"}


def fixes_for(category: str | None, shape: str | None = None) -> dict[str, list[tuple[str, str]]]:
    """Known immediate and structural fixes for a category (falls back on the shape)."""
    key = (category or "").upper()
    if key not in FIXES:
        key = SHAPE_TO_CATEGORY.get((shape or "").lower(), "")
    return FIXES.get(key, {})


CHECKLISTS: dict[str, tuple[str, ...]] = {
    "pre_training": (
        "Calculate the memory budget: parameters + gradients + optimizer state + activations",
        "Test at small scale first (1-2 GPUs)",
        "Verify data loading does not bottleneck",
        "Check network bandwidth between nodes",
        "Make sure checkpointing works before the long run",
        "Set an appropriate NCCL timeout",
        "Enable NCCL debug logging initially",
    ),
    "scaling_up": (
        "Adjust the learning rate for the new batch size",
        "Extend warm-up proportionally",
        "Monitor for stragglers at the new scale",
        "Profile communication overhead",
        "Verify reproducibility at small scale first",
    ),
    "long_runs": (
        "Enable automatic checkpointing",
        "Set up monitoring and alerting",
        "Configure automatic restart on failure",
        "Plan checkpoint storage capacity",
        "Enable gradient and loss monitoring",
    ),
}
CHECKLIST_LABELS = {
    "pre_training": "Pre-training",
    "scaling_up": "Scaling up",
    "long_runs": "Long runs",
}
