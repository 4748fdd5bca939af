"""The web server detects a file's kind from many threads at once (gunicorn's gthread
workers): a Hyperscan scratch serves one scan at a time, so every thread needs its own."""

from __future__ import annotations

import threading

import pytest

from rankscope import parsers
from rankscope.scan import get_scanner

HEAD = (
    "# nThread 1 nGpus 1 minBytes 8 maxBytes 128M step: 2(factor) warmup iters: 5 iters: 20\n"
    "#  Rank  0 Group  0 Pid  41822 on    gpu-r05 device  0 [0x07] NVIDIA A100-SXM4-80GB\n"
    + "filler line of an ordinary training log\n"
    * 300
)


def _hammer(work, threads: int = 8, rounds: int = 30) -> list[BaseException]:
    errors: list[BaseException] = []
    start = threading.Barrier(threads)

    def run() -> None:
        start.wait()
        try:
            for _ in range(rounds):
                work()
        except BaseException as exc:  # whatever a thread hit is reported
            errors.append(exc)

    pool = [threading.Thread(target=run) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return errors


def test_kind_detection_from_many_threads_at_once() -> None:
    head = HEAD.encode()
    expected = parsers.detect_kind("all_reduce_perf.log", head)
    kinds: list[str] = []
    errors = _hammer(lambda: kinds.append(parsers.detect_kind("all_reduce_perf.log", head)))
    assert errors == []
    assert set(kinds) == {expected}


def test_the_prefilter_from_many_threads_at_once() -> None:
    scanner = get_scanner()
    if type(scanner).__name__ != "HyperscanScanner":
        pytest.skip("Hyperscan is not available here")
    data = (
        "step 1 loss 2.0\n[rank3]: torch.OutOfMemoryError: CUDA out of memory.\n" * 200
    ).encode()
    expected = scanner.line_spans(data)
    results: list[bool] = []
    errors = _hammer(lambda: results.append(scanner.line_spans(data) == expected))
    assert errors == []
    assert results and all(results)
