"""What reading iteration lines and banners beside the prefilter costs a text-log parse.

    .venv/bin/python bench/engine/sidecar.py [--mib 64] [--repeat 3]

Two files, each parsed by ``parse_artifact`` in this process, interleaved, best of
``--repeat``: the baseline is the same parser with the side readers switched off
(``SideReaders.feed``/``finish`` replaced by no-ops), in the same run on the same bytes.
- ``routine``: a generated per-node log (``generate healthy``, NCCL banners, Megatron-style
  lines) of about ``--mib`` MiB — the common case, few iteration lines;
- ``iterations``: a Megatron log of the same size where every line is an iteration line
  (the worst case: every line becomes a metrics row).
Prints a Markdown table for docs/performance.md.
"""

from __future__ import annotations

import argparse
import io
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from rankscope import parse_artifact  # noqa: E402
from rankscope.parsers import sidecar  # noqa: E402


def _megatron(mib: int) -> bytes:
    out = io.StringIO()
    i = 0
    while out.tell() < mib << 20:
        i += 1
        out.write(
            f"[2026-05-02 10:{i // 60 % 60:02d}:{i % 60:02d}] iteration {i:8d}/ 9999999 | consumed samples: {i * 128:12d} | "
            f"elapsed time per iteration (ms): {1500 + i % 13:.1f} | throughput per GPU (TFLOP/s/GPU): 180.3 | "
            "learning rate: 3.000000E-04 | global batch size:   128 | lm loss: 2.100000E+00 | loss scale: 1.0 | "
            "grad norm: 0.321 | number of skipped iterations:   0 | number of nan iterations:   0 |\n"
        )
    return out.getvalue().encode()


def _routine(mib: int, tmp: Path) -> bytes:
    from rankscope.testing.generate import generate

    out = tmp / "routine"
    generate("healthy", out, ranks=8, target_bytes=mib << 20)  # one node: one file
    biggest = max(out.glob("*.out"), key=lambda p: p.stat().st_size)
    return biggest.read_bytes()


def _time(data: bytes, name: str) -> float:
    t = time.perf_counter()
    parse_artifact(io.BytesIO(data), name=name)
    return time.perf_counter() - t


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mib", type=int, default=64)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--tmp", type=Path, default=Path("/tmp/rankscope-bench-sidecar"))
    a = p.parse_args()
    files = {"routine": _routine(a.mib, a.tmp), "iterations": _megatron(a.mib)}
    real_feed, real_finish = sidecar.SideReaders.feed, sidecar.SideReaders.finish

    def off_feed(self: object, chunk: object, first_line: int) -> None:
        if isinstance(chunk, memoryview):
            chunk.release()

    best: dict[tuple[str, str], float] = {}
    for _ in range(a.repeat):
        for label, data in files.items():
            for mode in ("off", "on"):
                if mode == "off":
                    sidecar.SideReaders.feed = off_feed  # type: ignore[method-assign]
                    sidecar.SideReaders.finish = lambda self, r, f: None  # type: ignore[method-assign]
                else:
                    sidecar.SideReaders.feed = real_feed  # type: ignore[method-assign]
                    sidecar.SideReaders.finish = real_finish  # type: ignore[method-assign]
                s = _time(data, f"{label}.log")
                best[(label, mode)] = min(best.get((label, mode), s), s)
    print(f"{platform.node()} ({platform.machine()}), best of {a.repeat}, one process\n")
    print("| file | size | parse, side readers off (baseline) | parse, on | cost |")
    print("| --- | --- | --- | --- | --- |")
    for label, data in files.items():
        off, on = best[(label, "off")], best[(label, "on")]
        mb = len(data) / 2**20
        print(
            f"| {label} | {mb:.0f} MiB | {off:.2f} s ({mb / off:.0f} MiB/s) | {on:.2f} s ({mb / on:.0f} MiB/s) | +{(on - off) / off:.0%} |"
        )


if __name__ == "__main__":
    main()
