"""Job facts read from the head and the tail of a text log with full regexes.

Frequent lines (banners, NCCL INFO, iteration lines) are never candidates of
the prefilter; what we need from them (framework, world size, rank↔host, first
and last step and timestamp per rank) is read here from the first and last
~256 KiB of each file only, which is bounded work whatever the file size.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from .._lazy import lazy_compile
from ..envelope import _GLOG, _OLD_GLOG, _iso_from_glog, find_time, peel
from ..model import ParseResult, RankInfo
from ..scan import LiteralSet, MatchLines

_FRAMEWORK_HINTS = [
    ("nemo", ("NeMo", "nemo_logging", "nemo.collections", "/nemo/")),
    ("megatron", ("megatron", "Megatron", "elapsed time per iteration")),
    ("deepspeed", ("DeepSpeed", "deepspeed")),
    ("lightning", ("lightning", "Lightning", "Trainer.fit")),
    ("pytorch", ("torch.distributed", "torchrun", "ProcessGroupNCCL")),
]
# (how, regex, the literals one of which every match contains)
_WORLD = [
    ("WORLD_SIZE", lazy_compile(r"WORLD_SIZE[=: ]+(\d+)"), ("WORLD_SIZE",)),
    (
        "world size",
        lazy_compile(r"orld[ _][Ss]ize[\"']?[=:]? *(\d+)"),
        ("orld size", "orld Size", "orld_size", "orld_Size"),
    ),
    # No leading \b: it makes the engine try every position (25x slower); a match glued
    # to a longer word is dropped in _word_start_matches instead.
    ("NCCL nranks", lazy_compile(r"n[Rr]anks (\d+)"), ("nranks ", "nRanks ")),
    ("Lightning MEMBER", lazy_compile(r"MEMBER: \d+/(\d+)"), ("MEMBER: ",)),
]
_NNODES = lazy_compile(r"n(?:nodes[=: ]+|Nodes )(\d+)")
_NNODES_LITERALS = ("nnodes", "nNodes ")
_NCCL_INIT = lazy_compile(r"NCCL INFO comm 0x[0-9a-f]+ rank (?P<r>\d+) n[Rr]anks (?P<n>\d+)")
# runs taken whole (*+, ++): what follows each run is not in it, so giving some back never
# helps a match, and the engine no longer tries it at every position of every word
_NCCL_INIT_HOST = lazy_compile(r"(?P<host>[A-Za-z0-9][\w.-]*+):\d++:\d++ \[\d++\] $")
_NCCL_HOST = lazy_compile(r"(?P<host>[A-Za-z][\w.-]*):\d+:\d+ \[\d+\] NCCL ")
_RESUME = lazy_compile(
    r"esum(?:ing|ed) (?:training )?from (?:the )?checkpoint|oading checkpoint from|"
    r"successfully loaded checkpoint|Restoring states from the checkpoint|Restored all states from the checkpoint|"
    r"loaded checkpoint from .* at iteration [1-9]"
)
# "\bword" written as "word(?<!\wword)": the same matches, but the pattern starts with
# literals, so the engine jumps to the places where one starts instead of trying every
# position (the head and tail of every file go through it line by line)
_STEP = lazy_compile(
    r"iteration(?<!\witeration)\s+(?P<a>\d+)\s*/\s*\d+"
    r"|(?:global_step(?<!\wglobal_step)|global step(?<!\wglobal step)|step(?<!\wstep))"
    r"[=: ]+(?P<b>\d+)\b"
)
# "(20\d\d)-\d\d-\d\d[ T_]\d\d:\d\d" from its first dash, the year checked behind it: the same
# first match (its dash is the first such dash), but the engine looks for a dash rather
# than for "20", which numbers and times are full of
_YEAR = lazy_compile(r"-\d\d-\d\d[ T_]\d\d:\d\d(?<=(20\d\d)-\d\d-\d\d[ T_]\d\d:\d\d)")


def _word_start_matches(text: str, rx: re.Pattern[str]) -> list[int]:
    """Group 1 of the matches that start a word (what a leading \\b would have kept)."""
    return [
        int(m.group(1))
        for m in rx.finditer(text)
        if m.start() == 0 or not (text[m.start() - 1].isalnum() or text[m.start() - 1] == "_")
    ]


# what lets a line of a region without "[rankN]:" name a rank of its own: an MPI tag
# ("[1,3]<stderr>:") or a Ray/vLLM worker tag ("(… rank=3 pid=…)")
_OWN_RANK_HINTS = ("]<std", " pid=")
# what a line must contain to name a rank's host in NCCL's words (_RANK_NCCL_HOST)
_NCCL_WORD = "] NCCL "
_STEP_WORDS = ("step", "iteration")
# every literal some fact of a region needs (a regex's match contains one of its literals;
# a region without them skips that regex): one pass over the region's bytes tells which
# occur, rather than a regex or an ``in`` test over the whole region for each
_REGION_LITERALS = LiteralSet(
    list(
        dict.fromkeys(
            [
                *(lit for _, lits in _FRAMEWORK_HINTS for lit in lits),
                *(lit for _, _, lits in _WORLD for lit in lits),
                *_NNODES_LITERALS,
                "checkpoint",
                "NCCL INFO comm 0x",
                "[rank",
                _NCCL_WORD,
                *_STEP_WORDS,
                *_OWN_RANK_HINTS,
            ]
        )
    )
)


def detect_framework(found: frozenset[str]) -> str | None:
    """The framework the first hint found names (``found``: the region's literals)."""
    for name, literals in _FRAMEWORK_HINTS:
        if any(lit in found for lit in literals):
            return name
    return None


def read_region(data: bytes, result: ParseResult, file_rank: int | None, *, where: str) -> None:
    """Update ``result`` from one region of the file's bytes (``where`` is "head" or "tail")."""
    text = data.decode("utf-8", errors="replace")
    found = _REGION_LITERALS.present(data)  # which literals occur, in one pass
    facts: dict[str, Any] = result.facts
    if where == "head":
        fw = detect_framework(found)
        if fw and "framework" not in facts:
            facts["framework"] = fw
        ws: list[list[Any]] = facts.setdefault("world_size_claims", [])
        for how, rx, literals in _WORLD:
            if not any(lit in found for lit in literals):
                continue
            vals = (
                _word_start_matches(text, rx)
                if how == "NCCL nranks"
                else [int(v) for v in rx.findall(text)]
            )
            if vals:
                ws.append([max(vals), how])
        if any(lit in found for lit in _NNODES_LITERALS):
            nn = [int(a) for a in _NNODES.findall(text)]
            if nn:
                facts["nnodes"] = max(nn)
        # Every wording of a resume names the checkpoint: skip the regex when none does.
        m = _RESUME.search(text) if "checkpoint" in found else None
        if m:
            facts["resumed_from_checkpoint"] = True
    m = _YEAR.search(text) if "year" not in facts else None  # the tail's, when the head had none
    if m:
        facts["year"] = int(m.group(1))
    if "NCCL INFO comm 0x" in found:
        _nccl_inits(text, result)
    _per_line(text, found, result, file_rank, where)


def _nccl_inits(text: str, result: ParseResult) -> None:
    """The hosts of NCCL's communicator inits, with the (rank, nranks) each reports."""
    facts = result.facts
    for m in _NCCL_INIT.finditer(text):
        ls = text.rfind("\n", 0, m.start()) + 1
        mh = _NCCL_INIT_HOST.search(text, max(ls, m.start() - 120), m.start())
        if not mh:
            continue
        host = mh.group("host")
        if host not in result.hosts:
            result.hosts.append(host)
        inits: dict[str, list[int]] = facts.setdefault("nccl_init", {})
        inits.setdefault(host, [])
        pair = [int(m.group("r")), int(m.group("n"))]
        if pair not in inits[host] and len(inits[host]) < 64:
            inits[host].append(pair)


_RANK_LINE = lazy_compile(
    r"\[rank(?P<r>\d+)\]:\s?(?:\[?(?P<l>[IWEF])(?P<md>\d{3,4}) (?P<t>\d\d:\d\d:\d\d(?:\.\d+)?))?"
)
# the digits of each of _RANK_LINE's matches (a match is a prefix, and what follows it)
_RANK_DIGITS = lazy_compile(r"\[rank(\d+)\]:")
_RANK_NCCL_HOST = lazy_compile(
    r"\[rank(?P<r>\d+)\]:\s?(?P<host>[A-Za-z][\w.-]*):\d+:\d+ \[\d+\] NCCL "
)


def _per_line(
    text: str, found: frozenset[str], result: ParseResult, file_rank: int | None, where: str
) -> None:
    """First/last time, last step and host per rank. One C-level regex pass when lines carry
    ``[rankN]:``; otherwise (per-rank files, ``srun -l``) the slower full envelope peel."""
    if "[rank" in found:
        _fast(text, found, result, where)
    else:
        _slow(text, found, result, file_rank, where)


def _rank_info(result: ParseResult, rank: int) -> RankInfo:
    ri = result.rank_info.get(rank)
    if ri is None:
        ri = result.rank_info[rank] = RankInfo()
    return ri


def _step(result: ParseResult, ri: RankInfo, line: str) -> None:
    ms = _STEP.search(line)
    if ms:
        step = int(ms.group("a") or ms.group("b"))
        if ri.last_step is None or step >= ri.last_step:
            ri.last_step = step
        first = result.facts.get("first_step")
        if first is None or step < first:
            result.facts["first_step"] = step


def _stamped_prefix(text: str, spellings: list[str], *, backwards: bool) -> re.Match[str] | None:
    """The first (or last) ``[rankN]:`` prefix of one rank, in any of its spellings, that a
    glog stamp follows (``_RANK_LINE``'s match, with its groups). Prefixes never overlap, so
    each occurrence of one is where ``_RANK_LINE.finditer`` would match."""
    best: re.Match[str] | None = None
    for digits in spellings:
        prefix = f"[rank{digits}]:"
        at = text.rfind(prefix) if backwards else text.find(prefix)
        while at >= 0:
            m = _RANK_LINE.match(text, at)
            if m is not None and m.group("md"):
                if best is None or (at > best.start() if backwards else at < best.start()):
                    best = m
                break
            at = text.rfind(prefix, 0, at) if backwards else text.find(prefix, at + 1)
    return best


def _fast(text: str, found: frozenset[str], result: ParseResult, where: str) -> None:
    """Facts of a region whose lines carry ``[rankN]:`` (one node's ranks interleaved): each
    rank's first stamped line (head), last stamped line, last line naming a step, the
    region's first line naming a step, and NCCL's host per rank. One C-level pass lists the
    prefixes' ranks; each rank's first and last stamp are looked for from its first and
    its last prefix (a string search for the prefix, then the stamp regex on it), and the
    step lines from their words ("step", "iteration"), from the back until each rank has
    its last (and from the front for the region's first), so only those lines are read in
    Python — not every line."""
    # each spelling of a rank's digits, in the order of its first prefix
    rank_of = {digits: int(digits) for digits in dict.fromkeys(_RANK_DIGITS.findall(text))}
    if not rank_of:
        return
    head = where == "head"
    spellings: dict[int, list[str]] = {}  # "[rank03]:" and "[rank3]:" are the same rank
    for digits, rank in rank_of.items():
        spellings.setdefault(rank, []).append(digits)
    infos = {r: _rank_info(result, r) for r in spellings}
    for rank, ri in infos.items():
        if head and ri.first_time is None:
            m = _stamped_prefix(text, spellings[rank], backwards=False)
            if m is not None:
                ri.first_time = _iso_from_glog(m.group("md"), m.group("t"))
        m = _stamped_prefix(text, spellings[rank], backwards=True)
        if m is not None:
            ri.last_time = _iso_from_glog(m.group("md"), m.group("t"))
    words = tuple(w for w in _STEP_WORDS if w in found)
    # the step regex only on the lines that matter: each rank's last, the region's first
    pending = set(infos)
    for start, end in _word_lines(text, words, backwards=True):
        for m in reversed(list(_RANK_LINE.finditer(text, start, end))):
            rank = rank_of[m.group("r")]
            if rank in pending and _has_step_word(text, m.end(), end):
                pending.discard(rank)
                _step(result, infos[rank], text[m.end() : end])
        if not pending:
            break
    if head:
        done = False
        for start, end in _word_lines(text, words, backwards=False):
            for m in _RANK_LINE.finditer(text, start, end):
                if _has_step_word(text, m.end(), end):
                    ms = _STEP.search(text[m.end() : end])
                    if ms:
                        step = int(ms.group("a") or ms.group("b"))
                        low = result.facts.get("first_step")
                        result.facts["first_step"] = step if low is None else min(low, step)
                    done = True
                    break
            if done:
                break
    hostless = {r for r in infos if r not in result.rank_hosts}
    if hostless and _NCCL_WORD in found:
        for m in _RANK_NCCL_HOST.finditer(text):
            rank = int(m.group("r"))
            if rank not in result.rank_hosts:
                result.rank_hosts[rank] = m.group("host")
                hostless.discard(rank)
                if not hostless:
                    break  # every rank of the region has its host: no later line can change one


def _word_lines(text: str, words: tuple[str, ...], *, backwards: bool) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each line of ``text`` where one of ``words`` (those of
    _STEP_WORDS that occur in it) occurs, from the last such line back (or from the first
    on); each line once."""
    if not words:
        return
    n = len(text)
    if backwards:
        at = {w: text.rfind(w) for w in words}
        while True:
            pos = max(at.values())
            if pos < 0:
                return
            start = text.rfind("\n", 0, pos) + 1
            end = text.find("\n", pos)
            yield start, (end if end >= 0 else n)
            for w, a in at.items():
                if a >= start:
                    at[w] = text.rfind(w, 0, start)
    else:
        at = {w: text.find(w) for w in words}
        while True:
            live = [a for a in at.values() if a >= 0]
            if not live:
                return
            pos = min(live)
            start = text.rfind("\n", 0, pos) + 1
            end = text.find("\n", pos)
            end = end if end >= 0 else n
            yield start, end
            for w, a in at.items():
                if 0 <= a <= end:
                    at[w] = text.find(w, end)


def _has_step_word(text: str, at: int, end: int) -> bool:
    return text.find("step", at, end) >= 0 or text.find("iteration", at, end) >= 0


def _glog_only(s: str) -> str:
    """The message of a line that starts with a glog envelope, from what follows that
    envelope (``s``) in a region without ``[rankN]:``: what ``peel`` leaves — further glog
    envelopes stripped, nothing else."""
    for _ in range(7):  # peel's bound: 8 envelopes in all
        c = s[:1]
        lvl = s[1:2] if c == "[" else c
        if not lvl or lvl not in "IWEF":
            break
        m2 = _GLOG.match(s) or (_OLD_GLOG.match(s) if c == "[" else None)
        if m2 is None:
            break
        s = s[m2.end() :]
    return s


# a line that can name a host through its envelope: pdsh's "node12: ", an IP label, a
# stream tag ("host [stderr]"), syslog's "hh:mm:ss host prog: ", NCCL's "host:pid:tid [d] NCCL "
# (each wrapper of ``peel`` that sets a host, and NCCL's banner, contains one of these)
# "[a-z][a-z0-9-]*\d[\w.-]*:\s" as "[a-z][a-z-]*+\d[\w.-]*+:\s": the same matches (the first
# digit after the letters is the one to take, and ":" is in neither run), without giving
# back, letter by letter, every lower-case word the engine tries it at (~20 % of the time)
_HOST_HINT = lazy_compile(
    r"[a-z][a-z-]*+\d[\w.-]*+:\s|\d{1,3}(?:\.\d{1,3}){3}|\[std|"
    r"\d\d:\d\d:\d\d [\w.-]+ [\w./-]+:\s| NCCL "
)


def _one_rank(
    text: str, found: frozenset[str], result: ParseResult, file_rank: int, where: str
) -> None:
    """``_slow`` for a region where every line is the file's rank (no line can name another):
    only the lines that decide something are peeled — from the front until one has a time,
    from the back until one has a time, the lines that may name a host until one does — and
    the step lines are found from their words (``_step_line``)."""
    if not text.strip(_LINE_BREAKS):
        return  # no line with anything on it
    ri = _rank_info(result, file_rank)
    tail = where == "tail"
    if where == "head" and ri.first_time is None:
        for raw in _lines_from(text, backwards=False):
            t = peel(raw).time
            if t:
                ri.first_time = t
                break
    for raw in _lines_from(text, backwards=True):
        env = peel(raw)
        t = env.time or (find_time(env.message) if tail else None)
        if t:
            ri.last_time = t
            break
    if file_rank not in result.rank_hosts:
        _first_host(text, result, file_rank)
    words = tuple(w for w in _STEP_WORDS if w in found)
    last = _step_line(text, words, backwards=True)
    if last is not None and (ri.last_step is None or last >= ri.last_step):
        ri.last_step = last
    first = result.facts.get("first_step")
    if where == "head" or first is None:
        lo = _step_line(text, words, backwards=False)
        if lo is not None and (first is None or lo < first):
            result.facts["first_step"] = lo


def _step_line(text: str, words: tuple[str, ...], *, backwards: bool) -> int | None:
    """The step the last (or first) line of ``text`` that names one names, as ``_step`` reads
    a line: what the last line of a rank's region says, as ``_fast`` takes it. Lines are found
    by their words ("step", "iteration"), not by running the step regex over the region (~40
    µs a KiB)."""
    for start, end in _word_lines(text, words, backwards=backwards):
        ms = _STEP.search(text, start, end)
        if ms:
            return int(ms.group("a") or ms.group("b"))
    return None


# what ``str.splitlines`` breaks lines at
_LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_NEAR = 4096  # what is split into lines first, from either end


def _lines_from(text: str, *, backwards: bool) -> Iterator[str]:
    """The non-empty lines of ``text`` as ``splitlines`` gives them, from the front (or from
    the back): the nearest few KiB are split first — the line sought is nearly always
    there — and the whole text only when they do not have it (their lines come again)."""
    if len(text) > _NEAR:
        part = text[-_NEAR:] if backwards else text[:_NEAR]
        lines = part.splitlines()
        near = lines[1:] if backwards else lines[:-1]  # the line cut by the window is left out
        yield from (raw for raw in (reversed(near) if backwards else near) if raw)
    lines = text.splitlines()
    yield from (raw for raw in (reversed(lines) if backwards else lines) if raw)


# the lines where ``_HOST_HINT`` matches, found by Hyperscan in an ASCII region: a region
# that names no host (a rank's own log, NCCL's banners off) costs ~40 µs, not the ~2.5 ms
# that ``_HOST_HINT``, which starts with a character class, takes to try every position of
# 40 KiB. The same branches in Hyperscan's spelling: no possessive runs (they take what
# the plain ones do here) and Python's \s on text, which has \x1c-\x1f too.
_HINT_LINES = MatchLines(
    [
        r"[a-z][a-z-]*\d[\w.-]*:[\s\x1c-\x1f]",
        r"\d{1,3}(?:\.\d{1,3}){3}",
        r"\[std",
        r"\d\d:\d\d:\d\d [\w.-]+ [\w./-]+:[\s\x1c-\x1f]",
        r" NCCL ",
    ]
)


def _hint_matches(text: str) -> Iterator[re.Match[str]]:
    """``_HOST_HINT.finditer(text)`` as ``_first_host`` reads it (the first match of each
    line): the regex itself over the first ``_HINT_NEAR`` characters, where a host is
    nearly always named if at all, then, in an ASCII text, the lines Hyperscan lists, a few
    at a time as more are asked for, each searched alone."""
    near = text.find("\n", _HINT_NEAR)
    near = len(text) if near < 0 else near + 1  # a line's matches end by its newline
    yield from _HOST_HINT.finditer(text, 0, near)
    if near == len(text):
        return
    data = text.encode("ascii") if text.isascii() else None
    got = _HINT_LINES.starts(data, near) if data is not None else None
    if data is None or got is None:
        yield from _HOST_HINT.finditer(text, near)
        return
    while True:
        starts, complete = got
        for s in starts:
            e = text.find("\n", s)
            m = _HOST_HINT.search(text, s, len(text) if e < 0 else e + 1)
            if m is not None:
                yield m
        if complete or not starts:
            return
        e = text.find("\n", starts[-1])
        if e < 0:
            return
        got = _HINT_LINES.starts(data, e + 1)
        if got is None:
            return


_HINT_NEAR = 2048


def _first_host(text: str, result: ParseResult, file_rank: int) -> None:
    """The host the first line that names one names (through its envelope or NCCL's banner)."""
    last = -2
    for m in _hint_matches(text):
        start = text.rfind("\n", 0, m.start()) + 1
        if start == last:
            continue
        last = start
        end = text.find("\n", m.end())
        env = peel(text[start : end if end >= 0 else len(text)].rstrip("\r"))
        h = env.host
        if h is None and " NCCL " in env.message:
            mh = _NCCL_HOST.match(env.message)
            if mh:
                h = mh.group("host")
        if h:
            result.rank_hosts[file_rank] = h
            return


def _slow(
    text: str, found: frozenset[str], result: ParseResult, file_rank: int | None, where: str
) -> None:
    if file_rank is not None and not any(h in found for h in _OWN_RANK_HINTS):
        _one_rank(text, found, result, file_rank, where)
        return
    # a line that starts with a glog envelope peels to that envelope alone (no [rankN]: in
    # this region): its rank is the file's, its time the envelope's — no full peel; the
    # times of such lines are made text only for the first and the last one, their count
    # added once, and their steps folded into the max/min at the end (what ``_step`` line
    # by line comes to)
    glog_ok = file_rank is not None
    fri: RankInfo | None = None  # the file rank's, made at its first line as _rank_info does
    last_glog: str | None = None  # the last glog line, its stamp made text at the end
    hi = lo = None
    head = where == "head"
    need_first = head  # the file rank's first time may still be unset
    need_host = glog_ok and file_rank not in result.rank_hosts
    glog_match = _GLOG_PLAIN.match
    step_search = _STEP.search
    for raw in text.splitlines():
        if not raw:
            continue
        c = raw[:1]
        lvl = raw[1:2] if c == "[" else c
        mg = glog_match(raw) if glog_ok and lvl and lvl in "IWEF" else None
        if mg is not None:
            if fri is None:
                fri = _rank_info(result, file_rank)  # type: ignore[arg-type]
            if need_first:
                if fri.first_time is None:
                    fri.first_time = _glog_time(raw)
                need_first = False
            last_glog = raw
            msg = raw[mg.end() :]
            c = msg[:1]
            if c == "[" or (c and c in "IWEF"):
                msg = _glog_only(msg)
            if need_host and " NCCL " in msg:
                mh = _NCCL_HOST.match(msg)
                if mh:
                    result.rank_hosts[file_rank] = mh.group("host")  # type: ignore[index]
                    need_host = False
            if "step" in msg or "iteration" in msg:
                ms = step_search(msg)
                if ms:
                    step = int(ms.group("a") or ms.group("b"))
                    hi = step if hi is None or step > hi else hi
                    lo = step if lo is None or step < lo else lo
            continue
        file_time, file_host = _peeled_line(raw, result, file_rank, where)
        if file_time:
            last_glog = None  # a later time of the file rank than the pending glog one
        if file_host:
            need_host = False
    if fri is None:
        return
    if last_glog is not None:
        fri.last_time = _glog_time(last_glog)
    if hi is not None and lo is not None:
        if fri.last_step is None or hi >= fri.last_step:
            fri.last_step = hi
        first = result.facts.get("first_step")
        if first is None or lo < first:
            result.facts["first_step"] = lo


# _GLOG without its groups: the same matches, ~25 % cheaper (no group marks to keep)
_GLOG_PLAIN = lazy_compile(re.sub(r"\(\?P<\w+>", "(?:", _GLOG.pattern))


def _glog_time(raw: str) -> str:
    """The time of a line that starts with a glog envelope."""
    m = _GLOG.match(raw)
    assert m is not None
    return _iso_from_glog(m.group("md"), m.group("t"))


def _peeled_line(
    raw: str, result: ParseResult, file_rank: int | None, where: str
) -> tuple[bool, bool]:
    """A line of ``_slow`` read through the full envelope peel; whether it gave the file
    rank a time, and whether it gave the file rank its host."""
    env = peel(raw)
    rank = env.rank if env.rank is not None else file_rank
    if rank is None and env.task is not None:
        rank = env.task
    if rank is None:
        return False, False
    ri = _rank_info(result, rank)
    t = env.time or (find_time(env.message) if where == "tail" else None)
    if t:
        if where == "head" and ri.first_time is None:
            ri.first_time = t
        ri.last_time = t
    h = env.host
    if h is None and " NCCL " in env.message:
        mh = _NCCL_HOST.match(env.message)
        if mh:
            h = mh.group("host")
    got_host = False
    if h and rank not in result.rank_hosts:
        result.rank_hosts[rank] = h
        got_host = rank == file_rank
    if "step" in env.message or "iteration" in env.message:
        _step(result, ri, env.message)
    return bool(t) and rank == file_rank, got_host
