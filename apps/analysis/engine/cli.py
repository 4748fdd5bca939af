"""Offline triage on files, directories and archives: no server, no database.

``python -m apps.analysis.engine.cli PATH… --format json|markdown|text`` (and
``manage.py triage``, a thin wrapper) parse every file with ``parse_artifact``,
round-trip each result through ``to_json``/``from_json`` exactly as the web
stores it, and run ``analyze`` — so the output is what the web shows for the
same files. Plain files are parsed in parallel processes (``--jobs``);
archive members are streamed in this process.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_all_start_methods, get_context
from pathlib import Path
from typing import Any, TextIO

from .document import analyze
from .metrics import MetricsTable
from .model import Options, ParseResult
from .parsers import parse_artifact, parser_for
from .render import render_markdown, render_text
from .scan import get_scanner, set_scanner
from .sources import UnreadableStream, is_archive, iter_files, read_paths

FORMATS = ("json", "markdown", "text")


def _pack(r: ParseResult) -> tuple[dict[str, Any], bytes | None]:
    return r.to_json(), (r.metrics.to_bytes() if r.metrics is not None else None)


def _unpack(packed: tuple[dict[str, Any], bytes | None]) -> ParseResult:
    d, m = packed
    return ParseResult.from_json(d, metrics=MetricsTable.read(io.BytesIO(m)) if m else None)


def _parse_file(path: str, name: str, scanner: str | None) -> tuple[dict[str, Any], bytes | None]:
    if scanner and get_scanner().name != scanner:
        set_scanner(scanner)
    try:
        with open(path, "rb") as f:
            return _pack(parse_artifact(f, name=name))
    except OSError as exc:
        return _pack(parse_artifact(UnreadableStream(str(exc)), name=name))  # type: ignore[arg-type]


def parse_paths(
    paths: Iterable[str | os.PathLike[str]], *, jobs: int = 0, scanner: str | None = None
) -> list[ParseResult]:
    """Parse everything under ``paths``; plain files in ``jobs`` processes (0 = CPU count)."""
    jobs = jobs or os.cpu_count() or 1
    plain: list[tuple[str, str]] = []
    inline: list[ParseResult] = []
    archives: list[str | os.PathLike[str]] = []
    for name, path in iter_files(paths):
        try:
            with open(path, "rb") as f:
                head = f.read(512)
        except OSError:
            archives.append(path)  # read_paths reports it
            continue
        (archives.append(path) if is_archive(head) else plain.append((str(path), name)))
    if scanner:
        set_scanner(scanner)
    # compile the prefilter and load the parsers once, here, so forked workers inherit them
    # (otherwise every worker pays ~0.2 s for both before its first file)
    get_scanner()
    parser_for("rank_log")
    for name, stream in read_paths(archives):
        inline.append(_unpack(_pack(parse_artifact(stream, name=name))))
    if jobs <= 1 or len(plain) <= 1:
        return [_unpack(_parse_file(p, n, scanner)) for p, n in plain] + inline
    # largest files first, so no worker is left alone with a big one at the end
    order = sorted(range(len(plain)), key=lambda i: -_size(plain[i][0]))
    ctx = get_context("fork") if "fork" in get_all_start_methods() else get_context()
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        done = pool.map(
            _parse_file,
            [plain[i][0] for i in order],
            [plain[i][1] for i in order],
            [scanner] * len(plain),
            chunksize=max(1, min(8, len(plain) // (jobs * 8))),
        )
        # unpacked as they arrive, while the workers go on parsing
        by_index = {i: _unpack(r) for i, r in zip(order, done, strict=True)}
    return [by_index[i] for i in range(len(plain))] + inline


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def render(doc: dict[str, Any], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(doc, indent=2, sort_keys=False, default=str) + "\n"
    if fmt == "markdown":
        return render_markdown(doc)
    return render_text(doc)


def triage(
    paths: Sequence[str | os.PathLike[str]],
    *,
    fmt: str = "text",
    jobs: int = 0,
    options: Options | None = None,
    scanner: str | None = None,
) -> str:
    """Parse + analyze + render; the whole offline pipeline in one call."""
    results = parse_paths(paths, jobs=jobs, scanner=scanner)
    return render(analyze(results, options=options), fmt)


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    p = parser or argparse.ArgumentParser(
        prog="triage", description="Triage a distributed training job from its logs."
    )
    p.add_argument("paths", nargs="+", help="files, directories or archives")
    p.add_argument("--format", choices=FORMATS, default="text")
    p.add_argument("--jobs", type=int, default=0, help="parser processes (default: CPU count)")
    p.add_argument(
        "--scanner", choices=["hyperscan", "re"], default=None, help="force a prefilter engine"
    )
    p.add_argument("--straggler-score", type=float, default=Options().straggler_score)
    return p


def run(args: argparse.Namespace, out: TextIO) -> int:
    missing = [p for p in args.paths if not Path(p).exists()]
    for p in missing:
        print(f"triage: {p}: no such file or directory", file=sys.stderr)
    paths = [p for p in args.paths if Path(p).exists()]
    if not paths:
        return 2
    opts = Options(straggler_score=args.straggler_score)
    out.write(triage(paths, fmt=args.format, jobs=args.jobs, options=opts, scanner=args.scanner))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run(args, sys.stdout)


if __name__ == "__main__":
    raise SystemExit(main())
