"""The evidence viewer's line index: where every ``EVERY``-th line of a stored log starts.

Built while the parse task streams the file (no second read), stored next to it as
``<key>.lines-<EVERY>``: a flat array of little-endian uint64 byte offsets, entry ``i``
being the offset of line ``i * EVERY + 1``. Fixed width, so the viewer fetches the one
entry it needs with an 8-byte ranged read, then only the bytes of the lines it shows
(at most ``EVERY - 1`` lines before them). A 512 MiB log of 100-byte lines has about
5 M lines, so its index is about 650 KiB, and a page view never reads it whole.
"""

from __future__ import annotations

import io
import struct
from array import array
from typing import IO, Any

import numpy as np

from apps.ingest import storage

EVERY = 64
_COMPRESSED = (b"\x1f\x8b", b"\x28\xb5\x2f\xfd", b"BZh", b"\xfd7zXZ", b"PK\x03\x04")


def key_for(storage_key: str) -> str:
    return f"{storage_key}.lines-{EVERY}"


class IndexingReader(io.RawIOBase):
    """Passes ``stream`` through unchanged, noting where every ``EVERY``-th line starts.

    Sequential reads only: a seek other than to where it already is makes the index
    void (``offsets`` becomes None) rather than wrong.
    """

    def __init__(self, stream: IO[bytes]) -> None:
        super().__init__()
        self._stream = stream
        self._pos = 0
        self._lines = 0  # newlines seen so far
        self._first = True
        self.offsets: array | None = array("Q", [0])
        self.error: BaseException | None = None  # the store failed under the parser

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return bool(getattr(self._stream, "seekable", lambda: False)())

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        pos = self._stream.seek(offset, whence)
        if pos != self._pos:
            self.offsets = None
        self._pos = pos
        return pos

    def _read(self, n: int) -> bytes:
        try:
            return self._stream.read(n)
        except storage.ERRORS as exc:  # the parser would call it a bad file: it is not
            self.error = exc
            raise

    def readinto(self, b: Any) -> int:  # type: ignore[override]
        into = getattr(self._stream, "readinto", None)
        if into is None:
            data = self._read(len(b))
            n = len(data)
            b[:n] = data
        else:  # straight into the caller's buffer (the parser's): no copy of each chunk
            try:
                n = into(b) or 0
            except storage.ERRORS as exc:
                self.error = exc
                raise
        if not n:
            return 0
        with memoryview(b) as view:
            self._observe(view[:n])
        self._pos += n
        return n

    def read(self, size: int = -1) -> bytes:  # type: ignore[override]
        data = self._read(-1 if size is None else size)
        if data:
            self._observe(data)
            self._pos += len(data)
        return data

    def _observe(self, data: bytes | memoryview) -> None:
        if self.offsets is None:
            return
        if self._first:
            self._first = False
            if bytes(data[:8]).startswith(_COMPRESSED):  # offsets would be of the compressed bytes
                self.offsets = None
                return
        newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
        if not len(newlines):
            return
        # newline number k (1-based, over the whole file) ends line k; line k+1 starts
        # right after it. Entries are wanted for lines EVERY+1, 2*EVERY+1, …: newline
        # i of this chunk is number self._lines + 1 + i, a multiple of EVERY every EVERY
        picked = newlines[-(self._lines + 1) % EVERY :: EVERY]
        if len(picked):
            self.offsets.extend((picked + (self._pos + 1)).tolist())
        self._lines += len(newlines)

    def payload(self) -> bytes | None:
        """The index's bytes, or None when it could not be built."""
        if self.offsets is None:
            return None
        out = array("Q", self.offsets)
        if out.itemsize != 8:  # pragma: no cover - every platform we run on
            return None
        if struct.pack("=H", 1) != struct.pack("<H", 1):  # pragma: no cover - big-endian
            out.byteswap()
        return out.tobytes()


def lookup(storage_key: str, line: int) -> tuple[int, int] | None:
    """``(line_no, byte_offset)`` of the closest indexed line at or before ``line``.

    None when the artifact has no index (parsed before it existed, compressed). An
    8-byte ranged read.
    """
    i = max(0, (line - 1) // EVERY)
    try:
        raw = storage.read_range(key_for(storage_key), 8 * i, 8 * i + 8)
    except FileNotFoundError:
        return None
    if len(raw) != 8:  # past the last indexed line: use the last entry
        try:
            total = storage.size(key_for(storage_key))
        except FileNotFoundError:
            return None
        if total < 8:
            return None
        i = total // 8 - 1
        raw = storage.read_range(key_for(storage_key), 8 * i, 8 * i + 8)
        if len(raw) != 8:
            return None
    (offset,) = struct.unpack("<Q", raw)
    return i * EVERY + 1, offset
