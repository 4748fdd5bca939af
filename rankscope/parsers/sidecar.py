"""Readers that see every chunk of a text log beside the prefilter-driven classification.

They look for frequent lines the prefilter is built to skip (iteration lines, start-up
banners) with ``bytes.find`` over the chunk, and write their own results at the end:
``result.metrics`` (``iterations.py``) and ``result.facts["banners"]`` (``banners.py``).
The text parser calls ``feed`` once per chunk and ``finish`` once per file.
"""

from __future__ import annotations

from typing import Any

from ..model import ParseResult
from .banners import BannerReader
from .iterations import IterationReader


class SideReaders:
    def __init__(self) -> None:
        self.iterations = IterationReader()
        self.banners = BannerReader()

    def feed(self, chunk: Any, first_line: int) -> None:
        """``chunk``: whole lines (bytes-like); its first line is number ``first_line + 1``."""
        data = bytes(chunk)
        if isinstance(chunk, memoryview):
            chunk.release()
        self.iterations.feed(data, first_line)
        self.banners.feed(data, first_line)

    def finish(self, result: ParseResult, file_rank: int | None) -> None:
        self.iterations.finish(result, file_rank)
        self.banners.finish(result, file_rank)
