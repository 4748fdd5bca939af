"""Run a function over items in a few forked processes, results back through pipes.

What ``rankscope triage`` needs of a process pool, and nothing more: the parent has
compiled the prefilter and loaded the parsers before it forks, so each child starts
ready; the items (files, largest first) are dealt out once, each to the child with the
least work so far; a child sends each result as soon as it has it, and the parent reads
them as they come. ``concurrent.futures``' process pool does the same with task queues,
feeder threads and ``multiprocessing``'s connections, whose import alone takes longer
(~40-70 ms here) than parsing a small job.

POSIX only (``os.fork``); elsewhere the caller uses ``concurrent.futures``.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import selectors
import signal
import struct
from collections.abc import Callable, Iterator, Sequence
from typing import Any

_HEADER = struct.Struct("<QQ")  # item index, pickled length
_FAILED = (1 << 64) - 1  # in place of an index: the child failed, the payload says why


class WorkerFailed(RuntimeError):
    """A child process died or raised before sending all its results."""


def available() -> bool:
    return hasattr(os, "fork")


def deal(weights: Sequence[int], jobs: int) -> list[list[int]]:
    """Item indices per process: each item in turn (the caller orders them, largest first)
    to the process with the least weight so far."""
    shares: list[list[int]] = [[] for _ in range(jobs)]
    load = [0] * jobs
    for i, w in enumerate(weights):
        k = load.index(min(load))
        shares[k].append(i)
        load[k] += max(w, 1)
    return [s for s in shares if s]


def run(
    func: Callable[..., Any], items: Sequence[tuple[Any, ...]], shares: list[list[int]]
) -> Iterator[tuple[int, Any]]:
    """``(index, func(*items[index]))`` for every item, in the order results arrive; the
    items of ``shares[k]`` are done, in that order, by the k-th forked process."""
    children: dict[int, int] = {}  # read end → pid
    try:
        for share in shares:
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: never returns
                os.close(r)
                _child(func, items, share, w)
            os.close(w)
            children[r] = pid
        yield from _collect(children, sum(len(s) for s in shares))
    finally:
        for r, pid in children.items():
            with contextlib.suppress(OSError):
                os.close(r)
            with contextlib.suppress(OSError):  # already gone unless the parent leaves early
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def _child(
    func: Callable[..., Any], items: Sequence[tuple[Any, ...]], share: list[int], w: int
) -> None:
    code = 0
    try:
        with os.fdopen(w, "wb", buffering=1 << 16) as out:
            for i in share:
                try:
                    data = pickle.dumps(func(*items[i]), protocol=pickle.HIGHEST_PROTOCOL)
                except BaseException as exc:  # sent to the parent, which raises it
                    data = pickle.dumps(f"{type(exc).__name__}: {exc}")
                    out.write(_HEADER.pack(_FAILED, len(data)) + data)
                    code = 1
                    break
                out.write(_HEADER.pack(i, len(data)))
                out.write(data)
                out.flush()  # the parent unpacks it while this process goes on
    except BaseException:
        code = 1
    finally:
        os._exit(code)  # no atexit handlers, no flushing of the parent's buffers


def _collect(children: dict[int, int], expected: int) -> Iterator[tuple[int, Any]]:
    sel = selectors.DefaultSelector()
    pending = {r: bytearray() for r in children}
    for r in children:
        sel.register(r, selectors.EVENT_READ)
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
                    yield index, value
    finally:
        sel.close()
    if got != expected:
        raise WorkerFailed(
            f"{expected - got} of {expected} files got no result: a parse process was killed "
            "(out of memory?)"
        )
