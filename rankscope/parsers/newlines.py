"""Newline counts in a block of bytes, the way a parser numbers its lines.

A big block is compared with numpy's SIMD ``== 10`` (about three times ``bytes.count``);
a small one with ``bytes.count``, so that reading a small log never imports numpy (the
offline command's start-up on a tiny file is mostly imports).

The prefilter scans a big block piece by piece and hands each piece here as soon as it
is scanned (``piece``), with the starts of the lines it matched in it: their newlines are
counted while the piece is still in the core's cache, and every later question about
those lines (``before``) is a lookup. Any other offset is counted from the nearest piece
boundary before it.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections.abc import Iterable
from typing import Any

from .._lazy import lazy_module

np = lazy_module("numpy")

#: chunks from this size on are counted with numpy
SIMD_BYTES = 1 << 18
#: the longest span compared in one numpy call: its ``== 10`` mask is a temporary array
#: as big as the span, and a mask above glibc's mmap threshold (128 KiB) is fresh pages —
#: faulted in and zeroed on every call (~40 % of the count's time on a 6 MB log)
_SLICE = 1 << 16
#: the longest piece (``piece``) whose ``== 10`` mask is written into this thread's own
#: buffer, made once: a piece is compared once, then only counted (``count_nonzero`` over
#: slices of the mask) up to each of its lines — not compared again slice by slice
_MASK_BYTES = 1 << 18
_PER_THREAD = threading.local()


def _mask() -> Any:
    """This thread's mask buffer (threads of the web server parse at the same time)."""
    got = getattr(_PER_THREAD, "mask", None)
    if got is None:
        got = _PER_THREAD.mask = np.empty(_MASK_BYTES, dtype=bool)
    return got


class NewlineCounter:
    """Counts ``\\n`` in ``data[:size]``: between two offsets (``count``), or before one
    (``before``, remembered along the way)."""

    __slots__ = ("_arr", "_at", "_counts", "_data", "_known", "_size")

    def __init__(self, data: bytes | bytearray | memoryview, size: int) -> None:
        self._data: Any = data
        self._size = size
        self._arr: Any = None
        if size >= SIMD_BYTES:
            self._arr = np.frombuffer(memoryview(data)[:size], dtype=np.uint8)
        # checkpoints, ascending: offsets and the newlines before each
        self._at = [0]
        self._counts = [0]
        self._known: dict[int, int] = {}  # the lines the prefilter matched: newlines before

    def count(self, start: int, end: int) -> int:
        arr = self._arr
        if arr is None:
            return self._data.count(b"\n", start, end)
        nonzero = np.count_nonzero
        if end - start <= _SLICE:
            return int(nonzero(arr[start:end] == 10))
        n = 0
        for s in range(start, end, _SLICE):
            n += nonzero(arr[s : min(end, s + _SLICE)] == 10)
        return int(n)

    def piece(self, start: int, end: int, starts: Iterable[int]) -> None:
        """The next piece of the block, ``data[start:end]`` (``start`` where the last piece
        ended), just scanned: its newlines are counted now, up to each of ``starts``
        (ascending offsets in the piece) and to its end."""
        if start != self._at[-1]:  # not the next piece: nothing to learn from it
            return
        n, known, arr = self._counts[-1], self._known, self._arr
        if arr is not None and end - start <= _MASK_BYTES:
            mask = _mask()[: end - start]
            np.equal(arr[start:end], 10, out=mask)
            nonzero, pos = np.count_nonzero, 0
            for s in starts:
                n += int(nonzero(mask[pos : s - start]))
                pos = s - start
                known[s] = n
            n += int(nonzero(mask[pos:]))
        else:
            pos, count = start, self.count
            for s in starts:
                n += count(pos, s)
                pos = s
                known[s] = n
            n += count(pos, end)
        self._at.append(end)
        self._counts.append(n)

    def reset(self) -> None:
        """Forget the pieces (the block is scanned again from its start)."""
        self._at, self._counts, self._known = [0], [0], {}

    def before(self, offset: int) -> int:
        """Newlines in ``data[:offset]``."""
        got = self._known.get(offset)
        if got is not None:
            return got
        at = self._at
        i = bisect_right(at, offset) - 1
        n = self._counts[i] + self.count(at[i], offset)
        if i == len(at) - 1 and offset > at[i]:  # past every checkpoint: a new one
            at.append(offset)
            self._counts.append(n)
        return n

    def total(self) -> int:
        """Newlines in the whole block."""
        return self.before(self._size)

    def before_each(self, starts: list[int]) -> list[int]:
        """``before`` each of the ascending offsets ``starts``: lookups for the lines the
        prefilter matched; for many others with numpy, one pass over the newlines up to
        the last of them and a binary search each."""
        known = self._known
        unknown = [s for s in starts if s not in known]
        if not unknown:
            return [known[s] for s in starts]
        if self._arr is not None and len(unknown) > 16:
            i = bisect_right(self._at, unknown[0]) - 1
            lo = self._at[i]
            found = np.flatnonzero(self._arr[lo : unknown[-1]] == 10)
            at = np.searchsorted(found, np.asarray(unknown) - lo) + self._counts[i]
            known.update(zip(unknown, at.tolist(), strict=True))
            return [known[s] for s in starts]
        return [known[s] if s in known else self.before(s) for s in starts]

    def release(self) -> None:
        """Drop the buffer export (a bytearray cannot be resized while numpy holds it)."""
        self._arr = None
        self._data = None
