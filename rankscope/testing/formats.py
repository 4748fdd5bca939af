"""Message formats the generator writes, as PyTorch / NCCL / torchrun / SLURM print them.

Each function returns the message only; ``Writer.line`` adds the envelope
(``[rankN]:``, glog stamp, wrappers). Versions: "2.8" (current layout), "2.5"
("Exception (either an error or timeout) detected by watchdog"), "2.3"
("Timeout at NCCL work"), "2.1" (no Numel, no PG prefix, old glog without time).
"""

from __future__ import annotations

from datetime import datetime

TIMEOUT_MS = 1_800_000
T0 = datetime(2026, 11, 21, 8, 0, 0)


def pg_prefix(version: str, group_rank: int, pg: int = 0, desc: str = "default_pg") -> str:
    if version == "2.8":
        return f"[PG ID {pg} PG GUID {pg}({desc}) Rank {group_rank}] "
    if version in ("2.5", "2.3"):
        return f"[PG {pg} Rank {group_rank}] "
    return ""


def work(version: str, seq: int, op: str) -> str:
    if version == "2.1":
        return f"WorkNCCL(SeqNum={seq}, OpType={op}, Timeout(ms)={TIMEOUT_MS})"
    return f"WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=1, NumelOut=1, Timeout(ms)={TIMEOUT_MS})"


def watchdog_timeout(version: str, rank: int, seq: int, op: str, ran_ms: int) -> str:
    msg = f"[Rank {rank}] Watchdog caught collective operation timeout: {work(version, seq, op)} ran for {ran_ms} milliseconds before timing out."
    if version == "2.1":
        return f"[Rank {rank}] NCCL watchdog thread terminated with exception: {msg}"
    return msg


def watchdog_failure(version: str, rank: int, seq: int, enq: int, comp: int) -> str | None:
    p = pg_prefix(version, rank)
    if version == "2.8":
        return f"{p} failure detected by watchdog at work sequence id: {seq} PG status: last enqueued work: {enq}, last completed work: {comp}"
    if version == "2.5":
        return f"{p}Exception (either an error or timeout) detected by watchdog at work: {seq}, last enqueued NCCL work: {enq}, last completed NCCL work: {comp}."
    if version == "2.3":
        return f"{p}Timeout at NCCL work: {seq}, last enqueued NCCL work: {enq}, last completed NCCL work: {comp}."
    return None


def first_dump(version: str, rank: int) -> str | None:
    p = pg_prefix(version, rank)
    if version == "2.8":
        return f"{p}First PG on this rank to signal dumping."
    if version == "2.5":
        return f"{p}First watchdog to set the dump signal."
    if version == "2.3":
        return f"{p}Received a timeout signal from this local rank and will start to dump the debug info."
    return None


def observed(version: str, rank: int) -> str | None:
    if version == "2.8":
        return f"{pg_prefix(version, rank)}Observed flight recorder dump signal from another rank via TCPStore."
    return None


def received(version: str, rank: int, from_rank: int, enq: int, comp: int) -> str | None:
    if version not in ("2.8", "2.5"):
        return None
    return (
        f"{pg_prefix(version, rank)}Received a dump signal due to a collective timeout from  rank {from_rank} and we will try our best "
        f"to dump the debug info. Last enqueued NCCL work: {enq}, last completed NCCL work: {comp}.This is most likely caused by "
        "incorrect usages of collectives, e.g., wrong sizes used across ranks, the order of collectives is not same for all ranks "
        "or the scheduled collective, for some reason, didn't run. Additionally, this can be caused by GIL deadlock or other "
        "reasons such as network errors or bugs in the communications library (e.g. NCCL), etc. "
    )


def teardown(rank: int) -> list[str]:
    return [
        f"[Rank {rank}] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
        f"[Rank {rank}] To avoid data inconsistency, we are taking the entire process down.",
    ]


def stack_not_found() -> str:
    return (
        "Stack trace of the failed collective not found, potentially because FlightRecorder is disabled. "
        "You can enable it by setting TORCH_NCCL_TRACE_BUFFER_SIZE to a non-zero value."
    )


def async_exception(rank: int, seq: int, op: str) -> list[str]:
    return [
        f"[Rank {rank}] Collective {work('2.8', seq, op)} raised the following async exception: NCCL error: remote process exited or there was a network error, NCCL version 2.21.5",
        "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
        "Last error:",
    ]


def ib_completion(peer: str, local: str) -> str:
    return (
        f"NET/IB : Got completion from peer {peer}<45312> with status=12 opcode=0 len=0 vendor err 129 (Recv) "
        f"localGid ::ffff:{local} remoteGids::ffff:{peer}"
    )


def nccl_line(host: str, pid: int, dev: int, what: str, level: str = "INFO", src: str = "") -> str:
    return f"{host}:{pid}:{pid + 17} [{dev}] {src + ' ' if src else ''}NCCL {level} {what}"


def torchrun_summary(
    entry: str, failures: list[dict[str, object]], root: dict[str, object]
) -> list[str]:
    def block(i: int, f: dict[str, object]) -> list[str]:
        t = f["time"]
        assert isinstance(t, datetime)
        return [
            f"[{i}]:",
            f"  time      : {t:%Y-%m-%d_%H:%M:%S}",
            f"  host      : {f['host']}",
            f"  rank      : {f['rank']} (local_rank: {f['local_rank']})",
            f"  exitcode  : {f['exitcode']} (pid: {f['pid']})",
            "  error_file: <N/A>",
            "  traceback : "
            + (
                f"Signal {-int(f['exitcode'])} ({ {6: 'SIGABRT', 9: 'SIGKILL', 15: 'SIGTERM'}.get(-int(f['exitcode']), 'SIG') }) received by PID {f['pid']}"
                if int(f["exitcode"]) < 0
                else "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
            ),
        ]

    out = ["", "=" * 60, f"{entry} FAILED", "-" * 60, "Failures:"]
    others = [f for f in failures if f is not root]
    if not others:
        out.append("  <NO_OTHER_FAILURES>")
    for i, f in enumerate(others, 1):
        out += block(i, f)
    out += ["-" * 60, "Root Cause (first observed failure):"]
    out += block(0, root)
    out.append("=" * 60)
    return out


def megatron_iteration(
    step: int, total: int, ms: float, loss: str, nan_iters: int, t: datetime
) -> str:
    return (
        f" [{t:%Y-%m-%d %H:%M:%S}] iteration {step:>8}/{total:>8} | consumed samples: {step * 128:>12} | "
        f"elapsed time per iteration (ms): {ms:.1f} | learning rate: 3.000000E-04 | global batch size:   128 | "
        f"lm loss: {loss} | loss scale: 1.0 | grad norm: 0.812 | number of skipped iterations:   0 | "
        f"number of nan iterations: {nan_iters:>3} |"
    )
