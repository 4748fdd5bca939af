"""Per-rank, per-step metrics for a generated job, consistent with its logs.

``generate`` writes the logs; ``write_step_metrics(manifest, path)`` adds the metrics file
a training job's own logger would have written beside them: long format, one row per
(step, rank), with the columns the metrics parser reads::

    step,rank,host,time,step_time,compute_time,comm_time,data_time,loss,grad_norm,
    mem_allocated,mem_reserved

Times are seconds, memory GiB. Steps and hosts match the log lines (``step N done`` every
``hours * 3600 / steps`` seconds, ``fwd-bwd ~4.1 s``, ``mem allocated 61.2 GiB``). For a
``hang`` (the data-loader stall), the culprit rank's data wait grows over the last fifth
of the run before it stops, so its step time rises first; the ranks waiting for it in the
next all-reduce see part of that as communication time.

Usage::

    python -m rankscope.testing.step_metrics OUTDIR   # reads OUTDIR/manifest.json
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import random
from datetime import timedelta
from pathlib import Path
from typing import Any

from .formats import T0

FILE_NAME = "train_metrics.csv"
COLUMNS = (
    "step",
    "rank",
    "host",
    "time",
    "step_time",
    "compute_time",
    "comm_time",
    "data_time",
    "loss",
    "grad_norm",
    "mem_allocated",
    "mem_reserved",
)


def _hosts(ranks: int, per_node: int) -> list[str]:
    # Same names as the generator's Job.hosts, so metrics and logs agree on where a rank ran.
    nodes = (ranks + per_node - 1) // per_node
    width = 3 if nodes > 99 else 2
    return [f"node-{i:0{width}d}" for i in range(nodes)]


def stall_wait(step: int, *, start: int, end: int, peak: float = 13.0) -> float:
    """Extra data-loader wait (s) of the stalling rank at ``step``: nothing before
    ``start``, then growing exponentially to about ``peak`` at ``end`` (its last step)."""
    if step < start or end <= start:
        return 0.0
    x = (step - start) / (end - start)
    return peak * (math.exp(4 * x) - 1) / (math.exp(4) - 1)


def write_step_metrics(manifest: dict[str, Any], path: str | Path) -> Path:
    """Write the metrics CSV for the job ``manifest`` (as ``generate`` returns it) to ``path``.

    Streams one row at a time (a 1,024-rank job is ~60k rows); reproducible from the
    manifest's seed."""
    spec = manifest["spec"]
    expected = manifest.get("expected") or {}
    ranks, per_node, steps = int(spec["ranks"]), int(spec["per_node"]), int(spec["steps"])
    step_seconds = float(spec["hours"]) * 3600 / max(1, steps)
    rng = random.Random(f"metrics-{spec.get('seed', 0)}")  # noqa: S311 -- fixtures, not secrets
    hosts = _hosts(ranks, per_node)
    stalled = set(expected.get("culprit_ranks") or []) if expected.get("shape") == "hang" else set()
    ramp_start = steps - max(6, steps // 5)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as fh:
        out = csv.writer(fh, lineterminator="\n")
        out.writerow(COLUMNS)
        for step in range(1, steps + 1):
            t = T0 + timedelta(seconds=60 + step * step_seconds)
            # The slowest rank's extra wait this step; the others spend ~40 % of it blocked
            # in the all-reduce (the rest is hidden behind their own prefetching).
            wait = max(
                (stall_wait(step, start=ramp_start, end=steps) for _ in stalled), default=0.0
            )
            for rank in range(ranks):
                # fwd-bwd as the log lines print it, plus the optimizer step (0.12 s).
                compute = (4090 + (rank * 37 + step * 11) % 25) / 1000 + 0.1203
                compute += rng.gauss(0, 0.004)
                comm = 0.31 + rng.gauss(0, 0.01)
                data = 0.0031 + abs(rng.gauss(0, 0.0005))
                if rank in stalled:
                    data += wait
                else:
                    comm += 0.4 * wait
                step_time = compute + comm + data
                loss = 2.9 - step * 0.001 + 0.35 * math.exp(-step / 12) + rng.gauss(0, 0.015)
                grad_norm = 0.9 + 0.6 * math.exp(-step / 10) + abs(rng.gauss(0, 0.05))
                mem = 61.2 + rng.gauss(0, 0.03)
                reserved = 66.5 + (rank % per_node) * 0.05 + rng.gauss(0, 0.02)
                out.writerow(
                    (
                        step,
                        rank,
                        hosts[rank // per_node],
                        f"{t:%Y-%m-%dT%H:%M:%S}",
                        f"{step_time:.4f}",
                        f"{compute:.4f}",
                        f"{comm:.4f}",
                        f"{data:.4f}",
                        f"{loss:.5f}",
                        f"{grad_norm:.4f}",
                        f"{mem:.3f}",
                        f"{reserved:.3f}",
                    )
                )
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("outdir", help="a directory written by the generator (has manifest.json)")
    p.add_argument("--name", default=FILE_NAME)
    a = p.parse_args(argv)
    outdir = Path(a.outdir)
    manifest = json.loads((outdir / "manifest.json").read_text(encoding="utf-8"))
    print(write_step_metrics(manifest, outdir / a.name))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
