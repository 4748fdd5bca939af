"""Small builders of realistic upload content for the ingest tests."""

from __future__ import annotations

import gzip
import io
import tarfile
import zipfile

GPUS_PER_NODE = 8


def node_log(node: int, *, hung_rank: int | None = None, steps: int = 3) -> bytes:
    """A torchrun stderr of one 8-GPU node: ``[rankN]:`` prefixes and NCCL host lines."""
    host = f"node-{node:02d}"
    lines: list[str] = []
    for local in range(GPUS_PER_NODE):
        rank = node * GPUS_PER_NODE + local
        lines.append(
            f"{host}:4242:4300 [{local}] NCCL INFO comm 0x5 rank {rank} nranks 64 "
            f"cudaDev {local} busId 1000 - Init COMPLETE"
        )
    for step in range(1, steps + 1):
        for local in range(GPUS_PER_NODE):
            rank = node * GPUS_PER_NODE + local
            lines.append(
                f"[rank{rank}]:[I1121 10:{step:02d}:00.000000 4242 train.py:10] "
                f"iteration      {step * 100}/  5000 | loss 2.{step}"
            )
    if hung_rank is not None:
        lines.append(
            f"[rank{hung_rank}]:[E1121 10:30:00.000000 4242 ProcessGroupNCCL.cpp:616] "
            f"[PG ID 0 PG GUID 0(default_pg) Rank {hung_rank}] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=4201, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
            "Timeout(ms)=600000) ran for 600011 milliseconds before timing out."
        )
    return ("\n".join(lines) + "\n").encode()


def tar_gz(files: dict[str, bytes], *, extra: list[tarfile.TarInfo] | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for info in extra or []:
            tar.addfile(info)
    return buf.getvalue()


def tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def zip_bytes(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buf.getvalue()


def gz(data: bytes) -> bytes:
    return gzip.compress(data)


def job_64_ranks(*, hung_rank: int = 37) -> dict[str, bytes]:
    """Eight node logs of a 64-rank job; one rank hit the NCCL watchdog."""
    return {
        f"job-123/error-123-node-{n:02d}.out": node_log(
            n, hung_rank=hung_rank if hung_rank // GPUS_PER_NODE == n else None
        )
        for n in range(8)
    }
