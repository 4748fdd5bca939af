"""The text-log parser: worker stderr/stdout (per node or per rank), dmesg, SLURM output.

One pass over the file in large binary chunks:
1. the prefilter (``scan.get_scanner``) nominates candidate lines in each chunk;
2. each candidate is decoded (``errors="replace"``), peeled of its envelope and
   classified precisely (``classify.classify``); a message cut by terminal
   wrapping is retried with the next line(s) joined;
3. line numbers come from counting ``\\n`` between candidates;
4. the head and the tail of the file are read with full regexes for job facts
   (``facts.read_region``).
Memory is bounded by the chunk size, the head/tail sizes and the event caps.
"""

from __future__ import annotations

import io
import mmap
import os
import re
import stat
import time
from operator import itemgetter
from typing import Any, BinaryIO

from ..detect import Head, Recognizer, host_from_name, rank_from_name
from ..envelope import Envelope, find_time, iso_from_text, peel
from ..model import MAX_EVENT_TEXT, MAX_EVENTS_PER_KIND_PER_RANK, Event, ParseResult
from ..scan import get_scanner
from ..signatures import Signature
from ..signatures import match as match_signature
from . import Progress, register_parser
from .classify import NCCL_HOST, classify
from .facts import read_region
from .newlines import SIMD_BYTES, NewlineCounter
from .sidecar import NOT_SCANNED, SideReaders

CHUNK = 2 << 20
HEAD = 24 << 10
TAIL = 16 << 10
INDEX_STEP = 1 << 20
MAX_LINE = 4 << 20  # a "line" longer than this is cut (binary junk, a minified blob)
# kinds where the last occurrence matters as much as the first
_KEEP_LAST = {
    "nccl_progress",
    "python_exception",  # what the process died of is its last exception
    "traceback",
    "exception_chain",
    "retry",
    "connection_error",
    "nan_loss",
    "run_succeeded",
    "checkpoint_saved",
    "checkpoint_save",
}
# readings of the structural readers that a catalogue signature on the same line refines
GENERIC_KINDS = {
    "python_exception",
    "traceback",
    "cuda_error",
    "ecc_error",  # what a runtime did on it (the NVHPC runtime aborts) is the signature's
    "nccl_warn",
    "nccl_error",
    "network_error",
    "connection_error",
    "segfault",
    "data_error",
    "storage_error",
    "host_oom_kill",
    "nan_detected",
    "agent_signal",  # which signal, and who sent it, is what the line means
}
# a traceback echoes the source line that raised: its message text is not the message
_CODE_STARTS = ("raise ", 'f"', "f'", "assert ", "print(", "logger.", "logging.", "warnings.warn(")


def _is_code(msg: str) -> bool:
    return msg.lstrip().startswith(_CODE_STARTS)


# a point of a block: (start, 1 for a candidate line or 0 for an index mark, end, signatures)
_POINT_ORDER = itemgetter(0, 1)
# parse buffers kept for the next file parsed in this process (one per concurrent parse)
_BUFFERS: list[bytearray] = []
_NCCL_KINDS = {
    "watchdog_timeout",
    "watchdog_failure",
    "async_exception",
    "blocking_wait_timeout",
    "comm_aborted",
    "watchdog_exit",
}


# NCCL messages a fixed-width terminal may split right before their marker words
_NCCL_WRAPPED = _NCCL_KINDS | {
    "watchdog_hang",
    "dump_first",
    "dump_observed",
    "dump_received",
    "fatal_terminate",
}


def _bare(env: Any) -> bool:
    """A physical line with no envelope at all (a continuation of a wrapped line)."""
    return env.rank is None and env.level is None and not env.wrapped


def _join_back(
    block: bytearray, s: int, msg: str, kind: str, needs_more: bool = False
) -> tuple[str, Any, tuple[str, dict[str, Any]], str, bool] | None:
    """The line above carries a glog envelope and no message of its own that we know, and
    with this line appended it reads as the same message: the message starts there. When
    this line was itself cut (``needs_more``), the joined message may still be: it goes on
    on the next lines. (raw line above, its envelope, the reading, the joined message,
    whether it still needs the next lines)"""
    if s <= 0 or block[s - 1 : s] != b"\n":
        return None
    p0 = block.rfind(b"\n", 0, s - 1) + 1
    praw = block[p0 : s - 1].decode("utf-8", errors="replace").rstrip("\r")
    penv = peel(praw)
    if penv.level is None or classify(penv.message)[0] is not None:
        return None
    for joiner in ("", " "):
        (r2, more2) = classify(penv.message + joiner + msg)
        if r2 is not None and r2[0] == kind and (not more2 or needs_more):
            return praw, penv, r2, penv.message + joiner + msg, more2
    return None


class _Collector:
    """Applies the per-(kind, rank) cap while keeping true counts. A line a catalogue
    signature read is capped per signature (many lines of one message must not crowd out
    another) and its last occurrence is kept (the verdict cites where a series ended)."""

    def __init__(self, result: ParseResult) -> None:
        self.result = result
        self.per_key: dict[tuple[str, int | None, Any], int] = {}
        self.last: dict[tuple[str, int | None, Any], Event] = {}

    def add(self, ev: Event) -> None:
        counts = self.result.event_counts
        counts[ev.kind] = counts.get(ev.kind, 0) + 1
        sig = ev.fields.get("sig")
        key = (ev.kind, ev.rank, sig)
        n = self.per_key.get(key, 0) + 1
        self.per_key[key] = n
        if n <= MAX_EVENTS_PER_KIND_PER_RANK:
            self.result.events.append(ev)
        elif ev.kind in _KEEP_LAST or sig is not None:
            ev.fields["nth"] = n
            self.last[key] = ev

    def finish(self) -> None:
        self.result.events.extend(self.last.values())
        self.result.events.sort(key=lambda e: e.line)


class _Summary:
    """Assembles torchrun ChildFailedError summaries from their field lines."""

    def __init__(self, collector: _Collector, name: str) -> None:
        self.c = collector
        self.name = name
        self.root_section = False
        self.cur: dict[str, Any] | None = None

    def marker(self) -> None:
        self.flush()
        self.root_section = True

    def field(self, key: str, value: str, line: int, text: str) -> None:
        if key == "time" or self.cur is None:
            self.flush()
            self.cur = {"fields": {"root_cause": self.root_section}, "line": line, "text": text}
        f = self.cur["fields"]
        if key == "time":
            f["time_text"] = value
        elif key == "host":
            f["host"] = value
        elif key == "rank":
            parts = value.replace("(", " ").replace(")", " ").replace(":", " ").split()
            if parts and parts[0].lstrip("-").isdigit():
                f["rank"] = int(parts[0])
            if "local_rank" in parts:
                i = parts.index("local_rank")
                if i + 1 < len(parts) and parts[i + 1].isdigit():
                    f["local_rank"] = int(parts[i + 1])
            self.cur["line"], self.cur["text"] = line, text
        elif key == "exitcode":
            head = value.split()[0] if value.split() else ""
            if head.lstrip("-").isdigit():
                f["exitcode"] = int(head)
        elif key in ("error_file", "traceback"):
            f[key] = value[:300]
            if key == "traceback":
                if value.startswith("Signal "):
                    # "Signal 9 (SIGKILL) received by PID …" is what shows the worker was killed
                    self.cur["line"], self.cur["text"] = line, text
                self.flush()

    def flush(self) -> None:
        if self.cur is None:
            return
        f = self.cur["fields"]
        ev = Event(
            kind="torchrun_failure",
            line=self.cur["line"],
            text=self.cur["text"],
            rank=f.get("rank"),
            host=f.get("host"),
            time=iso_from_text(f.get("time_text", "")),
            level="E",
            fields=f,
            file=self.name,
        )
        self.c.add(ev)
        if f.get("root_cause"):
            self.root_section = False
        self.cur = None


def _is_slurm_job(h: Head) -> bool:
    """scontrol/sacct text, or the controller epilog's JSON record."""
    # the literals first: the regex alone tries every position (~1 ms a file); anywhere in
    # the head (one shared pass) before the first 4000 characters
    if h.has("JobId=") or h.has("JobState=") or h.has("JobID|"):
        start = h.text[:4000]
        if ("JobId=" in start or "JobState=" in start or "JobID|" in start) and re.search(
            r"(?:^|\s)JobId=\d+|JobState=|^JobID\|", start, re.M
        ):
            return True
    return h.base.startswith("slurm-job-") and h.text.lstrip().startswith("{")


def _is_kernel_log(h: Head) -> bool:
    return any(t in h.base for t in ("dmesg", "kern.log", "syslog", "journal")) or (
        # "[" then no letter (a letter is neither \s nor \d): "[I1121 …" and "[rank0]:"
        # are ruled out without decoding the head
        h.head[:1] == b"["
        and not h.head[1:2].isalpha()
        and bool(re.match(r"\[\s*\d+\.\d+\] ", h.text))
    )


class TextLogParser:
    """Rank logs, kernel logs, SLURM output, and any text kind without a parser of its own
    (``fallback``); anything no recogniser names is a ``rank_log``."""

    name = "text_log"
    kinds = ("rank_log", "dmesg", "slurm_job")
    fallback = True
    recognizers = (
        Recognizer("slurm_job", 80, _is_slurm_job, ("JobId=", "JobState=", "JobID|")),
        Recognizer("dmesg", 90, _is_kernel_log),
    )

    def parse(self, stream: BinaryIO, result: ParseResult, progress: Progress | None) -> None:
        name = result.name
        file_rank = rank_from_name(name)
        file_host = host_from_name(name)
        scanner = get_scanner()
        result.facts["scanner"] = scanner.name
        collector = _Collector(result)
        summary = _Summary(collector, name)
        sidecar = SideReaders()  # iteration lines and banners (parsers/sidecar.py)
        line_no = 0  # lines fully before the current block
        offset = 0
        head = bytearray()
        tail = b""
        # One buffer for the whole file, and the same one for the next file parsed in this
        # process (no fresh pages to fault in and zero per file): the carried partial line is
        # moved to its front and the next chunk is read in after it, so no chunk is ever copied
        # (readinto, memoryview scan).
        mapped = _map_whole(stream)
        if mapped is not None:  # the whole file is the one block: nothing copied
            buf: Any = mapped
            have = len(mapped)  # bytes of buf holding data (carry + new)
        else:
            buf = _BUFFERS.pop() if _BUFFERS else bytearray(CHUNK + MAX_LINE)
            have = 0
        view = memoryview(buf)
        readinto = getattr(stream, "readinto", None)
        final = False
        try:
            while not final:
                if mapped is not None:
                    final = True
                else:
                    room = min(CHUNK, len(buf) - have)
                    n = _fill(stream, readinto, buf, view, have, room)
                    have += n
                    final = n < room
                if have == 0:
                    break
                if final:
                    cut = have
                else:
                    cut = buf.rfind(b"\n", 0, have) + 1
                    if cut == 0:
                        if have < len(buf) - 1:
                            continue  # a long line: read more behind it
                        cut = have
                        result.warn(
                            f"a line longer than {MAX_LINE >> 20} MiB was cut near byte {offset}"
                        )
                if len(head) < HEAD:
                    head += view[: min(cut, HEAD - len(head))]
                # newlines counted as the prefilter goes (its pieces), for every line number
                newlines = NewlineCounter(buf, cut)
                try:
                    hits = _scan_chunk(scanner, sidecar, view, cut, line_no, newlines)
                    line_no = self._block(
                        buf,
                        cut,
                        hits,
                        line_no,
                        offset,
                        newlines,
                        result,
                        collector,
                        summary,
                        file_rank,
                        file_host,
                    )
                finally:
                    newlines.release()  # release the export of buf before it is written again
                if final and cut and buf[cut - 1 : cut] != b"\n":
                    line_no += 1
                offset += cut
                result.line_index.append((line_no + 1, offset))
                tail = (tail + bytes(view[max(0, cut - TAIL) : cut]))[-TAIL:]
                rest = have - cut
                if rest:
                    buf[:rest] = view[cut:have]
                have = rest
                if progress:
                    progress(offset, 0, f"{name}: {offset >> 20} MiB")
        finally:
            try:
                view.release()
                if mapped is not None:
                    mapped.close()
                else:
                    _BUFFERS.append(buf)
            except BufferError:  # still exported after an error: leave it to the collector
                pass
        summary.flush()
        collector.finish()
        _close_index(result, line_no, offset)
        _read_head_tail(bytes(head), tail, offset, result, file_rank)
        self._finish(result, file_rank, file_host)
        sidecar.finish(result, file_rank)

    def _block(
        self,
        buf: bytearray,
        cut: int,
        hits: list[Any],
        line_no: int,
        offset: int,
        newlines: NewlineCounter,
        result: ParseResult,
        collector: _Collector,
        summary: _Summary,
        file_rank: int | None,
        file_host: str | None,
    ) -> int:
        """Read the prefilter's ``hits`` in ``buf[:cut]`` (whole lines); return the line
        count after it."""
        marks = []
        for target in range(INDEX_STEP, cut, INDEX_STEP):
            nl = buf.find(b"\n", target, cut)
            if nl < 0 or nl + 1 >= cut:
                break
            marks.append(nl + 1)
        # the hits come in file order: the marks (one a MiB) are sorted in only when there are
        # some, on a key read in C
        points = [(st, 1, en, sigs) for st, en, sigs in hits]
        if marks:
            points += [(m, 0, 0, ()) for m in marks]
            points.sort(key=_POINT_ORDER)
        # every point's line number first (the candidate lines' were counted as the
        # prefilter went), then the lines read one after another
        numbers = [line_no + n for n in newlines.before_each([p[0] for p in points])]
        end = line_no + newlines.total()
        skip_until = -1
        for (st, is_span, en, sigs), ln in zip(points, numbers, strict=True):
            if not is_span:
                result.line_index.append((ln + 1, offset + st))
            elif st > skip_until:
                skip_until = self._line(
                    buf, cut, st, en, ln + 1, result, collector, summary, file_rank, file_host, sigs
                )
        return end

    def _line(
        self,
        block: bytearray,
        limit: int,
        s: int,
        e: int,
        line: int,
        result: ParseResult,
        collector: _Collector,
        summary: _Summary,
        file_rank: int | None,
        file_host: str | None,
        sigs: tuple[Signature, ...] = (),
    ) -> int:
        """Read one candidate line (and the lines terminal wrapping split it into) as an
        event; return where reading stopped."""
        raw = block[s:e].decode("utf-8", "replace").rstrip("\r")
        env = peel(raw)
        res, needs_more = _classify_line(raw, env, sigs)
        used_end = e
        cont_line = None
        msg, msg_line = env.message, line  # what wrapping may continue, and where it ends
        if res is not None and res[0] in _NCCL_WRAPPED and _bare(env):
            # terminal wrapping put the message's start (and its envelope) on the line above
            back = _join_back(block, s, env.message, res[0], needs_more)
            if back is not None:
                raw, env, res, msg, needs_more = back
                line -= 1
        if needs_more:
            joined = _join_forward(block, e, limit, msg, msg_line)
            if joined is not None:
                res, used_end, cont_line = joined
        if res is None and sigs and not _is_code(env.message):
            cut = _join_signature(block, s, e, limit, env, line, sigs)
            if cut is not None:
                res, used_end, cont_line, above = cut
                if above is not None:  # the message starts on the line above
                    raw, env = above
                    line -= 1
        if res is None:
            return e
        kind, fields = res
        if kind == "torchrun_marker" or kind == "torchrun_root_marker":
            summary.marker()
            return used_end
        text = raw if len(raw) <= MAX_EVENT_TEXT else raw[:MAX_EVENT_TEXT] + "…"
        if kind == "torchrun_field":
            summary.field(fields["key"], fields["value"], line, text)
            return used_end
        if cont_line:
            fields["continued_on_line"] = cont_line
        rank = _rank_of(env, kind, fields, file_rank)
        host = _host_of(env, fields)
        # positional: this runs on every event of every file
        stamp = _time_of(env, kind, fields, raw)
        collector.add(Event(kind, line, text, rank, host, stamp, env.level, fields, result.name))
        if rank is not None and host and rank not in result.rank_hosts:
            result.rank_hosts[rank] = host
        return used_end

    def _finish(self, result: ParseResult, file_rank: int | None, file_host: str | None) -> None:
        # the file name's node label is the weakest source of a host: only where nothing better
        for e in result.events:
            if e.host is None:
                e.host = result.rank_hosts.get(e.rank) if e.rank is not None else None
                e.host = e.host or (file_host if not result.rank_hosts or e.rank is None else None)
        ranks = set(result.rank_info)
        ranks.update(e.rank for e in result.events if e.rank is not None)
        if file_rank is not None:
            ranks.add(file_rank)
        result.ranks = sorted(ranks)
        hosts = list(result.hosts)
        for h in list(result.rank_hosts.values()) + [e.host for e in result.events if e.host]:
            if h and h not in hosts:
                hosts.append(h)
        if not hosts and file_host:
            hosts.append(file_host)
        if file_host:
            result.facts["file_host"] = file_host
            if not result.rank_hosts and result.kind == "rank_log":
                for r in ranks:
                    result.rank_hosts[r] = file_host
        if file_rank is not None:
            result.facts["file_rank"] = file_rank
        result.hosts = hosts[:256]
        if result.kind == "rank_log" and not ranks:
            result.warn(
                "no rank could be told from this file (no [rankN]: prefix, no rank in its name)"
            )


register_parser(TextLogParser())


# --- the steps of a file ----------------------------------------------------------------


# a file this size or more is mapped rather than read when it can be (``_map_whole``):
# reading copies every byte from the page cache (~0.3 ms a MiB here), mapping does not.
# From numpy's newline counts on (a map has no ``count``), up to what one map may add to the
# process's resident pages.
MAP_MIN, MAP_MAX = SIMD_BYTES, 64 << 20
# a file written to this recently may still be written (or truncated by a log rotation):
# touching a mapped page past a truncated end kills the process (SIGBUS), so it is read
STILL_WRITTEN_S = 5.0


def _map_whole(stream: Any) -> mmap.mmap | None:
    """The whole file behind ``stream`` (``parse_artifact``'s stream: the detected head, then
    the file) mapped read-only, when it is a regular file read from its start, of a size from
    ``MAP_MIN`` to ``MAP_MAX``, not modified in the last ``STILL_WRITTEN_S`` seconds; else
    None (the chunked read)."""
    head, inner = getattr(stream, "head_and_stream", (None, None))
    # a plain file only: a decompressor's stream (or an archive member) also answers
    # ``fileno`` — with the compressed file's descriptor
    raw = inner.raw if isinstance(inner, io.BufferedReader) else inner
    if head is None or not isinstance(raw, io.FileIO):
        return None
    try:
        fd = raw.fileno()
        st = os.fstat(fd)
        if (
            not stat.S_ISREG(st.st_mode)
            or not MAP_MIN <= st.st_size <= MAP_MAX
            or inner.tell() != len(head)  # read from its start, nothing else read yet
            or time.time() - st.st_mtime < STILL_WRITTEN_S
        ):
            return None
        mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        if hasattr(mmap, "MADV_WILLNEED"):  # read from end to end: map it all at once
            mapped.madvise(mmap.MADV_WILLNEED)
        return mapped
    except (OSError, ValueError, io.UnsupportedOperation):
        return None


def _fill(
    stream: BinaryIO, readinto: Any, buf: bytearray, view: memoryview, have: int, room: int
) -> int:
    """Read up to ``room`` bytes into ``buf`` after its first ``have``; short reads (the
    prepended head of a detected stream) add up. Returns the bytes read."""
    n = 0
    while n < room:
        if readinto is not None:
            k = readinto(view[have + n : have + room]) or 0
        else:
            data = stream.read(room - n) or b""
            k = len(data)
            buf[have + n : have + n + k] = data
        if k == 0:
            break
        n += k
    return n


def _scan_chunk(
    scanner: Any,
    sidecar: SideReaders,
    view: memoryview,
    cut: int,
    line_no: int,
    newlines: NewlineCounter,
) -> list[Any]:
    """The prefilter's hits in ``view[:cut]``; the same pass finds the banners, and the
    iteration lines within their budget, for the side readers, and counts the newlines
    before each line it finds (``newlines``)."""
    limit = sidecar.iteration_limit(cut) if getattr(scanner, "budgeted", ()) else None
    it_spans = NOT_SCANNED
    if limit is not None:
        hits, banner_spans, it_spans = scanner.line_hits_budget(view[:cut], limit, newlines)
    elif getattr(scanner, "side", None):
        hits, banner_spans = scanner.line_hits_side(view[:cut], newlines)
    else:
        hits, banner_spans = scanner.line_hits(view[:cut]), None
    sidecar.feed(view.obj, cut, line_no, banner_spans, it_spans, newlines=newlines)  # type: ignore[arg-type]
    return hits


def _close_index(result: ParseResult, lines: int, size: int) -> None:
    """The file's size and its sparse line index, which starts at line 1, byte 0."""
    result.lines = lines
    result.bytes = size
    if result.line_index and result.line_index[-1][1] >= size:
        result.line_index.pop()
    result.line_index.insert(0, (1, 0))


def _read_head_tail(
    head: bytes, tail: bytes, size: int, result: ParseResult, file_rank: int | None
) -> None:
    """Facts of the file's first and last lines (``facts.read_region``)."""
    read_region(head, result, file_rank, where="head")
    if size > HEAD:
        # the part of the tail not already read as head; drop its first partial line
        t = tail[-(size - HEAD) :] if size - HEAD < len(tail) else tail
        nl = t.find(b"\n")
        read_region(t[nl + 1 :], result, file_rank, where="tail")


# --- one candidate line, step by step ---------------------------------------------------


def _classify_line(
    raw: str, env: Envelope, sigs: tuple[Signature, ...]
) -> tuple[tuple[str, dict[str, Any]] | None, bool]:
    """The structural reading of the line, refined by a catalogue signature the prefilter
    found on it; and whether the message needs the next lines (terminal wrapping)."""
    res, needs_more = classify(env.message)
    if res is not None and res[0] in GENERIC_KINDS and _is_code(env.message):
        return None, False  # a traceback's echo of the source line that raised
    if sigs and (res is None or res[0] in GENERIC_KINDS) and not _is_code(env.message):
        hit = match_signature(env.message, sigs) or match_signature(raw, sigs)
        if hit is not None:
            # the structural reading keeps its kind and fields (other analyzers read
            # them); the signature decides what the line means
            sig, sf = hit
            kind0, f0 = res if res is not None else ("signature", {})
            return (kind0, {**sf, **f0, "sig": sig.id}), False
    return res, needs_more


def _join_forward(
    block: bytearray, e: int, limit: int, msg: str, line: int
) -> tuple[tuple[str, dict[str, Any]], int, int] | None:
    """Terminal wrapping: join up to two following lines, peeled, and classify again;
    (reading, end of the last line used, its line number) or None."""
    nxt_start = e + 1
    for extra in range(1, 3):
        nxt_end = block.find(b"\n", nxt_start, limit)
        if nxt_end < 0 or nxt_start >= limit:
            return None
        nraw = block[nxt_start:nxt_end].decode("utf-8", errors="replace").rstrip("\r")
        nmsg = peel(nraw).message
        for joiner in ("", " "):
            r2, more2 = classify(msg + joiner + nmsg)
            if r2 is not None and not more2:
                return r2, nxt_end, line + extra
        msg = msg + nmsg
        nxt_start = nxt_end + 1
    return None


def _sig_from(
    text: str, before: int, sigs: tuple[Signature, ...] | list[Signature]
) -> tuple[Signature, dict[str, str]] | None:
    """The first signature whose regex matches ``text`` starting before offset ``before``."""
    for sig in sigs:
        m = sig.rx.search(text)
        if m and m.start() < before:
            return sig, {k: v for k, v in m.groupdict().items() if v is not None}
    return None


def _join_signature(
    block: bytearray,
    s: int,
    e: int,
    limit: int,
    env: Envelope,
    line: int,
    sigs: tuple[Signature, ...],
) -> tuple[tuple[str, dict[str, Any]], int, int, tuple[str, Envelope] | None] | None:
    """Terminal wrapping cut a catalogued message the prefilter found on this line before
    what its regex needs: join up to two following lines and match again (the match must
    start on this line); when this line is a bare continuation, the message starts on the
    line above if the match, with that line joined on, starts there. (reading, end of the
    last line used, its line number, the line above's raw text and envelope or None)."""
    msg = env.message
    own = len(msg)
    nxt_start = e + 1
    hit = None
    for extra in range(1, 3):
        nxt_end = block.find(b"\n", nxt_start, limit)
        if nxt_end < 0 or nxt_start >= limit:
            return None
        nmsg = peel(block[nxt_start:nxt_end].decode("utf-8", errors="replace").rstrip("\r")).message
        for joiner in ("", " "):
            hit = _sig_from(msg + joiner + nmsg, own, sigs)
            if hit is not None:
                msg, cont = msg + joiner + nmsg, line + extra
                break
        if hit is not None:
            break
        msg = msg + nmsg
        nxt_start = nxt_end + 1
    if hit is None:
        return None
    above = None
    if _bare(env) and s > 0 and block[s - 1 : s] == b"\n":
        p0 = block.rfind(b"\n", 0, s - 1) + 1
        praw = block[p0 : s - 1].decode("utf-8", errors="replace").rstrip("\r")
        penv = peel(praw)
        h2 = _sig_from(penv.message + msg, len(penv.message), [hit[0]])
        if h2 is not None and match_signature(penv.message) is None:
            hit, above = h2, (praw, penv)
    sig, sf = hit
    return ("signature", {**sf, "sig": sig.id}), nxt_end, cont, above


def _rank_of(env: Envelope, kind: str, fields: dict[str, Any], file_rank: int | None) -> int | None:
    """The line's rank: its prefix, else the file's, else what the message itself names
    (noted in ``fields["rank_from"]``)."""
    rank = env.rank if env.rank is not None else file_rank
    if rank is None and "sig" in fields and str(fields.get("rank", "")).isdigit():
        rank = int(fields["rank"])  # the message names its rank ("Rank 11: …")
        fields["rank_from"] = "message"
    if rank is None and fields.get("msg_rank") is not None:
        rank = fields["msg_rank"]  # "… on rank 6: CUDA error: …"
        fields["rank_from"] = "message"
    if env.local_rank is not None:
        fields["local_rank"] = env.local_rank
    if rank is None and env.task is not None:
        rank = env.task
        fields["rank_from"] = "srun_label"
    if (
        rank is None
        and kind in _NCCL_KINDS
        and fields.get("work_rank") is not None
        and fields.get("pg") in (None, "0")
    ):
        # old logs without [rankN]: — the WorkNCCL rank of the default group is the global rank
        rank = fields["work_rank"]
        fields["rank_from"] = "work_prefix"
    return rank


def _host_of(env: Envelope, fields: dict[str, Any]) -> str | None:
    host = env.host or fields.get("nccl_host") or fields.get("host")
    msg = env.message
    if host is None and msg[:1].isalnum() and ":" in msg:
        # NCCL's "host:pid:tid [dev]" banner (NCCL 2.1-2.3 print WARN without "NCCL"); its
        # host starts with a letter or digit
        mh = NCCL_HOST.match(msg)
        if mh:
            host = mh.group("host")
    return host


_SCHEDULER_STAMPED = ("slurm_time_limit", "slurm_preempted", "node_fail", "slurm_cancelled")


def _time_of(env: Envelope, kind: str, fields: dict[str, Any], raw: str) -> str | None:
    """The line's time: its envelope's stamp, the scheduler's own "AT …", or any stamp in
    the text."""
    t = env.time
    if t is None and kind in _SCHEDULER_STAMPED and fields.get("at"):
        t = iso_from_text(fields["at"])
    return t if t is not None else find_time(raw)
