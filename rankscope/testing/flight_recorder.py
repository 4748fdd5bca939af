"""Flight-recorder dumps for N ranks, as ``DebugInfoWriter`` writes them (one file per global rank).

``write_dumps(out, ranks=8, ...)`` writes pickles (plain dict/list/tuple/str/int/float/
bool/None only, as ``FlightRecorder::dump_dict`` pickles them) or JSON
(``dump_json``: ``pg_config``/``pg_status`` values as strings, no ``frames``,
``time_discovered_*`` 0 when unknown), in the key layout of FR 2.4, 2.7 or 2.10,
and returns a manifest of what a correct cross-rank analysis concludes.

The job: every rank runs the same training loop on the default group and on a
tensor-parallel subgroup of ``tp`` consecutive ranks; ``seqs`` collectives per
group, the ring buffer holds the last ``buffer`` entries per rank.

Faults (at collective ``fault_seq`` of the default group):
- ``missing_rank``: the rank never enqueues ``fault_seq`` (stuck outside NCCL);
  the others enqueued it and wait (``scheduled``).
- ``size_rank`` / ``dtype_rank`` / ``type_rank``: the rank enqueues a different
  size / dtype / op at ``fault_seq``; every rank then hangs in it.
- ``no_dump``: ranks whose dump file is not written at all.
- ``wrap``: rank → how many fewer entries that rank's ring buffer kept (it
  wrapped further: its oldest entries are gone, its first record_id is higher).
"""

from __future__ import annotations

import argparse
import json
import pickle
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

DEFAULT_NUMEL = 1_571_911


def _pg_ranks(rank: int, tp: int) -> list[int]:
    base = rank - rank % tp
    return list(range(base, base + tp))


def _entry(
    *,
    version: str,
    fmt: str,
    record_id: int,
    pg_id: int,
    group: tuple[str, str],
    seq: int,
    op: str,
    numel: int,
    dtype: str,
    state: str,
    pg_size: int,
    t0: int,
) -> dict[str, Any]:
    ins, outs = [[numel]], [[numel]]
    if op in ("_allgather_base", "all_gather"):
        outs = [[numel * pg_size]]
    elif op in ("_reduce_scatter_base", "reduce_scatter"):
        ins = [[numel * pg_size]]
    done = state == "completed"
    e: dict[str, Any] = {
        "record_id": record_id,
        "pg_id": pg_id,
        "process_group": list(group) if fmt == "json" else group,
        "collective_seq_id": seq,
        "p2p_seq_id": 0,
        "op_id": seq,
        "profiling_name": f"nccl:{op}",
        "time_created_ns": t0 + record_id * 1_000_000,
        "duration_ms": 1.25 if done else None,
        "input_sizes": ins,
        "output_sizes": outs,
        "input_dtypes": [dtype],
        "output_dtypes": [dtype],
        "state": state,
        "time_discovered_started_ns": (t0 + record_id * 1_000_000 + 1000) if done else None,
        "time_discovered_completed_ns": (t0 + record_id * 1_000_000 + 2000) if done else None,
        "retired": done,
        "timeout_ms": 600_000,
        "is_p2p": False,
    }
    if fmt == "json":
        if not done:
            e.pop("duration_ms")
        for k in ("time_discovered_started_ns", "time_discovered_completed_ns"):
            e[k] = e[k] or 0
    else:
        e["frames"] = [
            {
                "name": "all_reduce",
                "filename": "torch/distributed/distributed_c10d.py",
                "line": 2501,
            },
            {"name": "train_step", "filename": "train.py", "line": 88},
        ]
    if version != "2.4":
        e["thread_name"] = "pt_main_thread"
        e["thread_id"] = "140212345678912"
    return e


Group = tuple[str, str, list[int]]


class _Fault(NamedTuple):
    """The injected fault: whether there is one, at which default-group seq, and which rank."""

    faulty: bool
    seq: int
    missing_rank: int | None
    size_rank: int | None
    dtype_rank: int | None
    type_rank: int | None


_T0 = 1_760_000_000_000_000_000


def write_dumps(
    out: str | Path,
    *,
    ranks: int = 8,
    tp: int = 2,
    seqs: int = 40,
    buffer: int = 2000,
    fmt: str = "pickle",
    version: str = "2.10",
    pretty: bool = True,
    fault_seq: int | None = None,
    missing_rank: int | None = None,
    size_rank: int | None = None,
    dtype_rank: int | None = None,
    type_rank: int | None = None,
    no_dump: Iterable[int] = (),
    wrap: dict[int, int] | None = None,
    prefix: str | None = None,
    host_in_name: bool = False,
) -> dict[str, Any]:
    """Write one dump per rank under ``out``; return the manifest (see the module doc)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    wrap = wrap or {}
    no_dump = set(no_dump)
    if fault_seq is None:
        fault_seq = seqs
    if prefix is None:
        prefix = "comm_lib_trace_rank_" if version == "2.10" else "nccl_trace_rank_"
    faulty = missing_rank is not None or any(
        x is not None for x in (size_rank, dtype_rank, type_rank)
    )
    fault = _Fault(faulty, fault_seq, missing_rank, size_rank, dtype_rank, type_rank)
    files = []
    for r in range(ranks):
        if r in no_dump:
            continue
        groups = _groups(r, ranks, tp)
        entries, last_enq, last_done = _entries(r, groups, seqs, fault, version, fmt)
        entries = entries[-max(1, buffer - wrap.get(r, 0)) :]
        dump = _dump(version, groups, last_enq, last_done, entries)
        host = f"container-node{r // 8:02d}_" if host_in_name else ""
        path = out / f"{prefix}{host}{r}"
        _write_dump(path, dump, fmt, pretty)
        files.append(path.name)
    culprits, kind = _fault_kind(missing_rank, size_rank, dtype_rank, type_rank)
    return {
        "ranks": ranks,
        "files": files,
        "fault": kind,
        "fault_seq": fault_seq if kind != "none" else None,
        "culprit_ranks": culprits,
        "no_dump": sorted(no_dump),
        "format": fmt,
        "version": version,
    }


def _groups(r: int, ranks: int, tp: int) -> dict[int, Group]:
    """Rank ``r``'s process groups by pg_id: the default group and its tensor-parallel group."""
    return {
        0: ("0", "default_pg", list(range(ranks))),
        1: (str(1 + r // tp), "tp", _pg_ranks(r, tp)),
    }


def _entries(
    r: int, groups: dict[int, Group], seqs: int, fault: _Fault, version: str, fmt: str
) -> tuple[list[dict[str, Any]], dict[int, int], dict[int, int]]:
    """Rank ``r``'s ring-buffer entries (before wrapping) and its last enqueued/completed seqs."""
    entries: list[dict[str, Any]] = []
    rid = 0
    last_enq = {0: 0, 1: 0}
    last_done = {0: 0, 1: 0}
    for seq in range(1, seqs + 1):
        # the default group's collective `seq`, then the TP group's
        for pg_id in (0, 1):
            if fault.faulty and (
                seq > fault.seq or (seq == fault.seq and (pg_id == 1 or r == fault.missing_rank))
            ):
                # blocked in fault_seq (or, the missing rank, before it)
                return entries, last_enq, last_done
            op, numel, dtype, state = _collective(r, pg_id, seq, fault)
            rid += 1
            name, desc, members = groups[pg_id]
            entries.append(
                _entry(
                    version=version,
                    fmt=fmt,
                    record_id=rid,
                    pg_id=pg_id,
                    group=(name, desc),
                    seq=seq,
                    op=op,
                    numel=numel,
                    dtype=dtype,
                    state=state,
                    pg_size=len(members),
                    t0=_T0,
                )
            )
            last_enq[pg_id] = seq
            if state == "completed":
                last_done[pg_id] = seq
    return entries, last_enq, last_done


def _collective(r: int, pg_id: int, seq: int, fault: _Fault) -> tuple[str, int, str, str]:
    """What rank ``r`` enqueues as collective ``seq`` of group ``pg_id``: op, numel, dtype, state."""
    op, numel, dtype = "all_reduce", DEFAULT_NUMEL, "Float"
    if pg_id == 0 and seq % 5 == 0:
        op, numel = "_allgather_base", 4096
    elif pg_id == 1:
        op, numel, dtype = "_reduce_scatter_base", 2048, "BFloat16"
    state = "completed"
    if pg_id == 0 and fault.faulty and seq == fault.seq:
        state = "scheduled"
        if r == fault.size_rank:
            numel += 1024
        if r == fault.dtype_rank:
            dtype = "Half"
        if r == fault.type_rank:
            op = "broadcast"
    return op, numel, dtype, state


def _dump(
    version: str,
    groups: dict[int, Group],
    last_enq: dict[int, int],
    last_done: dict[int, int],
    entries: list[dict[str, Any]],
) -> dict[str, Any]:
    """One rank's dump in the key layout of ``version``."""
    pg_config = {
        name: {"name": name, "desc": desc, "ranks": str(members)}
        for name, desc, members in groups.values()
    }
    pg_status: dict[str, Any] = {
        str(pg): {
            "last_enqueued_collective": last_enq[pg],
            "last_started_collective": -1,
            "last_completed_collective": last_done[pg],
        }
        for pg in groups
    }
    dump: dict[str, Any] = {"version": version}
    if version == "2.10":
        dump["comm_lib_version"] = "2.27.5"
    elif version == "2.7":
        dump["nccl_version"] = "2.21.5"
    dump["pg_config"] = pg_config
    dump["pg_status"] = pg_status
    dump["entries"] = entries
    return dump


def _write_dump(path: Path, dump: dict[str, Any], fmt: str, pretty: bool) -> None:
    """Write a dump as ``dump_json`` writes it (status values as strings) or as ``dump_dict`` pickles it."""
    if fmt == "json":
        for st in dump["pg_status"].values():
            for k in st:
                st[k] = str(st[k])
        text = json.dumps(dump, indent=2 if pretty else None, sort_keys=True)
        path.write_text(text + "\n")
    else:
        path.write_bytes(pickle.dumps(dump, protocol=pickle.HIGHEST_PROTOCOL))


def _fault_kind(
    missing_rank: int | None,
    size_rank: int | None,
    dtype_rank: int | None,
    type_rank: int | None,
) -> tuple[list[int], str]:
    """The manifest's culprit ranks and fault kind (the first fault given wins)."""
    if missing_rank is not None:
        return [missing_rank], "missing"
    if size_rank is not None:
        return [size_rank], "size"
    if dtype_rank is not None:
        return [dtype_rank], "dtype"
    if type_rank is not None:
        return [type_rank], "type"
    return [], "none"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("outdir")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--format", choices=("pickle", "json"), default="pickle")
    ap.add_argument("--version", choices=("2.4", "2.7", "2.10"), default="2.10")
    ap.add_argument("--fault-seq", type=int)
    ap.add_argument("--missing-rank", type=int)
    ap.add_argument("--size-rank", type=int)
    ap.add_argument("--dtype-rank", type=int)
    ap.add_argument("--type-rank", type=int)
    ap.add_argument("--no-dump", type=int, nargs="*", default=[])
    a = ap.parse_args(argv)
    m = write_dumps(
        a.outdir,
        ranks=a.ranks,
        fmt=a.format,
        version=a.version,
        fault_seq=a.fault_seq,
        missing_rank=a.missing_rank,
        size_rank=a.size_rank,
        dtype_rank=a.dtype_rank,
        type_rank=a.type_rank,
        no_dump=a.no_dump,
    )
    print(json.dumps(m, indent=2))


if __name__ == "__main__":
    main()
