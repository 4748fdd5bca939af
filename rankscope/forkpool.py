"""Run a function over items in a few forked processes, results back through pipes.

What ``rankscope triage`` needs of a process pool, and nothing more: the parent has
compiled the prefilter and loaded the parsers before it forks, so each child starts
ready; the items (files, largest first) are handed out as the children ask for them —
each child holds a queue of them, topped up with each result it sends back: deep while
many are left (a child never waits for the parent, busy with its own imports), short near
the end, so a child slowed down (a big file, a library imported for one file) does not
hold up the others; the parent reads the results as they come. ``concurrent.futures``'
process pool does the same with task queues, feeder threads and ``multiprocessing``'s
connections, whose import alone takes longer (~40-70 ms here) than parsing a small job.

POSIX only (``os.fork``); elsewhere the caller uses ``concurrent.futures``.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import struct
from collections.abc import Callable, Iterator, Sequence
from typing import Any

_HEADER = struct.Struct("<QQ")  # item index, pickled length
_FAILED = (1 << 64) - 1  # in place of an index: the child failed, the payload says why
_TASK = struct.Struct("<I")  # an item index handed to a child
_STOP = (1 << 32) - 1  # no more items
# What a child holds (items handed out, result not back yet): at least ``_SHALLOW`` items —
# one at work, one to start on while the next is sent — and, given the items' weights
# (file sizes), more while their weights stay within ``_DEEP`` and half of what is left
# shared among the children. The parent hands out nothing while it works on its own (the
# caller's ``started`` work, then unpacking a result that imports a library: 20-50 ms
# each, more with two children on two cores): the first queues hold about a fifth of a
# job each (two children), so no child waits for it then (with half as much, both children
# of a 360 MiB job stood idle ~35 ms while the parent imported the analysis); a big file
# is held alone; and near the end the queues are short, so no child is left with a long
# one while the other has finished.
_SHALLOW, _DEEP = 2, 128 << 20
# the kernel's buffer of a result pipe: a child goes on writing results while the parent
# is busy (up to ~30 per-node results, ~300 per-rank ones) instead of waiting at 64 KiB
_PIPE_BYTES = 1 << 20


class WorkerFailed(RuntimeError):
    """A child process died or raised before sending all its results."""


def available() -> bool:
    return hasattr(os, "fork")


def run(
    func: Callable[..., Any],
    items: Sequence[tuple[Any, ...]],
    jobs: int,
    weights: Sequence[int] | None = None,
    started: Callable[[], None] | None = None,
) -> Iterator[tuple[int, Any]]:
    """``(index, func(*items[index]))`` for every item, in the order results arrive, from
    ``jobs`` forked processes that take the items in their order as they become free
    (``weights``: each item's cost, e.g. its size, for how many a process may hold).
    ``started`` is called once the processes have their first items, before any result
    is read: work of the caller's own that they need not wait for."""
    children: dict[int, tuple[int, int]] = {}  # result read end → (pid, task write end)
    reap()  # the processes of an earlier run that had not yet exited
    finished = False
    try:
        for _ in range(max(1, min(jobs, len(items)))):
            res_r, res_w = os.pipe()
            task_r, task_w = os.pipe()
            with contextlib.suppress(OSError, AttributeError):  # Linux only; may be capped
                import fcntl  # here: a triage of one file forks nothing

                fcntl.fcntl(res_w, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
            pid = os.fork()
            if pid == 0:  # the child: never returns
                os.close(res_r)
                os.close(task_w)
                for _r, (_pid, other_task_w) in children.items():
                    os.close(_r)  # the pipes of the children forked before this one
                    os.close(other_task_w)
                _child(func, items, task_r, res_w)
            os.close(res_w)
            os.close(task_r)
            children[res_r] = (pid, task_w)
        yield from _collect(children, len(items), weights, started)
        finished = True
    finally:
        for r, (pid, task_w) in children.items():
            for fd in (r, task_w):
                with contextlib.suppress(OSError):
                    os.close(fd)
            if finished:
                # every result is in and the process is leaving: it is reaped later, not
                # waited for — giving back a parse process's memory takes tens of ms, which
                # the analysis can use
                _UNREAPED.append(pid)
            else:  # an error, or the caller stopped early: end the process now
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)
        reap()


_UNREAPED: list[int] = []


def reap(*, wait: bool = False) -> None:
    """Collect the exit status of finished parse processes (all of them, with ``wait``)."""
    for pid in list(_UNREAPED):
        try:
            done, _ = os.waitpid(pid, 0 if wait else os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            _UNREAPED.remove(pid)


def _child(func: Callable[..., Any], items: Sequence[tuple[Any, ...]], task_r: int, w: int) -> None:
    import select  # here: a triage of one file forks nothing

    code = 0
    poller = select.poll()
    poller.register(task_r, select.POLLIN)
    try:
        with os.fdopen(task_r, "rb", buffering=0) as tasks, os.fdopen(w, "wb", 1 << 16) as out:
            while True:
                raw = tasks.read(_TASK.size)
                if len(raw) < _TASK.size:
                    break  # the parent is gone
                (i,) = _TASK.unpack(raw)
                if i == _STOP:
                    break
                try:
                    data = pickle.dumps(func(*items[i]), protocol=pickle.HIGHEST_PROTOCOL)
                except BaseException as exc:  # sent to the parent, which raises it
                    data = pickle.dumps(f"{type(exc).__name__}: {exc}")
                    out.write(_HEADER.pack(_FAILED, len(data)) + data)
                    code = 1
                    break
                out.write(_HEADER.pack(i, len(data)))
                out.write(data)
                if not poller.poll(0):
                    # no item waiting: the parent gets the results now, and sends more. While
                    # items wait, results go out 64 KiB at a time — the parent is woken
                    # once for a dozen small files, not once each
                    out.flush()
    except BaseException:
        code = 1
    finally:
        os._exit(code)  # no atexit handlers, no flushing of the parent's buffers


def _collect(
    children: dict[int, tuple[int, int]],
    expected: int,
    weights: Sequence[int] | None,
    started: Callable[[], None] | None,
) -> Iterator[tuple[int, Any]]:
    import selectors  # here: a triage of one file forks nothing (~5 ms of start-up)

    sel = selectors.DefaultSelector()
    pending = {r: bytearray() for r in children}
    held = dict.fromkeys(children, 0)  # items handed to each child, result not back yet
    weight = dict.fromkeys(children, 0)  # their weights
    left = sum(weights) if weights else 0  # the weight not yet handed out
    stopped: set[int] = set()
    nxt = 0

    def hand_out(r: int) -> None:  # top up one child's queue, or tell it the end
        nonlocal nxt, left
        budget = min(_DEEP, left // (2 * len(children))) if weights else 0
        tasks = []
        while nxt < expected and (
            held[r] < _SHALLOW or (weights and weight[r] + weights[nxt] <= budget)
        ):
            tasks.append(_TASK.pack(nxt))
            held[r] += 1
            if weights:
                weight[r] += weights[nxt]
                left -= weights[nxt]
            nxt += 1
        if nxt >= expected and r not in stopped:
            tasks.append(_TASK.pack(_STOP))
            stopped.add(r)
        if tasks:
            with contextlib.suppress(OSError):  # a child that died: its pipe is closed
                os.write(children[r][1], b"".join(tasks))

    for r in children:
        sel.register(r, selectors.EVENT_READ)
    for r in children:
        hand_out(r)
    if started is not None:
        started()
    got = 0
    try:
        while pending:
            for key, _ in sel.select():
                r = int(key.fd)
                chunk = os.read(r, 1 << 20)
                buf = pending[r]
                if not chunk:  # the child closed its end: it has sent all it will send
                    sel.unregister(r)
                    del pending[r]
                    if buf:
                        raise WorkerFailed("a parse process ended in the middle of a result")
                    continue
                buf += chunk
                while len(buf) >= _HEADER.size:
                    index, size = _HEADER.unpack_from(buf)
                    if len(buf) < _HEADER.size + size:
                        break
                    # our own child's pickle of its own result, over a pipe only it writes to
                    value = pickle.loads(buf[_HEADER.size : _HEADER.size + size])  # noqa: S301
                    del buf[: _HEADER.size + size]
                    if index == _FAILED:
                        raise WorkerFailed(f"a parse process failed: {value}")
                    got += 1
                    held[r] -= 1
                    if weights:
                        weight[r] -= weights[index]
                    hand_out(r)
                    yield index, value
    finally:
        sel.close()
    if got != expected:
        raise WorkerFailed(
            f"{expected - got} of {expected} files got no result: a parse process was killed "
            "(out of memory?)"
        )
