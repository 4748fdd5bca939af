"""Flight-recorder dumps (PyTorch ``DebugInfoWriter``): pickle or JSON, one per global rank.

Pickles are read with ``SafeUnpickler``, whose ``find_class`` refuses every
class: FR dumps only hold dicts, lists, tuples, str, int, float, bool and None,
so a pickle that names any class is hostile or not an FR dump, and is reported
(``ParseResult.error``), never loaded.
"""

from __future__ import annotations

import io
import json
import pickle
from typing import Any, BinaryIO

from ..detect import rank_from_name
from ..model import Event, ParseResult
from . import ParseError, Progress, register_parser

MAX_BYTES = 256 << 20
KEEP_ENTRIES = 64  # newest entries kept per process group


class SafeUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(
            f"refused to load class {module}.{name}: not a flight-recorder dump"
        )


def safe_loads(data: bytes) -> Any:
    return SafeUnpickler(io.BytesIO(data)).load()


def _num(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _op(profiling_name: str) -> str:
    # "nccl:all_reduce" → "all_reduce"; "nccl:send 1->2" → "send"
    return profiling_name.split(":", 1)[-1].split(" ", 1)[0] if profiling_name else ""


class FlightRecorderParser:
    name = "flight_recorder"
    kinds = ("flight_recorder",)

    def parse(self, stream: BinaryIO, result: ParseResult, progress: Progress | None) -> None:
        data = stream.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            raise ParseError(f"flight-recorder dump larger than {MAX_BYTES >> 20} MiB; skipped")
        result.bytes = len(data)
        if data[:1] == b"\x80":
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
        rank = rank_from_name(result.name)
        if rank is None:
            digits = "".join(ch for ch in reversed(result.name) if ch.isdigit())
            rank = int(digits[::-1]) if digits and result.name[-1].isdigit() else None
        if rank is None:
            result.warn("the rank could not be told from the dump's file name")
        pg_status: dict[str, Any] = {}
        for pg, st in (dump.get("pg_status") or {}).items():
            if isinstance(st, dict):
                pg_status[str(pg)] = {
                    "last_enqueued": _num(st.get("last_enqueued_collective")),
                    "last_started": _num(st.get("last_started_collective")),
                    "last_completed": _num(st.get("last_completed_collective")),
                }
        pg_config = {}
        for gname, cfg in (dump.get("pg_config") or {}).items():
            if isinstance(cfg, dict):
                pg_config[str(gname)] = {
                    "desc": str(cfg.get("desc", "")),
                    "ranks": str(cfg.get("ranks", ""))[:2000],
                }
        by_pg: dict[str, list[dict[str, Any]]] = {}
        for e in dump.get("entries") or []:
            if not isinstance(e, dict):
                continue
            pgt = e.get("process_group") or ("", "")
            pg = str(e.get("pg_id", pgt[0] if isinstance(pgt, list | tuple) and pgt else ""))
            by_pg.setdefault(pg, []).append(
                {
                    "record_id": _num(e.get("record_id")),
                    "seq": _num(e.get("collective_seq_id")),
                    "p2p_seq": _num(e.get("p2p_seq_id")),
                    "op": _op(str(e.get("profiling_name", ""))),
                    "state": str(e.get("state", "")),
                    "input_sizes": str(e.get("input_sizes", ""))[:200],
                    "output_sizes": str(e.get("output_sizes", ""))[:200],
                    "dtypes": str(e.get("input_dtypes", ""))[:100],
                    "timeout_ms": _num(e.get("timeout_ms")),
                    "is_p2p": bool(e.get("is_p2p", False)),
                    "group": str(pgt[0]) if isinstance(pgt, list | tuple) and pgt else "",
                    "desc": str(pgt[1]) if isinstance(pgt, list | tuple) and len(pgt) > 1 else "",
                }
            )
        entries = {pg: lst[-KEEP_ENTRIES:] for pg, lst in by_pg.items()}
        result.flight_recorder = {
            "format": fmt,
            "version": str(dump.get("version", "")),
            "rank": rank,
            "pg_status": pg_status,
            "pg_config": pg_config,
            "entries": entries,
            "entry_counts": {pg: len(lst) for pg, lst in by_pg.items()},
        }
        if rank is not None:
            result.ranks = [rank]
            for pg, st in pg_status.items():
                pending = [
                    x for x in entries.get(pg, []) if x["state"] != "completed" and not x["is_p2p"]
                ]
                first = pending[0] if pending else None
                text = (
                    f"pg_status[{pg}]: last_enqueued_collective={st['last_enqueued']}, "
                    f"last_completed_collective={st['last_completed']}"
                )
                result.events.append(
                    Event(
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
                        },
                        file=result.name,
                    )
                )
        result.lines = 1


register_parser(FlightRecorderParser())
