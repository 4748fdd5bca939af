"""``rankscope triage PATH…``: the offline triage on files, directories and archives.

No server, no database, no Django: ``pip install .`` (or ``pipx install .``) gives the
``rankscope`` command; ``manage.py triage`` and ``python -m rankscope`` are aliases.
Every file is parsed with ``parse_artifact`` in parallel processes (``--jobs``; members
of a ``.tar.gz`` and single ``.gz``/``.zst``/``.xz``/``.bz2`` logs are streamed through
their decompressor in the process that reads them), each result is round-tripped
through ``to_json``/``from_json`` exactly as the web stores it, and ``analyze`` runs
once over all of them — so the output is what the web shows for the same files.

Exit codes a script can use: 0 no failure found, 1 a failure (crash, hang, slowdown,
divergence) was found, 2 bad usage, no readable input, or a parse process that died.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import gc
import io
import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from . import ENGINE_VERSION, forkpool
from .metrics import Columns, MetricsTable
from .model import Options, ParseResult
from .parsers import parse_artifact, parser_for
from .parsers.newlines import SIMD_BYTES
from .render import render_markdown, render_text
from .scan import get_scanner, prepare_literal_sets, set_scanner
from .sources import iter_files, read_one

FORMATS = ("json", "markdown", "text")
EXIT_OK, EXIT_FAILURE_FOUND, EXIT_USAGE = 0, 1, 2

# a result's JSON, and its metrics: Arrow IPC bytes, or the plain columns of a table not
# yet built (iteration lines: the parse process does not import pyarrow for them)
Packed = tuple[dict[str, Any], bytes | Columns | None]


def _pack(r: ParseResult) -> Packed:
    m = r.metrics
    if m is None:
        return r.to_json(), None
    pending = m.pending_columns
    return r.to_json(), (pending if pending is not None else m.to_bytes())


def _unpack(packed: Packed) -> ParseResult:
    d, m = packed
    if isinstance(m, dict):  # built here, as the result arrives: while the files are parsed
        return ParseResult.from_json(d, metrics=MetricsTable.from_columns(m))
    return ParseResult.from_json(d, metrics=MetricsTable.read(io.BytesIO(m)) if m else None)


def _parse_file(path: str, name: str, scanner: str | None) -> list[Packed]:
    """Every artifact in one file (one, or an archive's members), packed for the parent."""
    if scanner and get_scanner().name != scanner:
        set_scanner(scanner)
    return [_pack(parse_artifact(stream, name=n)) for n, stream in read_one(Path(path), name)]


def prepare_analysis() -> None:
    """Import the analysis side (the analyzers and their modules): done by the parent while
    the parse processes read the files, so that ``analyze`` starts at once after them."""
    import orjson  # noqa: F401  (``render``'s JSON)

    from .analyzers import registered_analyzers

    registered_analyzers()
    if "numpy._core" in sys.modules:  # (``numpy`` alone may be the lazy stand-in)
        # numpy's first ``median`` imports ``numpy.ma`` (~10 ms); the analyzers take medians
        # of the iteration metrics. Loaded here only when the parse has loaded numpy (a big
        # log): a small triage does not pay for it
        import numpy.ma  # noqa: F401


def parse_paths(
    paths: Iterable[str | os.PathLike[str]],
    *,
    jobs: int = 0,
    scanner: str | None = None,
    meanwhile: Callable[[], None] | None = None,
) -> list[ParseResult]:
    """Parse everything under ``paths``, files in ``jobs`` processes (0 = CPU count);
    ``meanwhile`` is called once the processes have their files (or, parsing in this
    process, after the parse)."""
    jobs = jobs or os.cpu_count() or 1
    files = [(str(path), name) for name, path in iter_files(paths)]
    if scanner:
        set_scanner(scanner)
    if jobs <= 1 or len(files) <= 1:
        out = [_unpack(p) for path, name in files for p in _parse_file(path, name, scanner)]
        if meanwhile is not None:
            meanwhile()
        return out
    # compile the prefilter and load the parsers once, here, so forked workers inherit them
    # (otherwise every worker pays ~0.2 s for both before its first file)
    get_scanner()
    parser_for("rank_log")
    prepare_literal_sets()
    sizes = [_size(path) for path, _name in files]
    if max(sizes) >= SIMD_BYTES:
        # a chunk this big has its newlines counted with numpy: imported once here rather
        # than in every worker at its first big file (~60 ms of CPU each)
        import numpy  # noqa: F401
    # largest files first, so no worker is left alone with a big one at the end
    order = sorted(range(len(files)), key=lambda i: -sizes[i])
    items = [(files[i][0], files[i][1], scanner) for i in order]
    by_index: dict[int, list[ParseResult]] = {}
    if forkpool.available():
        # a file's weight is its size, and at least what opening and reading its head cost
        # (an empty file is not free: no process takes a thousand of them at once)
        weights = [max(sizes[i], 64 << 10) for i in order]
        # ``meanwhile`` as soon as the processes have their first files: they parse those
        # while it runs (the parent hands out no more meanwhile); the results are unpacked
        # as they arrive, while the workers go on parsing
        for k, packed in forkpool.run(_parse_file, items, jobs, weights, started=meanwhile):
            by_index[order[k]] = [_unpack(p) for p in packed]
    else:
        by_index = _parse_in_pool(items, order, jobs, meanwhile)
    return [r for i in range(len(files)) for r in by_index[i]]


def _parse_in_pool(
    items: list[tuple[str, str, str | None]],
    order: list[int],
    jobs: int,
    meanwhile: Callable[[], None] | None,
) -> dict[int, list[ParseResult]]:
    """``parse_paths``' parallel step where processes cannot be forked (``concurrent.futures``
    with the platform's start method)."""
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=jobs) as pool:
        done = pool.map(
            _parse_file,
            *zip(*items, strict=True),
            chunksize=max(1, min(8, len(items) // (jobs * 8))),
        )
        if meanwhile is not None:
            meanwhile()
        return {i: [_unpack(p) for p in r] for i, r in zip(order, done, strict=True)}


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def render(doc: dict[str, Any], fmt: str) -> str:
    if fmt == "json":
        return _json(doc) + "\n"
    if fmt == "markdown":
        return render_markdown(doc)
    return render_text(doc)


def _json(doc: dict[str, Any]) -> str:
    """The document as indented ASCII JSON, as ``json.dumps(doc, indent=2)`` writes it — by
    orjson, in a fiftieth of the time (~14 ms for 512 ranks, ~30 for 1,024, after the whole
    parse and analysis). orjson writes other characters as they are; they are escaped as
    ``json`` escapes them, so that any terminal shows the output. A document orjson refuses
    (an integer beyond 64 bits, a key that is not a string) is written by ``json``."""
    import orjson  # loaded while the files are parsed (``prepare_analysis``)

    try:
        opts = orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY
        raw = orjson.dumps(doc, default=str, option=opts)
    except orjson.JSONEncodeError:
        return json.dumps(doc, indent=2, default=str)
    if not raw.isascii():
        # outside its strings JSON is ASCII, so any other character is inside one, where
        # its escape stands for it. The document's own words have a few ("—", "…"): each
        # is replaced at C speed; a log quoted in many scripts goes through the codec
        others = set(raw.translate(None, _ASCII).decode("utf-8"))
        if len(others) > 16:
            return raw.decode("utf-8").encode("ascii", errors=_JSON_ESCAPE).decode("ascii")
        for ch in others:
            raw = raw.replace(ch.encode("utf-8"), _escaped(ch).encode("ascii"))
    return raw.decode("ascii")


_ASCII = bytes(range(128))


def _escaped(text: str) -> str:
    """``text`` as JSON escapes (``\\uXXXX``; a surrogate pair beyond the first plane)."""
    out = []
    for ch in text:
        n = ord(ch)
        if n > 0xFFFF:
            n -= 0x10000
            out.append(f"\\u{0xD800 | (n >> 10):04x}\\u{0xDC00 | (n & 0x3FF):04x}")
        else:
            out.append(f"\\u{n:04x}")
    return "".join(out)


def _json_escape(exc: UnicodeError) -> tuple[str, int]:
    """``codecs`` error handler: the characters ASCII cannot take, as JSON escapes."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    return _escaped(exc.object[exc.start : exc.end]), exc.end


_JSON_ESCAPE = "rankscope-json-escape"
codecs.register_error(_JSON_ESCAPE, _json_escape)


def diagnose(
    paths: Sequence[str | os.PathLike[str]],
    *,
    jobs: int = 0,
    options: Options | None = None,
    scanner: str | None = None,
) -> dict[str, Any]:
    """Parse + analyze: the triage document for ``paths``."""
    from .pipeline import analyze

    results = parse_paths(paths, jobs=jobs, scanner=scanner, meanwhile=prepare_analysis)
    doc = analyze(results, options=options)
    forkpool.reap(wait=True)  # the parse processes have exited during the analysis
    return doc


def triage(
    paths: Sequence[str | os.PathLike[str]],
    *,
    fmt: str = "text",
    jobs: int = 0,
    options: Options | None = None,
    scanner: str | None = None,
) -> str:
    """Parse + analyze + render; the whole offline pipeline in one call."""
    return render(diagnose(paths, jobs=jobs, options=options, scanner=scanner), fmt)


def add_triage_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("paths", nargs="+", metavar="PATH", help="log files, directories or archives")
    p.add_argument("--format", choices=FORMATS, default="text", help="output format")
    p.add_argument("--output", "-o", metavar="FILE", help="write the result here, not stdout")
    p.add_argument("--jobs", type=int, default=0, help="parser processes (default: CPU count)")
    p.add_argument(
        "--scanner", choices=["hyperscan", "re"], default=None, help="force a prefilter engine"
    )
    p.add_argument("--straggler-score", type=float, default=Options().straggler_score)
    return p


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """The ``triage`` arguments (``manage.py triage`` adds them to its own parser)."""
    return add_triage_arguments(
        parser
        or argparse.ArgumentParser(
            prog="rankscope triage",
            description="Triage a distributed training job from its logs.",
        )
    )


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``triage`` for parsed arguments; returns the exit code (see the module doc)."""
    missing = [p for p in args.paths if not Path(p).exists()]
    for p in missing:
        print(f"rankscope triage: {p}: no such file or directory", file=sys.stderr)
    if missing:
        return EXIT_USAGE
    opts = Options(straggler_score=args.straggler_score)
    # What the command has loaded, then what it has parsed, stays until it is done: frozen,
    # the cyclic collector no longer walks it at each full collection (~20-30 ms of the
    # analysis of 1,024 files), nor writes to the pages the parse processes share. Thawed at
    # the end, for a caller that goes on in the same process.
    gc.freeze()
    try:
        return _run(args, out, opts)
    finally:
        gc.unfreeze()


def _run(args: argparse.Namespace, out: TextIO, opts: Options) -> int:
    # While the files are parsed this process only builds their results, which all stay: its
    # cyclic collector, run every 700 allocations, would find nothing (~10 ms of CPU over
    # 512 files, taken from the parse processes on a small machine)
    gc.disable()
    try:
        results = parse_paths(
            args.paths, jobs=args.jobs, scanner=args.scanner, meanwhile=prepare_analysis
        )
    except forkpool.WorkerFailed as exc:  # a parse process killed (out of memory?) or broken
        print(f"rankscope triage: {exc}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        gc.enable()
    gc.freeze()
    if not results:
        print("rankscope triage: no files under the given paths", file=sys.stderr)
        return EXIT_USAGE
    unreadable = [r for r in results if r.error]
    for r in unreadable:
        print(f"rankscope triage: {r.name}: {r.error}", file=sys.stderr)
    if len(unreadable) == len(results):
        return EXIT_USAGE
    from .pipeline import analyze

    doc = analyze(results, options=opts)
    text = render(doc, args.format)
    output = getattr(args, "output", None)
    if output:
        try:
            Path(output).write_text(text, encoding="utf-8")
        except OSError as exc:
            print(f"rankscope triage: cannot write {output}: {exc.strerror}", file=sys.stderr)
            return EXIT_USAGE
    else:
        out.write(text)
    forkpool.reap(wait=True)  # the parse processes exited long ago: no orphans left behind
    return EXIT_OK if doc["triage"]["shape"] == "none" else EXIT_FAILURE_FOUND


def main(argv: Sequence[str] | None = None) -> int:
    # numpy's import starts OpenBLAS's thread pool, whose threads spin on the other core for
    # a while (~40 ms of CPU here, during the parse): the command does no linear algebra
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    top = argparse.ArgumentParser(
        prog="rankscope",
        description="Find out why a distributed training job crashed, hung, slowed down or "
        "diverged, from every rank's logs (offline: no server needed).",
    )
    top.add_argument("--version", action="version", version=f"rankscope {ENGINE_VERSION}")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_triage_arguments(
        sub.add_parser(
            "triage",
            help="diagnose a job from its log files, directories or archives",
            description="Diagnose a job from its log files, directories or archives. "
            "Exit status: 0 no failure found, 1 failure found, 2 bad usage or unreadable input.",
        )
    )
    args = top.parse_args(argv)
    try:
        return run(args, sys.stdout)
    except BrokenPipeError:  # `rankscope triage … | head`
        sys.stderr.close()
        return EXIT_OK


def command() -> NoReturn:
    """The ``rankscope`` command (and ``python -m rankscope``): ``main``, its output
    flushed, then out at once — the interpreter's teardown of a big job's parse results and
    document (~15 ms for 1,024 files) is work for nobody."""
    code = main()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed pipe: nothing more to say
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    command()
