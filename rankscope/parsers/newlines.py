"""Newline counts between points of a chunk, the way a parser numbers its lines.

A big chunk is compared with numpy's SIMD ``== 10`` (about three times ``bytes.count``);
a small one with ``bytes.count``, so that reading a small log never imports numpy (the
offline command's start-up on a tiny file is mostly imports).
"""

from __future__ import annotations

from typing import Any

from .._lazy import lazy_module

np = lazy_module("numpy")

#: chunks from this size on are counted with numpy
SIMD_BYTES = 1 << 18


class NewlineCounter:
    """Counts ``\\n`` in ``data[start:end]`` for ``end`` up to ``size``."""

    __slots__ = ("_arr", "_data")

    def __init__(self, data: bytes | bytearray | memoryview, size: int) -> None:
        self._data: Any = data
        self._arr: Any = None
        if size >= SIMD_BYTES:
            self._arr = np.frombuffer(memoryview(data)[:size], dtype=np.uint8)

    def count(self, start: int, end: int) -> int:
        if self._arr is not None:
            return int(np.count_nonzero(self._arr[start:end] == 10))
        return self._data.count(b"\n", start, end)

    def before_each(self, starts: list[int]) -> list[int]:
        """The newlines before each of the ascending offsets ``starts``: with numpy, one
        pass over the newlines up to the last and a binary search each."""
        if self._arr is not None:
            found = np.flatnonzero(self._arr[: starts[-1]] == 10)
            return np.searchsorted(found, starts).tolist()
        out, pos, n = [], 0, 0
        for start in starts:
            n += self._data.count(b"\n", pos, start)
            pos = start
            out.append(n)
        return out

    def release(self) -> None:
        """Drop the buffer export (a bytearray cannot be resized while numpy holds it)."""
        self._arr = None
        self._data = None
