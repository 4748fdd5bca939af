"""Peel what surrounds a log message: wrappers, the rank prefix, the glog envelope, dates.

Wrappers seen in real logs stack in front of the message in any order: a log
viewer's ``[80746]``, ``srun -l``'s ``10:``, pdsh's ``gpu-q-13:`` (or ``10.1.2.3:``), Ray's
``(RayWorkerWrapper pid=4009)``, ``host [stderr]``, date stamps. Then comes
``[rankN]:`` (the GLOBAL rank) and the glog/c10 envelope
``[E1121 10:22:33.123456789 ProcessGroupNCCL.cpp:1794]``. We never take a rank
from ``[PG … Rank N]`` (group rank) or NCCL's ``[N]`` (CUDA device).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ._lazy import lazy_compile

_MONTHS = {
    m: i
    for i, m in enumerate(
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], 1
    )
}

# Each wrapper: (name, regex anchored at the start). Group "v" holds a value when useful.
_WRAPPERS: list[tuple[str, re.Pattern[str]]] = [
    ("viewer", lazy_compile(r"\[(?P<v>\d{2,8})\]\s+(?=\S)")),
    # mpirun --tag-output / Horovod: [jobid,rank]<stderr>: — the MPI rank is the global rank
    ("mpi", lazy_compile(r"\[\d+,(?P<v>\d+)\]<std(?:out|err)>:?\s?")),
    # torchrun --tee's local-rank tag: [default3]: (the global rank, if any, follows as [rankN]:)
    ("local", lazy_compile(r"\[default(?P<v>\d+)\]:")),
    # torchrun --tee / a launcher's bare stream tag
    ("tag", lazy_compile(r"\[std(?:out|err)\]:?\s*")),
    ("srun", lazy_compile(r"\s*(?P<v>\d{1,6}):\s")),
    # Ray's actor/worker tag; vLLM's multiprocess executor uses the same shape and names the
    # worker's rank in its torch.distributed world: "(VllmWorker rank=3 pid=4321)"
    (
        "ray",
        lazy_compile(
            r"\((?P<v>[\w.]+)(?:\[\w+=\w+\])?(?: rank=(?P<r>\d+))? pid=\d+"
            r"(?:, ip=[\d.:a-f]+)?\)\s*"
        ),
    ),
    ("stream", lazy_compile(r"(?P<v>[\w.-]+) \[std(?:out|err)\]:?\s*")),
    # a date column, to the second or (a web console's) to the minute, maybe indented
    (
        "date",
        lazy_compile(
            r"\s*\[?(?P<v>\d{4}-\d\d-\d\d[ T_]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?)"
            r"(?: ?(?:Z|[+-]\d\d:?\d\d))?\]?[:\s]\s*"  # an offset may follow a space
        ),
    ),
    (
        "syslog",
        lazy_compile(r"(?P<v>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d) (?P<h>[\w.-]+) [\w./-]+:\s"),
    ),
    (
        "dmesg",
        lazy_compile(r"\[(?P<v>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})\]\s*"),
    ),
    ("kts", lazy_compile(r"\[\s*\d+\.\d+\]\s*")),
    # a job platform's viewer: a level and a bare logger name ("[INFO] [Driver] ") in front
    # of whatever the process printed, the same level on every line (not the program's);
    # a name with "." or ":" is a program's source location and stays
    (
        "logname",
        lazy_compile(r"\[(?:INFO|WARNING|WARN|ERROR|CRITICAL|DEBUG)\] \[[A-Za-z][\w-]*\]\s+(?=\S)"),
    ),
    # torch_xla's xla_dist: each worker's line as "<worker ip> [<ordinal>]"
    ("xla_dist", lazy_compile(r"(?P<v>(?:\d{1,3}\.){3}\d{1,3}) \[\d+\]\s+")),
    # pdsh (the deepspeed multi-node runner's) or a node log viewer's "<node ip>: " label
    ("pdsh_ip", lazy_compile(r"(?P<v>(?:\d{1,3}\.){3}\d{1,3}):\s+(?=\S)")),
    # a kernel-log reader's facility and level columns (talosctl dmesg: "kern:     err: ")
    (
        "kmsg",
        lazy_compile(
            r"(?:kern|user|daemon|auth|syslog):\s+"
            r"(?:emerg|alert|crit|err|warning|warn|notice|info|debug):\s+(?=\S)"
        ),
    ),
    # (a dotted exception type with a digit in its module, ``pyo3_runtime.PanicException: …``,
    # or a module's own ``error`` class, ``cv2.error: …``, is not a host)
    (
        "pdsh",
        lazy_compile(
            r"(?P<v>[a-z][a-z0-9-]*\d[\w.-]*)(?<!Error)(?<!Exception)(?<!Warning)(?<!\.error)"
            r":\s+(?=\S)"
        ),
    ),
]


# The wrappers that can match a line starting with a given ASCII character (first
# characters: "[" viewer/mpi/local/tag/date/dmesg/kts/logname, "(" ray, digits
# srun/stream/date/xla_dist/pdsh_ip,
# whitespace srun/date, A-Z stream/syslog, a-z stream/pdsh/kmsg, "_" "." "-" stream), in their
# order above; any other ASCII character starts none; a non-ASCII one tries them all.
def _first_char_wrappers(c: str) -> tuple[tuple[str, re.Pattern[str]], ...]:
    if c == "[":
        names: tuple[str, ...] = (
            "viewer",
            "mpi",
            "local",
            "tag",
            "date",
            "dmesg",
            "kts",
            "logname",
        )
    elif c == "(":
        names = ("ray",)
    elif c.isdigit():
        names = ("srun", "stream", "date", "xla_dist", "pdsh_ip")
    elif c.isspace():
        names = ("srun", "date")
    elif "A" <= c <= "Z":
        names = ("stream", "syslog")
    elif "a" <= c <= "z":
        names = ("stream", "pdsh", "kmsg")
    elif c in "_.-":
        names = ("stream",)
    else:
        names = ()
    return tuple((n, rx) for n, rx in _WRAPPERS if n in names)


_WRAPPERS_BY_FIRST = {chr(i): _first_char_wrappers(chr(i)) for i in range(128)}
_ALL_WRAPPERS = tuple(_WRAPPERS)
_RANK = lazy_compile(r"\[rank(?P<r>\d+)\]:\s?")
_GLOG_RX = r"\[?(?P<l>[IWEF])(?P<md>\d{3,4}) (?P<t>\d\d:\d\d:\d\d(?:\.\d+)?)(?: +\d+)? (?P<src>[^\s\]]+):\d+\]\s?"
_GLOG = lazy_compile(_GLOG_RX)
# the usual torchrun line, "[rankN]:[E1121 10:22:33.123 ProcessGroupNCCL.cpp:1794] …", in one
# match: the same spans as _RANK then _GLOG (the rank's optional space is never given back,
# a glog envelope cannot start with a space)
_RANK_GLOG = lazy_compile(r"\[rank(?P<r>\d+)\]:\s?" + _GLOG_RX)
_OLD_GLOG = lazy_compile(r"\[(?P<l>[IWEF]) (?P<src>[\w.]+):\d+\]\s?")
_PYLOG_FIRST = frozenset("IWECD")  # the level word's first letter, inside "[…]" or not
_GLOG_OR_PYLOG_FIRST = frozenset("IWEFCD")
_GLOG_FIRST = frozenset("IWEF")
_INDENT = frozenset(" \t")
_PYLOG_LEVEL = lazy_compile(
    r"(?:\[(?P<a>INFO|WARNING|WARN|ERROR|CRITICAL|DEBUG)\]|(?P<b>INFO|WARNING|ERROR|CRITICAL):)\s*"
)


@dataclass(slots=True)
class Envelope:
    message: str
    rank: int | None = None
    level: str | None = None  # I/W/E/F
    time: str | None = None  # ISO, year "0000" when unknown
    host: str | None = None
    task: int | None = None  # srun -l label
    local_rank: int | None = None  # torchrun's [defaultN]: tag
    wrapped: bool = False  # had any wrapper


# "1121" → "0000-11-21T": a job's lines share a few days (bounded all the same)
_GLOG_DAYS: dict[str, str] = {}


def _iso_from_glog(md: str, t: str) -> str:
    day = _GLOG_DAYS.get(md)
    if day is None:
        padded = md.zfill(4)  # c10 logging prints the month unpadded: E321 is March 21
        day = f"0000-{padded[:2]}-{padded[2:]}T"
        if len(_GLOG_DAYS) < 4096:
            _GLOG_DAYS[md] = day
    # ``t`` is "hh:mm:ss" or "hh:mm:ss.fff…" (the glog regexes): microseconds at most
    return day + t[:15]


_ISO_STAMP = lazy_compile(r"(\d{4})-(\d\d)-(\d\d)[ T_](\d\d:\d\d:\d\d)(?:[.,](\d+))?")
_CTIME_STAMP = lazy_compile(r"[A-Z][a-z]{2} ([A-Z][a-z]{2}) +(\d+) (\d\d:\d\d:\d\d) (\d{4})")
_SYSLOG_STAMP = lazy_compile(r"([A-Z][a-z]{2}) +(\d+) (\d\d:\d\d:\d\d)")


def iso_from_text(v: str) -> str | None:
    """Normalise a date stamp we recognise into ISO-8601 (no timezone: logs rarely say)."""
    m = _ISO_STAMP.match(v)
    if m:
        y, mo, d, hms, frac = m.groups()
        return f"{y}-{mo}-{d}T{hms}" + (f".{frac[:6]}" if frac else "")
    m = _CTIME_STAMP.match(v)
    if m:
        mon, d, hms, y = m.groups()
        return f"{y}-{_MONTHS.get(mon.lower(), 1):02d}-{int(d):02d}T{hms}"
    m = _SYSLOG_STAMP.match(v)
    if m:
        mon, d, hms = m.groups()
        return f"0000-{_MONTHS.get(mon.lower(), 1):02d}-{int(d):02d}T{hms}"
    return None


def _digit_or_bracket(c: str) -> bool:
    # str.isdigit() holds for every character ``\d`` matches (and a few more); lstrip() and
    # ``\s`` agree on what is whitespace
    return c == "[" or c.isdigit()


def peel(line: str) -> Envelope:
    """Split one raw line into its message and what the envelope says about it."""
    env = Envelope(line)
    s = line.rstrip("\r\n")
    rounds = 8
    if s.startswith("[rank"):
        m = _RANK_GLOG.match(s)
        if m:  # the first round below, done in one match
            r, env.level, md, t = m.group("r", "l", "md", "t")
            env.rank = int(r)
            env.time = _iso_from_glog(md, t)
            s = s[m.end() :]
            rounds = 7
            c = s[:1]
            if (s[1:2] if c == "[" else c) not in _GLOG_OR_PYLOG_FIRST:
                # the message itself: no second glog envelope, no level word (wrappers come
                # before [rankN]:, never after); the rounds below would find nothing
                env.message = s
                return env
        elif m := _RANK.match(s):
            # the prefix alone (a program's own "[rankN]: …" line): the first round's start,
            # which goes on to the envelopes after it only if one may follow
            env.rank = int(m.group("r"))
            s = s[m.end() :]
            c = s[:1]
            if (s[1:2] if c == "[" else c) not in _GLOG_OR_PYLOG_FIRST:
                env.message = s  # as the rounds below would leave it
                return env
    elif (  # "[E1121 …" or "E1121 …": the glog envelope's level letter and date
        s[1:3].isdigit()
        if s[:1] in _GLOG_FIRST
        else s[:1] == "[" and s[2:3].isdigit() and s[1:2] in _GLOG_FIRST
    ):
        m = _GLOG.match(s)
        if m:  # the first round below, done before it (a glog line, most candidates)
            env.level, md, t = m.group("l", "md", "t")
            env.time = _iso_from_glog(md, t)
            s = s[m.end() :]
            rounds = 7
            c = s[:1]
            if (s[1:2] if c == "[" else c) not in _GLOG_OR_PYLOG_FIRST and not s.startswith(
                "[rank"
            ):
                env.message = s  # as the round's own early exit below
                return env
    elif s[:1] in _INDENT and not _digit_or_bracket(s.lstrip()[:1]):
        # an indented line without a digit or "[" after its indent (a torchrun summary's
        # "  host      : …"): no envelope, wrapper or level word starts it (the rounds below)
        env.message = s
        return env
    for _ in range(rounds):
        progressed = False
        # the first character rules most regexes out (this runs on every candidate line)
        c = s[:1]
        if env.rank is None and c == "[" and s.startswith("[rank"):
            m = _RANK.match(s)
            if m:
                env.rank = int(m.group("r"))
                s = s[m.end() :]
                progressed = True
                c = s[:1]
        # both glog forms are "[L…" or "L…" with L one of IWEF
        lvl = s[1:2] if c == "[" else c
        m = _GLOG.match(s) if lvl and lvl in "IWEF" else None
        if m:
            env.level, md, t = m.group("l", "md", "t")
            env.time = env.time or _iso_from_glog(md, t)
            s = s[m.end() :]
            c = s[:1]
            nxt = s[1:2] if c == "[" else c
            if nxt not in _GLOG_OR_PYLOG_FIRST and not s.startswith("[rank"):
                break  # as after the one-match envelope above: nothing more to peel
            progressed = True
        else:
            m = _OLD_GLOG.match(s) if c == "[" and lvl and lvl in "IWEF" else None
            if m:
                env.level = m.group("l")
                s = s[m.end() :]
                progressed = True
        if progressed:
            continue
        if env.rank is not None or env.level is not None:
            break  # wrappers come before [rankN]: and the glog envelope, never after
        wrappers = _WRAPPERS_BY_FIRST.get(c, _ALL_WRAPPERS) if c else ()
        if (c == " " or c == "\t") and not _digit_or_bracket(s.lstrip()[:1]):
            # an indented line (a torchrun summary's "  host      : …"): srun's "  10: " and
            # an indented date, the only wrappers it may start, need a digit (or "[")
            # after the indent
            wrappers = ()
        for name, rx in wrappers:
            m = rx.match(s)
            if not m:
                continue
            env.wrapped = True
            v = m.groupdict().get("v")
            if name == "srun" and env.task is None:
                env.task = int(v)
            elif name in ("date", "dmesg", "syslog") and v and env.time is None:
                env.time = iso_from_text(v)
                if name == "syslog":
                    env.host = m.group("h")
            elif name == "local" and env.local_rank is None:
                env.local_rank = int(v)
            elif name == "mpi" and env.rank is None:
                env.rank = int(v)
            elif name == "ray" and env.rank is None and m.group("r"):
                env.rank = int(m.group("r"))
            elif name in ("pdsh", "pdsh_ip", "stream", "xla_dist") and v and env.host is None:
                # slurmstepd names its node after a dash: "slurmstepd-gpu27-05: error: …"
                env.host = v[len("slurmstepd-") :] if v.startswith("slurmstepd-") else v
            s = s[m.end() :]
            progressed = True
            break
        if not progressed:
            break
    c = s[:1]
    m = _PYLOG_LEVEL.match(s) if c and (s[1:2] if c == "[" else c) in _PYLOG_FIRST else None
    if m:
        word = m.group("a") or m.group("b")
        env.level = env.level or word[0]
    env.message = s
    return env


_ANY_TIME = lazy_compile(
    r"(?P<glog>[IWEF](?P<md>\d{3,4}) (?P<t>\d\d:\d\d:\d\d(?:\.\d+)?))"
    r"|(?P<iso>\d{4}-\d\d-\d\d[ T_]\d\d:\d\d:\d\d(?:[.,]\d+)?)"
)


_HMS = lazy_compile(r"\d:\d\d:\d")


def find_time(text: str) -> str | None:
    """A timestamp anywhere in a line (for lines whose stamp is not at the start)."""
    # both forms hold "hh:mm:ss": ruling out the (many) lines without one first is ~4x
    # cheaper than the search of both forms at every position
    if ":" not in text or _HMS.search(text) is None:
        return None
    m = _ANY_TIME.search(text)
    if not m:
        return None
    if m.group("glog"):
        return _iso_from_glog(m.group("md"), m.group("t"))
    return iso_from_text(m.group("iso"))
