"""The offline command's process pool: every result comes back, whatever its size or the
process that made it; a process that fails or dies is an error, never a shorter result."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from rankscope import forkpool
from rankscope.cli import parse_paths

pytestmark = pytest.mark.skipif(not forkpool.available(), reason="needs os.fork")


def _echo(i: int, size: int) -> tuple[int, bytes]:
    return i, bytes([i % 251]) * size  # some results bigger than a pipe's buffer


def test_every_result_comes_back_once_and_every_process_is_reaped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    forked = _record_forks(monkeypatch)
    sizes = [5, 3_000_000, 0, 70_000, 1, 200_000, 65_536, 9]
    items = [(i, s) for i, s in enumerate(sizes)]
    got = list(forkpool.run(_echo, items, 3))
    assert sorted(i for i, _ in got) == list(range(len(sizes)))
    assert dict(got) == {i: _echo(i, s) for i, s in items}
    forkpool.reap(wait=True)  # not waited for at the end of the run, but not forgotten
    assert len(forked) == 3 and not forkpool._UNREAPED
    for pid in forked:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def _record_forks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    forked: list[int] = []
    real_fork = os.fork

    def fork() -> int:
        pid = real_fork()
        if pid:
            forked.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", fork)
    return forked


def _slow_first(i: int) -> int:
    if i == 0:
        time.sleep(1.0)  # a big file, or a library imported for this file only
    return os.getpid()


def test_a_slow_item_does_not_hold_up_the_items_after_it() -> None:
    # items go to whichever process is free: the one busy with item 0 takes no others
    # beyond the one it already held, the other does the rest meanwhile
    items = [(i,) for i in range(30)]
    by_item = dict(forkpool.run(_slow_first, items, 2))
    slow = by_item[0]
    assert sum(1 for pid in by_item.values() if pid == slow) <= 3
    assert len(set(by_item.values())) == 2


def test_a_heavy_item_is_held_alone_while_the_light_ones_queue_up() -> None:
    # with weights (file sizes), a process holds many light items (so it never waits for
    # the parent) but a heavy one nearly alone: the other process does the rest meanwhile
    items = [(i,) for i in range(60)]
    weights = [1 << 30] + [1 << 20] * 59
    by_item = dict(forkpool.run(_slow_first, items, 2, weights))
    slow = by_item[0]
    assert sum(1 for pid in by_item.values() if pid == slow) <= 3
    assert sorted(by_item) == list(range(60))


def _when(i: int) -> float:
    time.sleep(0.01)
    return time.monotonic()


def test_the_callers_own_work_runs_while_the_processes_parse() -> None:
    # ``started`` runs once the processes have their first items and before any result is
    # read: the caller's work (the command imports the analysis) and theirs overlap, and
    # they hold enough not to stand idle meanwhile
    done: dict[int, float] = {}
    calls: list[tuple[int, float, float]] = []

    def started() -> None:
        t0 = time.monotonic()
        time.sleep(0.3)
        calls.append((len(done), t0, time.monotonic()))

    items = [(i,) for i in range(40)]
    for i, t in forkpool.run(_when, items, 2, [1 << 20] * 40, started=started):
        done[i] = t
    assert sorted(done) == list(range(40))
    [(results_before, t0, t1)] = calls
    assert results_before == 0
    assert sum(1 for t in done.values() if t0 < t < t1) >= 8  # both went on meanwhile


def _fails_on_three(i: int) -> int:
    if i == 3:
        raise ValueError("cannot read item 3")
    return i


def test_an_exception_in_a_process_is_raised_in_the_parent() -> None:
    items = [(i,) for i in range(6)]
    with pytest.raises(forkpool.WorkerFailed, match="ValueError: cannot read item 3"):
        list(forkpool.run(_fails_on_three, items, 2))


def _dies_on_four(i: int) -> int:
    if i == 4:
        os.kill(os.getpid(), signal.SIGKILL)  # as the kernel's OOM killer would
    return i


def test_a_killed_process_is_an_error_that_says_how_many_files_were_lost() -> None:
    items = [(i,) for i in range(6)]
    with pytest.raises(forkpool.WorkerFailed, match=r"[12] of 6 files got no result"):
        list(forkpool.run(_dies_on_four, items, 2))


def test_stopping_early_leaves_no_process_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    forked = _record_forks(monkeypatch)
    items = [(i, 10) for i in range(40)]
    done = forkpool.run(_echo, items, 2)
    next(done)
    done.close()  # the consumer stops: its processes are ended and reaped
    assert len(forked) == 2
    for pid in forked:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_parallel_parse_equals_the_serial_one(tmp_path: Path) -> None:
    line = b"[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    noise = b"[rank3]: node-1:4100:4117 [3] NCCL INFO Channel 00/0 : 3[3] -> 4[4] via P2P/IPC\n"
    for i, n in enumerate([0, 40_000, 3, 900, 12_000]):
        (tmp_path / f"node-{i}.log").write_bytes(noise * n + line)
    serial = parse_paths([tmp_path], jobs=1)
    parallel = parse_paths([tmp_path], jobs=2)
    assert [r.to_json() for r in parallel] == [r.to_json() for r in serial]


def test_the_command_says_so_and_exits_2_when_a_parse_process_dies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rankscope import cli

    for i in range(4):
        (tmp_path / f"rank_{i}.log").write_text("[rank0]: step 1\n")
    real = cli._parse_file

    def parse_or_die(path: str, name: str, scanner: str | None):  # type: ignore[no-untyped-def]
        if name.endswith("rank_2.log"):
            os.kill(os.getpid(), signal.SIGKILL)  # as the kernel's OOM killer would
        return real(path, name, scanner)

    monkeypatch.setattr(cli, "_parse_file", parse_or_die)
    assert cli.main(["triage", str(tmp_path), "--jobs", "2"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "got no result" in err and "Traceback" not in err


def test_the_library_call_leaves_no_parse_process_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rankscope import cli

    forked = _record_forks(monkeypatch)
    for i in range(4):
        (tmp_path / f"rank_{i}.log").write_text("[rank0]: step 1\n")
    cli.diagnose([tmp_path], jobs=2)
    assert len(forked) == 2
    for pid in forked:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
