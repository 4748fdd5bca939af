"""The prefilter pattern set: what makes a line worth a precise look.

Rules for adding a pattern (they keep the scan fast and the candidates rare):
- prefer rare literals over regexes; no case-insensitive flag (spell the
  variants), no ``^``/``$`` anchors (block scans of many lines);
- never match routine lines: ``NCCL_IB_TIMEOUT`` env banners (so no
  ``NCCL.*timeout``), ``INFO`` (so no bare ``Inf``), Megatron's
  ``number of nan iterations: 0`` (so NaN only next to a loss value or a
  non-zero count);
- the syntax must be understood by Hyperscan, Python ``re`` and ripgrep alike:
  the benchmark hands the same file to ripgrep (``write_pattern_file``).

``STRUCTURAL`` nominates lines for the structural readers (``parsers/classify.py``);
the one-line messages of the signature catalogue (``signatures.py``) add their own
prefilters. ``PATTERNS`` is both, and the scanner's match id indexes ``PATTERN_SIG``
(``None`` for a structural pattern), so a candidate line knows which signature(s) fired.
"""

from __future__ import annotations

from pathlib import Path

from .signatures import SIG_PATTERNS, Signature

STRUCTURAL: tuple[str, ...] = (
    # PyTorch ProcessGroupNCCL watchdog / heartbeat, all wordings
    r"Watchdog caught",  # also when wrapping cuts the line inside the marker
    r"detected by watchdog at work",
    r"Timeout at NCCL work",
    r"watchdog thread terminated with exception",
    r"NCCL communicator was aborted",
    r"to signal dumping",
    r"to set the dump signal",
    r"dump signal from another rank",
    r"ProcessGroupNCCL preparing to dump debug info",
    r"global timeout from another rank",
    r"Received a dump signal",
    r"Received a timeout signal",
    r"raised the following async exception",
    r"timed out in blocking wait",
    r"taking the entire process down",
    r"Some NCCL operations have failed",
    r"terminated the process after attempting to dump",
    r"Terminating the process after attempting to dump",
    r"watchdog got stuck for",
    r"Heartbeat monitor timed out",
    r"remote error detected from rank",
    r"NCCL Work update periodically",
    # NCCL itself and collective mismatches
    r"NCCL WARN",
    r"NCCL error",
    r"nccl(?:RemoteError|SystemError|UnhandledCudaError|InternalError|InvalidUsage|InvalidArgument)",
    r"Mismatched collective",
    r"Detected mismatch between collectives",
    # GPU, memory, hardware
    r"CUDA out of memory",
    r"HIP out of memory",
    r"OutOfMemoryError",
    r"CUDA error",
    r"NVRM: Xid",
    r"fallen off the bus",
    r"ut of memory: Killed process",  # the kernel's and the memory cgroup's (lower case)
    r"ut of memory: Kill process",  # kernels before 5.x: "Kill process N (name) score …"
    r"invoked oom-killer",
    r"oom-kill event",
    r"ECC error",
    # scheduler / infrastructure
    r"DUE TO (?:TIME LIMIT|PREEMPTION|NODE FAILURE)",
    r"NODE_FAIL",
    r"slurmstepd: error",
    r" CANCELLED AT [0-9]",
    r"Exceeded job memory limit",
    # torchrun / elastic
    r"failed \(exitcode: ",
    r"Root Cause \(first observed failure\)",
    r"(?:time|host|rank) {6}: ",
    r"exitcode  : ",
    r"traceback : Signal [0-9]+ \(SIG",
    r"Sending process [0-9]+ closing signal",
    r"death signal, shutting down workers",
    r"SignalException",
    r"worker group finished",
    # Python-level failures
    r"[A-Za-z][A-Za-z0-9_]*(?:Error|Exception): ",
    r"Traceback \(most recent call last\)",
    r"exception was the direct cause of the following exception",
    r"During handling of the above exception",
    r"terminated with the following error",  # mp.spawn: the child's traceback follows
    r"Segmentation fault",
    r"Fatal Python error",
    # numerical
    r"[Ll]oss[A-Za-z_ ]{0,20}[=:] *-?(?:nan|NaN|NAN|inf|Inf|INF)\b",
    r"number of nan iterations: *[1-9]",
    r"(?:found|[Dd]etected) (?:NaN|nan|Inf|inf)",
    r"non-finite",
    r"NaN or Inf",
    # retries, connections, storage, data loading
    r"[Rr]etrying [0-9]+/[0-9]+",
    r"[Rr]etry [0-9]+/[0-9]+",
    r"[Rr]etry [0-9]+ of [0-9]+",
    r"Retrying \(Retry\(",
    r"Max retries exceeded",
    r"Connection reset by peer",
    r"Connection refused",
    r"Broken pipe",
    r"No route to host",
    r"Input/output error",
    r"No space left on device",
    r"Stale file handle",
    r"Disk quota exceeded",
    r"DataLoader worker",
    r"DataLoader timed out",
    r"AISBatchLoaderError",
    r"[Dd]ata ?[Ll]oader (?:stall|is slow|slow|timeout|timed out|hang)",
    r"[Dd]ata loading (?:stall|is slow|slow|timeout|timed out|hang)",
    r"Read timed out",
    # checkpoints, LR/batch-size changes, evaluation, restarts (correlation precursors;
    # rare lines only: never the per-iteration "learning rate:" field)
    r"aving checkpoint",  # a save begun: "Saving checkpoint …", "saving checkpoint..."
    r"aving latest checkpoint",
    r"uccessfully saved checkpoint",
    r"aved checkpoint",  # a save finished: "Saved checkpoint to …", "saved checkpoint …"
    r"oading checkpoint from",
    r"uccessfully loaded checkpoint",
    r"Saving model checkpoint",
    r"Checkpoint global_step[0-9]+ is ready",
    r", saving model to ",
    r"Restoring states from the checkpoint",
    r"educing learning rate",
    r"Adjusting learning rate of group",
    r"atch size changed to",
    r"validation loss at iteration",
    r"Running Evaluation",
    r"Restarting worker group",
    r"will restart worker group",
    # success markers (a run that finished)
    r"\(SUCCEEDED\)",
    r"[Tt]raining (?:completed|finished|done)",
    r"after training is done",  # Megatron's "[after training is done] datetime: …"
    r"`max_steps=[0-9]+` reached",
)
PATTERNS: tuple[str, ...] = STRUCTURAL + tuple(p for p, _ in SIG_PATTERNS)
PATTERN_SIG: tuple[Signature | None, ...] = (None,) * len(STRUCTURAL) + tuple(
    s for _, s in SIG_PATTERNS
)


# Hyperscan keys each pattern on literals it takes from it, and its literal matcher (FDR)
# keys a literal on its last bytes: it stops at every place the text ends the way one of them
# ends, to confirm. A pattern whose literal ends in a common word ("allocate", in the
# "allocated" of every per-step memory report; "iteration", three times in every Megatron
# iteration line) or has no long literal at all (" in ", ": " after a run of spaces) pays
# that at every routine line: measured, these few cost a quarter of the whole pass over a
# training log. Hyperscan is given a trigger instead: a part of the pattern that ends in a
# rarer word, such that every match of the pattern contains a match of the trigger on the
# same line. The scanner checks the pattern itself (``re``) on the few lines where the
# trigger fires: the same candidates. Python ``re`` and ripgrep read the patterns as they are.
HYPERSCAN_TRIGGERS: dict[str, str] = {
    r"Ran out of memory trying to allocate": r"Ran out of memory trying to",
    r"_bfc\) ran out of memory trying to allocate": r"_bfc\) ran out of memory trying to",
    r"#[0-9]+ +0x[0-9a-f]+ in [A-Za-z_][A-Za-z0-9_@.]* \(": r"#[0-9]+ +0x",
    r"INFO \S+\.(?:cc|cu|h|c):[0-9]+ -> [1-9]": r":[0-9]+ -> [1-9]",
    r"(?:time|host|rank) {6}: ": r"(?:time|host|rank) {6}",
    r"traceback : Signal [0-9]+ \(SIG": r"traceback : Signal",
    r"validation loss at iteration": r"validation loss at",
    r"Expected to have finished reduction in the prior iteration": (
        r"Expected to have finished reduction in the prior"
    ),
}


def write_pattern_file(path: str | Path) -> Path:
    """One pattern per line, for ``rg -f`` (the benchmark's fair comparison)."""
    p = Path(path)
    p.write_text("\n".join(PATTERNS) + "\n", encoding="utf-8")
    return p
