"""Realistic inputs for the analysis side: artifacts whose parse results are in storage."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import uuid

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

import rankscope as engine
from apps.incidents.models import Incident
from apps.ingest.models import Artifact

SCRIPT = "<script>alert('x')</script>"


def rank_log(rank: int, *, oom: bool = False) -> bytes:
    """A short rank log: a few steps, then either a CUDA OOM or a watchdog timeout."""
    lines = [f"[rank{rank}]:2026-03-01 10:00:0{i} INFO step {i} loss 2.{i}" for i in range(5)]
    if oom:
        lines.append(
            f"[rank{rank}]:2026-03-01 10:00:06 ERROR torch.OutOfMemoryError: CUDA out of memory. "
            f"Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.11 GiB {SCRIPT}"
        )
    else:
        lines.append(
            f"[rank{rank}]:[E301 10:30:07.000000000 ProcessGroupNCCL.cpp:632] [Rank {rank}] "
            "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1234, "
            "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for "
            "1800010 milliseconds before timing out."
        )
    return ("\n".join(lines) + "\n").encode()


def add_artifact(
    incident: Incident,
    name: str,
    content: bytes,
    *,
    status: str = "parsed",
    parse_error: str = "",
) -> Artifact:
    """An artifact as the ingest side leaves it: bytes hashed, ParseResult JSON in storage."""
    parsed_key = ""
    ranks: list[int] = []
    kind = "rank_log"
    if status == "parsed":
        result = engine.parse_artifact(io.BytesIO(content), name=name)
        # stored the way the ingest side stores it: gzipped ParseResult JSON
        parsed_key = default_storage.save(
            f"test-parsed/{uuid.uuid4().hex}.parse.json.gz",
            ContentFile(gzip.compress(json.dumps(result.to_json()).encode())),
        )
        ranks, kind = list(result.ranks), result.kind
    return Artifact.objects.create(
        incident=incident,
        original_name=name,
        display_name=name,
        size=len(content),
        sha256=hashlib.sha256(content).hexdigest(),
        kind=kind,
        ranks=ranks,
        parse_status=status,
        parse_error=parse_error,
        parsed_key=parsed_key,
    )


def add_job(incident: Incident, ranks: int = 4, oom_rank: int = 3) -> list[Artifact]:
    return [
        add_artifact(incident, f"rank{r}.log", rank_log(r, oom=r == oom_rank)) for r in range(ranks)
    ]


@pytest.fixture
def job(incident) -> list[Artifact]:
    return add_job(incident)
