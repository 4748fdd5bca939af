"""Flight-recorder dumps (PyTorch ``DebugInfoWriter``): pickle or JSON, one per global rank.

Pickles are read with ``SafeUnpickler``, whose ``find_class`` refuses every
class: FR dumps only hold dicts, lists, tuples, str, int, float, bool and None,
so a pickle that names any class is hostile or not an FR dump, and is reported
(``ParseResult.error``), never loaded.
"""

from __future__ import annotations

import io
import json
import re
from typing import Any, BinaryIO

from .._lazy import lazy_compile
from ..detect import Head, Recognizer, basename, rank_from_name
from ..model import Event, ParseResult
from . import ParseError, Progress, register_parser

MAX_BYTES = 256 << 20
KEEP_ENTRIES = 2000  # newest entries kept per process group (what the cross-rank check compares)
KEEP_TOTAL = 10_000  # newest entries kept per dump over all its process groups
MAX_TENSORS = 16  # shapes kept per entry side (numel totals stay exact)
MAX_QUOTE = 600  # characters of a compact JSON entry quoted as evidence

_SUFFIX_RANK = lazy_compile(r"(\d+)(?:\.(?:json|pkl|pickle|bin|dump))?$", re.I)
_SEQ_KEY = lazy_compile(rb'"collective_seq_id"\s*:')


def safe_loads(data: bytes) -> Any:
    import pickle  # here: only a pickled dump needs it, not every run's start-up

    class SafeUnpickler(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Any:
            raise pickle.UnpicklingError(
                f"refused to load class {module}.{name}: not a flight-recorder dump"
            )

    return SafeUnpickler(io.BytesIO(data)).load()


def _num(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _op(profiling_name: str) -> str:
    # "nccl:all_reduce" → "all_reduce"; "nccl:send 1->2" → "send"
    return profiling_name.split(":", 1)[-1].split(" ", 1)[0] if profiling_name else ""


def rank_of_dump(name: str) -> int | None:
    """Global rank from a dump's file name: ``DebugInfoWriter`` writes ``{prefix}{rank}``.

    The numeric suffix wins (``nccl_trace_rank_container-node02_5`` → 5), then a
    ``rank_N`` token anywhere in the name.
    """
    m = _SUFFIX_RANK.search(basename(name))
    if m:
        return int(m.group(1))
    return rank_from_name(name)


def parse_ranks(text: Any) -> list[list[int]] | None:
    """``pg_config`` ``ranks`` (``"[0, 1, 2]"``) → ranges ``[[0, 2]]``; None when it names none."""
    if isinstance(text, list | tuple):
        nums = [n for n in (_num(x) for x in text) if n is not None]
    else:
        nums = [int(x) for x in re.findall(r"\d+", str(text))]
    if not nums:
        return None
    out: list[list[int]] = []
    for n in sorted(set(nums)):
        if out and out[-1][1] == n - 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return out


def _shapes(v: Any) -> tuple[list[list[int]], int, int]:
    """Per-tensor shapes (first ``MAX_TENSORS``), tensor count and total numel."""
    if not isinstance(v, list | tuple):
        return [], 0, 0
    shapes: list[list[int]] = []
    total = 0
    for t in v:
        dims = (
            [d for d in (_num(x) for x in t) if d is not None]
            if isinstance(t, list | tuple)
            else []
        )
        n = 1
        for d in dims:
            n *= d
        total += n
        if len(shapes) < MAX_TENSORS:
            shapes.append(dims[:8])
    return shapes, len(v), total


def _dtypes(v: Any) -> list[str]:
    return [str(x)[:32] for x in v[:MAX_TENSORS]] if isinstance(v, list | tuple) else []


def _json_locations(data: bytes, n_entries: int) -> list[tuple[int, int]] | None:
    """(1-based line, byte offset) of each entry's ``"collective_seq_id"`` key, in entry order."""
    locs: list[tuple[int, int]] = []
    line, prev = 1, 0
    for m in _SEQ_KEY.finditer(data):
        line += data.count(b"\n", prev, m.start())
        prev = m.start()
        locs.append((line, m.start()))
    return locs if len(locs) == n_entries else None


def _json_quote(data: bytes, pos: int) -> str:
    """The raw text that shows the entry: the whole entry when it sits on one line, else its line."""
    ls = data.rfind(b"\n", 0, pos) + 1
    le = data.find(b"\n", pos)
    le = len(data) if le < 0 else le
    brace = data.rfind(b"{", 0, pos)
    close = data.find(b"}", pos)
    if brace >= ls and 0 <= close < le:
        raw = data[brace : min(close + 1, brace + MAX_QUOTE)]
    else:
        raw = data[ls:le][:MAX_QUOTE]
    return raw.decode("utf-8", errors="replace").rstrip("\r")


def describe_entry(pg: str, e: dict[str, Any]) -> str:
    """What a pickle entry says, as evidence text (a pickle has no line to quote)."""
    return (
        f"entry record_id={e['record_id']} pg {pg} {e.get('profiling_name') or e['op']} "
        f"collective_seq_id={e['seq']} state={e['state']} input_sizes={e['input_sizes']} "
        f"output_sizes={e['output_sizes']} input_dtypes={e['input_dtypes']}"
    )[:MAX_QUOTE]


_FR_NAME = lazy_compile(
    r"(?:nccl_trace_rank_|comm_lib_trace_rank_|fr_trace|flight_?recorder)", re.I
)


def _is_flight_recorder(h: Head) -> bool:
    if h.head[:1] == b"\x80" and len(h.head) > 1 and h.head[1] <= 5:
        return True  # a pickle; only the restricted loader will read it
    if _FR_NAME.search(h.base) and (
        h.has('"pg_status"') or h.has('"entries"') or h.head[:1] == b"\x80"
    ):
        return True
    return h.has('"pg_status"') and h.has('"version"') and h.text.lstrip().startswith("{")


def _read_capped(stream: BinaryIO) -> bytes:
    """The whole dump (a dump is one object), refused past ``MAX_BYTES``."""
    chunks: list[bytes] = []
    size = 0
    while size <= MAX_BYTES:  # a wrapped stream may return short reads
        chunk = stream.read(min(8 << 20, MAX_BYTES + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    data = b"".join(chunks)
    if len(data) > MAX_BYTES:
        raise ParseError(f"flight-recorder dump larger than {MAX_BYTES >> 20} MiB; skipped")
    return data


def _load(data: bytes) -> tuple[dict[str, Any], str]:
    """The dump and its format (``pickle`` through the restricted loader, or ``json``)."""
    if data[:1] == b"\x80":
        import pickle

        try:
            dump = safe_loads(data)
        except pickle.UnpicklingError as exc:
            raise ParseError(f"pickle refused: {exc}") from None
        except Exception as exc:
            raise ParseError(f"not a readable pickle: {type(exc).__name__}: {exc}") from None
        fmt = "pickle"
    else:
        try:
            dump = json.loads(data.decode("utf-8", errors="replace"))
        except ValueError as exc:
            raise ParseError(
                f"not a flight-recorder dump (neither pickle nor JSON): {exc}"
            ) from None
        fmt = "json"
    if not isinstance(dump, dict) or ("entries" not in dump and "pg_status" not in dump):
        raise ParseError("not a flight-recorder dump: no 'entries' or 'pg_status'")
    return dump, fmt


def _dump_rank(dump: dict[str, Any], result: ParseResult) -> int | None:
    """The rank the dump states, else the file name's; a disagreement is warned about."""
    rank = rank_of_dump(result.name)
    own = _num(dump.get("rank", dump.get("global_rank")))
    if own is not None:
        if rank is not None and rank != own:
            result.warn(f"the file name says rank {rank}, the dump says rank {own}; using {own}")
        rank = own
    if rank is None:
        result.warn("the rank could not be told from the dump's file name")
    return rank


def _pg_status(dump: dict[str, Any]) -> dict[str, Any]:
    pg_status: dict[str, Any] = {}
    for pg, st in (dump.get("pg_status") or {}).items():
        if isinstance(st, dict):
            pg_status[str(pg)] = {
                "last_enqueued": _num(st.get("last_enqueued_collective")),
                "last_started": _num(st.get("last_started_collective")),
                "last_completed": _num(st.get("last_completed_collective")),
            }
    return pg_status


def _pg_config(dump: dict[str, Any]) -> dict[str, Any]:
    pg_config = {}
    for gname, cfg in (dump.get("pg_config") or {}).items():
        if isinstance(cfg, dict):
            pg_config[str(gname)] = {
                "desc": str(cfg.get("desc", ""))[:200],
                "ranks": parse_ranks(cfg.get("ranks", "")),
            }
    return pg_config


def _by_group(
    raw_entries: list[Any],
) -> tuple[dict[str, list[tuple[int, dict[str, Any]]]], dict[str, list[str]]]:
    """Entries (with their index in the dump) per process group, and each group's names."""
    by_pg: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    pg_names: dict[str, list[str]] = {}
    for i, e in enumerate(raw_entries):
        if not isinstance(e, dict):
            continue
        pgt = e.get("process_group") or ("", "")
        pgt = pgt if isinstance(pgt, list | tuple) else (str(pgt), "")
        pg = str(e.get("pg_id", pgt[0] if pgt else ""))
        if pg not in pg_names:
            pg_names[pg] = [str(pgt[0]) if pgt else "", str(pgt[1]) if len(pgt) > 1 else ""]
        by_pg.setdefault(pg, []).append((i, e))
    return by_pg, pg_names


def _entry(e: dict[str, Any], where: tuple[int, str] | None) -> dict[str, Any]:
    """One entry as kept: op, state, sizes, dtypes; ``where`` is its JSON (line, quote)."""
    ins, n_in, numel_in = _shapes(e.get("input_sizes"))
    outs, n_out, numel_out = _shapes(e.get("output_sizes"))
    pname = str(e.get("profiling_name", ""))[:120]
    x: dict[str, Any] = {
        "record_id": _num(e.get("record_id")),
        "seq": _num(e.get("collective_seq_id")),
        "p2p_seq": _num(e.get("p2p_seq_id")),
        "op": _op(pname),
        "profiling_name": pname,
        "state": str(e.get("state", ""))[:20],
        "input_sizes": ins,
        "output_sizes": outs,
        "n_inputs": n_in,
        "n_outputs": n_out,
        "input_numel": numel_in,
        "output_numel": numel_out,
        "input_dtypes": _dtypes(e.get("input_dtypes")),
        "output_dtypes": _dtypes(e.get("output_dtypes")),
        "timeout_ms": _num(e.get("timeout_ms")),
        "is_p2p": bool(e.get("is_p2p", False)),
    }
    if where is not None:
        x["line"], x["text"], x["described"] = where[0], where[1], False
    else:
        x["line"], x["described"] = 1, True  # text: describe_entry() when shown
    return x


def _status_event(
    pg: str, st: dict[str, Any], entries: list[dict[str, Any]], rank: int, file: str
) -> Event:
    """One group's ``fr_status``: its counters and the first collective not completed."""
    pending = [x for x in entries if x["state"] != "completed" and not x["is_p2p"]]
    first = pending[0] if pending else None
    text = (
        f"pg_status[{pg}]: last_enqueued_collective={st['last_enqueued']}, "
        f"last_completed_collective={st['last_completed']}"
    )
    return Event(
        kind="fr_status",
        line=1,
        text=text,
        rank=rank,
        fields={
            "pg": pg,
            "last_enqueued": st["last_enqueued"],
            "last_completed": st["last_completed"],
            "seq": first["seq"] if first else None,
            "op": first["op"].upper() if first else None,
            "timeout_ms": first["timeout_ms"] if first else None,
            "synthetic_text": True,
            "described": True,
        },
        file=file,
    )


class FlightRecorderParser:
    name = "flight_recorder"
    kinds = ("flight_recorder",)
    recognizers = (
        Recognizer(
            "flight_recorder", 10, _is_flight_recorder, ('"pg_status"', '"entries"', '"version"')
        ),
    )

    def parse(self, stream: BinaryIO, result: ParseResult, progress: Progress | None) -> None:
        data = _read_capped(stream)
        result.bytes = len(data)
        dump, fmt = _load(data)
        rank = _dump_rank(dump, result)
        pg_status = _pg_status(dump)
        pg_config = _pg_config(dump)
        raw_entries = dump.get("entries") or []
        if not isinstance(raw_entries, list):
            raw_entries = []
        locs = _json_locations(data, len(raw_entries)) if fmt == "json" else None
        by_pg, pg_names = _by_group(raw_entries)
        per_pg = max(100, min(KEEP_ENTRIES, KEEP_TOTAL // max(1, len(by_pg))))
        entries = {
            pg: [
                _entry(e, (locs[i][0], _json_quote(data, locs[i][1])) if locs is not None else None)
                for i, e in lst[-per_pg:]
            ]
            for pg, lst in by_pg.items()
        }
        result.flight_recorder = {
            "format": fmt,
            "version": str(dump.get("version", "")),
            "rank": rank,
            "pg_status": pg_status,
            "pg_config": pg_config,
            "pg_names": pg_names,
            "entries": entries,
            "entry_counts": {pg: len(lst) for pg, lst in by_pg.items()},
        }
        if rank is not None:
            result.ranks = [rank]
            for pg, st in pg_status.items():
                result.events.append(_status_event(pg, st, entries.get(pg, []), rank, result.name))
        result.lines = data.count(b"\n") + 1 if fmt == "json" else 1


register_parser(FlightRecorderParser())
