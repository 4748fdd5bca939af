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
from typing import Any

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
    t0 = 1_760_000_000_000_000_000
    files = []
    for r in range(ranks):
        if r in no_dump:
            continue
        tp_ranks = _pg_ranks(r, tp)
        tp_name = str(1 + r // tp)
        groups = {
            0: ("0", "default_pg", list(range(ranks))),
            1: (tp_name, "tp", tp_ranks),
        }
        entries: list[dict[str, Any]] = []
        rid = 0
        last_enq = {0: 0, 1: 0}
        last_done = {0: 0, 1: 0}
        stop = False
        for seq in range(1, seqs + 1):
            # the default group's collective `seq`, then the TP group's
            for pg_id in (0, 1):
                if faulty and (
                    seq > fault_seq or (seq == fault_seq and (pg_id == 1 or r == missing_rank))
                ):
                    stop = True  # blocked in fault_seq (or, the missing rank, before it)
                    break
                op, numel, dtype = "all_reduce", DEFAULT_NUMEL, "Float"
                if pg_id == 0 and seq % 5 == 0:
                    op, numel = "_allgather_base", 4096
                elif pg_id == 1:
                    op, numel, dtype = "_reduce_scatter_base", 2048, "BFloat16"
                state = "completed"
                if pg_id == 0 and faulty and seq == fault_seq:
                    state = "scheduled"
                    if r == size_rank:
                        numel += 1024
                    if r == dtype_rank:
                        dtype = "Half"
                    if r == type_rank:
                        op = "broadcast"
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
                        t0=t0,
                    )
                )
                last_enq[pg_id] = seq
                if state == "completed":
                    last_done[pg_id] = seq
            if stop:
                break
        entries = entries[-max(1, buffer - wrap.get(r, 0)) :]
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
        host = f"container-node{r // 8:02d}_" if host_in_name else ""
        path = out / f"{prefix}{host}{r}"
        if fmt == "json":
            for st in pg_status.values():
                for k in st:
                    st[k] = str(st[k])
            text = json.dumps(dump, indent=2 if pretty else None, sort_keys=True)
            path.write_text(text + "\n")
        else:
            path.write_bytes(pickle.dumps(dump, protocol=pickle.HIGHEST_PROTOCOL))
        files.append(path.name)
    culprits: list[int] = []
    kind = "none"
    if missing_rank is not None:
        culprits, kind = [missing_rank], "missing"
    elif size_rank is not None:
        culprits, kind = [size_rank], "size"
    elif dtype_rank is not None:
        culprits, kind = [dtype_rank], "dtype"
    elif type_rank is not None:
        culprits, kind = [type_rank], "type"
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
