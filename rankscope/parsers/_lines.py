"""Line iteration shared by the structured-input parsers (nvidia-smi, nccl-tests, AIStore…).

Reads the stream once in binary chunks; yields ``(line_no, text)`` with 1-based
line numbers and the raw text decoded leniently. Lines longer than ``MAX_LINE``
are cut (a binary blob must not blow memory). Also keeps ``result.lines``,
``result.bytes`` and a sparse ``line_index`` up to date.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

from ..model import MAX_EVENT_TEXT, ParseResult

CHUNK = 1 << 20
MAX_LINE = 1 << 20
INDEX_EVERY = 4096


def iter_lines(stream: BinaryIO, result: ParseResult) -> Iterator[tuple[int, str]]:
    line_no = 0
    offset = 0
    carry = b""
    result.line_index = [(1, 0)]
    while True:
        data = stream.read(CHUNK)
        if not data:
            break
        buf = carry + data
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            raw = buf[start:nl]
            line_no += 1
            offset += nl + 1 - start
            start = nl + 1
            if line_no % INDEX_EVERY == 0:
                result.line_index.append((line_no + 1, offset))
            yield line_no, raw[:MAX_LINE].decode("utf-8", errors="replace").rstrip("\r")
        carry = buf[start:]
        if len(carry) > MAX_LINE:
            line_no += 1
            offset += len(carry)
            yield line_no, carry[:MAX_LINE].decode("utf-8", errors="replace")
            result.warn(f"line {line_no} longer than {MAX_LINE >> 10} KiB was cut")
            carry = b""
    if carry:
        line_no += 1
        offset += len(carry)
        yield line_no, carry.decode("utf-8", errors="replace").rstrip("\r")
    result.lines = line_no
    result.bytes = offset


def clip(text: str) -> str:
    return text if len(text) <= MAX_EVENT_TEXT else text[:MAX_EVENT_TEXT] + "…"
