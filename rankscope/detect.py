"""What an artifact is, and which rank/host its name tells, from its name and first bytes."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

KINDS: tuple[str, ...] = (
    "rank_log",
    "metrics",
    "flight_recorder",
    "nccl_tests",
    "nvidia_smi",
    "dmesg",
    "aistore",
    "slurm_job",
    "topology",
    "bisection",
    "other",
)

_RANK_IN_NAME = re.compile(r"(?:^|[^a-z])rank[_-]?(\d+)(?!\d)", re.IGNORECASE)
_FR_NAME = re.compile(r"(?:nccl_trace_rank_|comm_lib_trace_rank_|fr_trace|flight_?recorder)", re.I)
_SLURM_OUT = re.compile(
    r"^(?:error|output|slurm|log|stderr|stdout)[-_](\d+)[-_](?P<node>[\w.-]+?)\.(?:out|err|log|txt)$"
)
_HOST_TOKEN = re.compile(r"(?P<h>(?:[a-z][a-z0-9]*-)+\d+|[a-z]+\d+[a-z0-9-]*)", re.I)


def basename(name: str) -> str:
    return PurePosixPath(name.replace("\\", "/")).name


def rank_from_name(name: str) -> int | None:
    """Global rank when the file name says it (``rank_12.log``, ``nccl_trace_rank_5``)."""
    m = _RANK_IN_NAME.search(basename(name))
    if m:
        return int(m.group(1))
    return None


def host_from_name(name: str) -> str | None:
    """Host/node label from names like ``error-<job>-<node>.out`` or ``dmesg-node-03.log``."""
    base = basename(name)
    m = _SLURM_OUT.match(base)
    if m:
        return m.group("node")
    stem = base.split(".", 1)[0]
    for token in ("dmesg", "kern", "syslog", "nvidia-smi", "nvidia_smi", "topo", "journal"):
        if token in stem.lower():
            rest = re.sub(token, "", stem, flags=re.I).strip("-_.")
            m2 = _HOST_TOKEN.search(rest)
            if m2:
                return m2.group("h")
            # what is left may be a host without digits ("gpubox") or a word ("before", "T")
            return rest if len(rest) >= 3 and rest.lower() not in _NOT_HOSTS else None
    return None


# the first line of every AIS daemon log, whatever the file is called
_AIS_HEADER = re.compile(
    r"\s*(?:Started up|Rotated) at \d{4}/\d\d/\d\d \d\d:\d\d:\d\d, host [\w.-]+, go\d"
)

# words people put in upload names next to the tool's name that are not hosts
_NOT_HOSTS = frozenset(
    [
        "all",
        "before",
        "after",
        "full",
        "raw",
        "old",
        "new",
        "out",
        "log",
        "logs",
        "txt",
        "iso",
        "plain",
        "boot",
        "kernel",
        "last",
        "first",
        "current",
        "latest",
        "query",
        "csv",
        "output",
        "table",
        "dump",
        "report",
    ]
)

_CONTROL = bytes([*range(9), *range(14, 32)])


def _is_text(head: bytes) -> bool:
    if not head:
        return True
    if b"\x00" in head[:8192]:
        return False
    sample = head[:8192]
    bad = len(sample) - len(sample.translate(None, _CONTROL))
    return bad < len(sample) * 0.02


def detect_kind(name: str, head: bytes) -> str:
    """One of ``KINDS`` from the path inside the upload/archive and the first ≤64 KiB."""
    base = basename(name).lower()
    if head[:1] == b"\x80" and len(head) > 1 and head[1] <= 5:
        return "flight_recorder"  # a pickle; only the restricted loader will read it
    text = head[:65536].decode("utf-8", errors="replace")
    if _FR_NAME.search(base) and (
        '"pg_status"' in text or '"entries"' in text or head[:1] == b"\x80"
    ):
        return "flight_recorder"
    if text.lstrip().startswith("{") and '"pg_status"' in text and '"version"' in text:
        return "flight_recorder"
    if head[:4] == b"PAR1" and (base.endswith((".parquet", ".pq")) or "metric" in base):
        return "metrics"  # Parquet per-step metrics (magic "PAR1")
    if not _is_text(head):
        return "other"
    if base.endswith((".csv", ".tsv", ".jsonl", ".ndjson")) or "metrics" in base:
        from .metrics import looks_like_metrics_header

        first = text.split("\n", 1)[0]
        if looks_like_metrics_header(first):
            return "metrics"
        if text.lstrip().startswith("{") and any(
            looks_like_metrics_header(ln) for ln in text.split("\n", 8)[1:8]
        ):
            return "metrics"  # JSON lines whose first record is not a step (a run header)
    first_line = text.split("\n", 1)[0].lower().replace(" ", "")
    if re.match(r"^(?:host|hostname|node),(?:switch|leaf|tor)\b", first_line):
        return "topology"
    if re.match(r"^variable,value,(?:outcome|result)\b", first_line):
        return "bisection"
    if "temperature.gpu" in first_line or "ecc.errors." in first_line:
        return "nvidia_smi"
    if (
        ("out-of-place" in text and "busbw" in text)
        or "# nccl-tests" in text
        or "_perf -b" in text
        or ("# nThread " in text and " nGpus " in text and ("busbw" in text or "# Rank" in text))
        or "# Avg bus bandwidth" in text
        # NCCL 1.x tests (the literal first: the regex alone tries every position, ~1 ms)
        or ("algbw" in text and re.search(r"(?m)^\s*N\s+type\s+op\s+time\s+algbw\s+busbw\b", text))
    ):
        return "nccl_tests"
    if "NVIDIA-SMI" in text or "==============NVSMI LOG" in text:
        return "nvidia_smi"
    if text.lstrip().startswith("Unable to determine the device handle for GPU"):
        return "nvidia_smi"  # nvidia-smi's whole output when it cannot reach any GPU
    if (
        base.startswith(("aistarget", "aisproxy", "ais-target", "ais-proxy"))
        or ".ais-target-" in base
        or _AIS_HEADER.match(text)
    ):
        return "aistore"
    if "bisect" in base:
        return "bisection"
    if (
        base.startswith(("topo", "nvidia-smi-topo", "ibstat", "ibnetdiscover"))
        or "\tGPU1\t" in text[:4000]
    ):
        return "topology"
    start = text[:4000]
    if (
        ("JobId=" in start or "JobState=" in start or "JobID|" in start)
        and re.search(r"(?:^|\s)JobId=\d+|JobState=|^JobID\|", start, re.M)
    ) or (base.startswith("slurm-job-") and text.lstrip().startswith("{")):
        return "slurm_job"  # scontrol/sacct text, or the controller epilog's JSON record
    if any(t in base for t in ("dmesg", "kern.log", "syslog", "journal")) or re.match(
        r"\[\s*\d+\.\d+\] ", text
    ):
        return "dmesg"
    return "rank_log"
