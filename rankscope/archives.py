"""Safe, streaming expansion of uploaded archives (pure Python, no Django).

Shared by the web/CLI ingest (``apps.ingest.services``) and the engine's offline
CLI (``rankscope.sources``), so an archive is judged by the same rules
wherever it is read. Nothing is ever extracted to disk under a name taken from
the archive: each member is handed to the caller as a stream.

API::

    for member in iter_members(path_or_stream, "logs.tar.gz", limits=Limits(...)):
        if member.rejected:                 # MemberRejected(name, reason)
            report(member.name, member.rejected.reason)
            continue
        with member.open() as stream:       # read it before asking for the next member
            consume(stream)                 # may raise MemberRejected (limits, corruption)

``iter_members`` itself raises ``ArchiveError`` when the archive as a whole cannot
be read any further (corrupt zip, truncated gzip/tar, expanded total or ratio
exceeded): members already yielded stay valid, the rest are not read.

Formats (told by magic bytes, not by name): gzip (``.gz``; a gzip of a tar is a
``.tar.gz``/``.tgz``), zstd (``.zst``), tar (plain, or gzip/bzip2/xz/zstd compressed), zip; anything else
is one plain member: the input itself. Archives inside archives are expanded
too, up to ``Limits.max_depth`` levels.

Member names: for a tar/zip, ``<name>/<path inside>``; for a single gzip, ``name``
without ``.gz``; for a plain file, ``name`` itself. Rejected up front (never opened):
absolute paths, ``..`` components, symlinks, hard links, devices, FIFOs; members
past ``max_members``; members whose declared size exceeds ``max_member_bytes``.
Enforced while reading: ``max_member_bytes`` per member, ``max_total_bytes`` over the
whole archive, and ``max_ratio`` (expanded bytes / compressed bytes read, checked once
more than ``ratio_floor_bytes`` have come out) against zip bombs.

For the engine's existing loop, a ``Member`` also unpacks as ``(name, stream)``
(or ``(name, MemberRejected)`` when rejected).
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import shutil
import stat
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, BinaryIO

import zstandard

from .compressed import is_archive, kind_of

CHUNK = 1 << 20
PASS_CHUNK = 64 << 10
HEAD = 512


@dataclass(frozen=True, slots=True)
class Limits:
    """What one upload may expand to. Defaults match apps/settings.py."""

    max_member_bytes: int = 4 * 1024**3
    max_total_bytes: int = 32 * 1024**3
    max_members: int = 20_000
    max_ratio: float = 200.0
    ratio_floor_bytes: int = 1 << 20
    max_depth: int = 3


class ArchiveError(Exception):
    """The archive cannot be read (any further). ``str()`` is a message for users."""


class MemberRejected(ArchiveError):
    """One member refused: unsafe name or type, over a limit, or unreadable."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name}: {reason}")
        self.name = name
        self.reason = reason


@dataclass(slots=True)
class Member:
    """One file inside an upload. ``open()`` at most once, before the next member."""

    name: str
    size: int | None = None  # declared size when the archive says it; None for gzip streams
    rejected: MemberRejected | None = None
    _opener: Callable[[], BinaryIO] | None = field(default=None, repr=False)

    def open(self) -> BinaryIO:
        if self.rejected is not None:
            raise self.rejected
        assert self._opener is not None
        return self._opener()

    def __iter__(self) -> Iterator[object]:
        # Lets ``for name, stream in iter_members(path)`` work (the engine's sources.py).
        yield self.name
        yield self.rejected if self.rejected is not None else self.open()


def member_name_problem(raw: str) -> str | None:
    """Why a member path is unsafe (None when it is a plain relative path)."""
    name = raw.replace("\\", "/")
    if "\x00" in name:
        return "name contains a NUL byte"
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return "absolute path refused"
    if ".." in PurePosixPath(name).parts:
        return "path with '..' refused (it would point outside the upload)"
    return None


def clean_member_name(raw: str) -> str:
    parts = [p for p in raw.replace("\\", "/").split("/") if p not in ("", ".")]
    return "/".join("".join(ch if ch.isprintable() else "?" for ch in p) for p in parts)


class _Counter(io.RawIOBase):
    """Counts the compressed bytes read from the real input (for the ratio check)."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.raw.read(len(b))
        n = len(data)
        b[:n] = data
        self.count += n
        return n


class _State:
    def __init__(self, limits: Limits, counter: _Counter | None) -> None:
        self.limits = limits
        self.counter = counter
        self.total = 0
        self.members = 0
        self.fatal: ArchiveError | None = None
        self.start = 0

    def compressed(self) -> int:
        return self.counter.count if self.counter is not None else 0


def _fatal(reason: str) -> ArchiveError:
    # Raised by iter_members after the member whose read found it; ``reported`` tells
    # the caller that member's MemberRejected already carried the reason.
    err = ArchiveError(f"archive not read further: {reason}")
    err.reported = True  # type: ignore[attr-defined]
    return err


def _translate(exc: BaseException) -> str:
    if isinstance(exc, EOFError):
        return "truncated archive: the compressed data ends before the end-of-stream marker"
    if isinstance(exc, zipfile.BadZipFile):
        return f"corrupt zip: {exc}"
    if isinstance(exc, gzip.BadGzipFile):
        return f"not a valid gzip: {exc}"
    if isinstance(exc, zlib.error):
        return f"corrupt compressed data: {exc}"
    if isinstance(exc, tarfile.TarError):
        return f"corrupt tar: {exc}"
    if isinstance(exc, lzma.LZMAError):
        return f"corrupt xz data: {exc}"
    if isinstance(exc, zstandard.ZstdError):
        return f"corrupt zstd data: {exc}"
    return f"unreadable: {type(exc).__name__}: {exc}"


_DECODE_ERRORS: tuple[type[BaseException], ...] = (
    EOFError,
    zlib.error,
    zipfile.BadZipFile,
    tarfile.TarError,
    lzma.LZMAError,
    zstandard.ZstdError,
)
_READ_ERRORS = (*_DECODE_ERRORS, OSError)


class _Guarded(io.RawIOBase):
    """A member's stream: enforces the limits and turns decoder errors into MemberRejected."""

    def __init__(self, raw: IO[bytes], name: str, state: _State, *, compressed: bool) -> None:
        self.raw = raw
        self.name = name
        self.state = state
        self.compressed_input = compressed
        self.count = 0

    def readable(self) -> bool:
        return True

    def _fail(self, reason: str, *, fatal: bool) -> MemberRejected:
        exc = MemberRejected(self.name, reason)
        if fatal:
            self.state.fatal = _fatal(reason)
        return exc

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        if self.state.fatal is not None:
            raise MemberRejected(self.name, str(self.state.fatal))
        try:
            data = self.raw.read(min(len(b), CHUNK))
        except _DECODE_ERRORS as exc:
            raise self._fail(_translate(exc), fatal=True) from None
        except OSError as exc:  # BadGzipFile is an OSError too
            raise self._fail(_translate(exc), fatal=True) from None
        n = len(data)
        self.count += n
        self.state.total += n
        lim = self.state.limits
        if self.count > lim.max_member_bytes:
            raise self._fail(
                f"expands to more than the {_human(lim.max_member_bytes)} per-file limit",
                fatal=False,
            )
        if self.state.total > lim.max_total_bytes:
            raise self._fail(
                f"the archive expands to more than the {_human(lim.max_total_bytes)} limit",
                fatal=True,
            )
        if self.compressed_input and self.state.total > lim.ratio_floor_bytes:
            packed = max(self.state.compressed(), 1)
            if self.state.total / packed > lim.max_ratio:
                raise self._fail(
                    f"compression ratio above {lim.max_ratio:g}:1 (a zip bomb?)", fatal=True
                )
        b[:n] = data
        return n

    def close(self) -> None:
        super().close()


def _human(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:g} {unit}" if unit == "bytes" else f"{n:.1f} {unit}".replace(".0 ", " ")
        n /= 1024
    return f"{n} TiB"


human_size = _human


def _buffered(raw: io.RawIOBase) -> BinaryIO:
    return io.BufferedReader(raw, buffer_size=CHUNK)  # type: ignore[return-value]


def iter_members(
    source: str | os.PathLike[str] | IO[bytes],
    name: str | None = None,
    *,
    limits: Limits | None = None,
) -> Iterator[Member]:
    """Each file in ``source`` (an archive, or a plain file = one member), streamed.

    ``source`` is a path or a readable binary stream (not closed here). ``name`` is
    the upload's name, used as the prefix of member names (default: the path's
    base name, or ``upload``). See the module docstring for limits and errors.
    """
    limits = limits or Limits()
    if isinstance(source, str | os.PathLike):
        with open(source, "rb") as f:
            yield from iter_members(f, name or Path(source).name, limits=limits)
        return
    name = name or "upload"
    counter = _Counter(source)
    state = _State(limits, counter)
    if getattr(source, "seekable", lambda: False)():
        state.start = source.tell()
    stream = _buffered(counter)
    yield from _expand(stream, name, state, depth=0, outer_compressed=False)


def _peek(stream: BinaryIO) -> bytes:
    return stream.peek(HEAD)[:HEAD] if hasattr(stream, "peek") else b""  # type: ignore[attr-defined]


def _expand(
    stream: BinaryIO, name: str, state: _State, *, depth: int, outer_compressed: bool
) -> Iterator[Member]:
    try:
        head = _peek(stream)
    except _READ_ERRORS as exc:
        raise ArchiveError(f"{name}: {_translate(exc)}") from None
    kind = kind_of(head) if depth <= state.limits.max_depth else "plain"
    if kind == "plain":
        yield from _single(stream, name, state, compressed=outer_compressed)
    elif kind in ("gzip", "bzip2", "xz", "zstd"):
        decoded = _decompressor(kind, stream)
        inner = _buffered(_Passthrough(decoded))
        try:
            inner_head = _peek(inner)
        except _READ_ERRORS as exc:
            raise ArchiveError(f"{name}: {_translate(exc)}") from None
        # A compressed tar keeps the upload's name as the prefix of its members;
        # a single compressed file is named without its compression suffix.
        inner_name = name if kind_of(inner_head) == "tar" else _strip_suffix(name, kind)
        yield from _expand(inner, inner_name, state, depth=depth + 1, outer_compressed=True)
    elif kind == "tar":
        yield from _tar(stream, name, state, depth=depth, compressed=outer_compressed)
    elif kind == "zip":
        yield from _zip(stream, name, state, depth=depth)


def _decompressor(kind: str, stream: BinaryIO) -> IO[bytes]:
    if kind == "zstd":
        return _ZstdReader(stream)
    if kind == "gzip":
        return gzip.GzipFile(fileobj=stream, mode="rb")
    # BZ2File and LZMAFile take the file object as their first argument (no ``fileobj=``)
    opener = {"bzip2": bz2.BZ2File, "xz": lzma.LZMAFile}[kind]
    return opener(stream, mode="rb")


class _ZstdReader(io.RawIOBase):
    """zstd frames one after another (appended logs), and a clear error when cut short.

    zstandard's ``stream_reader`` ends quietly at the end of its input even in the
    middle of a frame, so a truncated ``.zst`` would read as a shorter (or empty) log:
    a frame still open when the input ends raises ``EOFError`` here, like gzip does.
    """

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.frame = zstandard.ZstdDecompressor().decompressobj()
        self.pending = memoryview(b"")
        self.started = False

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self.pending:
            chunk = self.raw.read(PASS_CHUNK)
            if not chunk:
                if self.started and not self.frame.eof:
                    raise EOFError("zstd frame cut short")
                return 0
            out = []
            while chunk:
                if self.frame.eof:  # the previous frame ended: the rest is the next one
                    self.frame = zstandard.ZstdDecompressor().decompressobj()
                self.started = True
                out.append(self.frame.decompress(chunk))
                chunk = self.frame.unused_data if self.frame.eof else b""
            self.pending = memoryview(out[0] if len(out) == 1 else b"".join(out))
        n = min(len(b), len(self.pending))
        b[:n] = self.pending[:n]
        self.pending = self.pending[n:]
        return n


class _Passthrough(io.RawIOBase):
    """A raw reader over a decompressor, so it can be buffered and peeked."""

    def __init__(self, inner: IO[bytes]) -> None:
        self.inner = inner

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        # Small steps: a peek must not decode far ahead, or a truncated end would be
        # reported before the members in front of it were read.
        data = self.inner.read(min(len(b), PASS_CHUNK))
        b[: len(data)] = data
        return len(data)


def _strip_suffix(name: str, kind: str) -> str:
    low = name.lower()
    suffixes = {"gzip": (".gz", ".gzip"), "bzip2": (".bz2",), "xz": (".xz",), "zstd": (".zst",)}
    for suf in suffixes[kind]:
        if low.endswith(suf) and len(name) > len(suf):
            return name[: -len(suf)]
    return name


def _count_member(state: _State, name: str) -> MemberRejected | None:
    state.members += 1
    if state.members > state.limits.max_members:
        reason = f"more than {state.limits.max_members} files in the archive; the rest are not read"
        state.fatal = _fatal(reason)
        return MemberRejected(name, reason)
    return None


def _single(stream: BinaryIO, name: str, state: _State, *, compressed: bool) -> Iterator[Member]:
    over = _count_member(state, name)
    if over:
        yield Member(name=name, rejected=over)
        return
    used = False

    def opener() -> BinaryIO:
        nonlocal used
        if used:
            raise ValueError(f"{name} was already opened")
        used = True
        return _buffered(_Guarded(stream, name, state, compressed=compressed))

    yield Member(name=name, size=None, _opener=opener)
    if state.fatal is not None:
        raise state.fatal


def _tar(
    stream: BinaryIO, name: str, state: _State, *, depth: int, compressed: bool
) -> Iterator[Member]:
    try:
        tar = tarfile.open(fileobj=stream, mode="r|")  # noqa: SIM115 — streamed, closed below
    except _READ_ERRORS as exc:
        raise ArchiveError(f"{name}: {_translate(exc)}") from None
    try:
        while True:
            if state.fatal is not None:
                raise state.fatal
            try:
                info = tar.next()
            except _READ_ERRORS as exc:
                raise ArchiveError(f"{name}: {_translate(exc)}") from None
            if info is None:
                break
            if info.isdir():
                continue
            full = f"{name}/{clean_member_name(info.name)}"
            problem = member_name_problem(info.name)
            if problem is None and not info.isreg():
                problem = _tar_type_problem(info)
            if problem is None and info.size > state.limits.max_member_bytes:
                problem = (
                    f"{_human(info.size)} is over the {_human(state.limits.max_member_bytes)}"
                    " per-file limit"
                )
            if problem is not None:
                over = _count_member(state, full)
                yield Member(
                    name=full, size=info.size, rejected=over or MemberRejected(full, problem)
                )
                continue
            fobj = tar.extractfile(info)
            assert fobj is not None
            yield from _nested(
                fobj, full, state, depth=depth, compressed=compressed, size=info.size
            )
    finally:
        tar.close()


def _tar_type_problem(info: tarfile.TarInfo) -> str:
    if info.issym():
        return f"symbolic link (to {info.linkname!r}) refused"
    if info.islnk():
        return f"hard link (to {info.linkname!r}) refused"
    if info.ischr() or info.isblk():
        return "device file refused"
    if info.isfifo():
        return "FIFO refused"
    return "not a regular file; refused"


def _nested(
    fobj: IO[bytes], full: str, state: _State, *, depth: int, compressed: bool, size: int | None
) -> Iterator[Member]:
    inner = _buffered(_Passthrough(fobj))
    try:
        head = _peek(inner)
    except _READ_ERRORS as exc:
        raise ArchiveError(f"{full}: {_translate(exc)}") from None
    if is_archive(head) and depth + 1 <= state.limits.max_depth:
        yield from _expand(inner, full, state, depth=depth + 1, outer_compressed=compressed)
        return
    over = _count_member(state, full)
    if over:
        yield Member(name=full, size=size, rejected=over)
        return

    def opener() -> BinaryIO:
        return _buffered(_Guarded(inner, full, state, compressed=compressed))

    yield Member(name=full, size=size, _opener=opener)


def _zip(stream: BinaryIO, name: str, state: _State, *, depth: int) -> Iterator[Member]:
    # A zip's directory is at its end: it needs a seekable file. Spool a non-seekable
    # input to a temporary file (bounded by the per-file limit the caller enforces).
    seekable = getattr(stream, "seekable", lambda: False)()
    if depth == 0 and state.counter is not None and state.counter.raw.seekable():
        raw = state.counter.raw
        raw.seek(state.start)
        holder: IO[bytes] = raw
        spooled = None
    elif seekable and depth == 0:
        holder, spooled = stream, None
    else:
        spooled = tempfile.TemporaryFile()  # noqa: SIM115 — closed in finally
        shutil.copyfileobj(stream, spooled, CHUNK)
        spooled.seek(0)
        holder = spooled
    try:
        try:
            zf = zipfile.ZipFile(holder)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
            raise ArchiveError(f"{name}: {_translate(exc)}") from None
        with zf:
            yield from _zip_members(zf, name, state, depth=depth)
    finally:
        if spooled is not None:
            spooled.close()


def _zip_members(zf: zipfile.ZipFile, name: str, state: _State, *, depth: int) -> Iterator[Member]:
    lim = state.limits
    infos = zf.infolist()
    declared = sum(i.file_size for i in infos if not i.is_dir())
    if declared > lim.max_total_bytes:
        raise ArchiveError(
            f"{name}: declares {_human(declared)} of content, over the "
            f"{_human(lim.max_total_bytes)} limit (a zip bomb?); not expanded"
        )
    for info in infos:
        if state.fatal is not None:
            raise state.fatal
        if info.is_dir():
            continue
        full = f"{name}/{clean_member_name(info.filename)}"
        problem = member_name_problem(info.filename)
        mode = info.external_attr >> 16
        if problem is None and mode and stat.S_ISLNK(mode):
            problem = "symbolic link refused"
        if problem is None and info.file_size > lim.max_member_bytes:
            problem = f"{_human(info.file_size)} is over the {_human(lim.max_member_bytes)} per-file limit"
        if (
            problem is None
            and info.file_size > lim.ratio_floor_bytes
            and info.file_size / max(info.compress_size, 1) > lim.max_ratio
        ):
            problem = (
                f"compression ratio {info.file_size / max(info.compress_size, 1):.0f}:1 is "
                f"above {lim.max_ratio:g}:1 (a zip bomb?); not expanded"
            )
        if problem is None and info.flag_bits & 0x1:
            problem = "encrypted member; cannot be read"
        if problem is not None:
            over = _count_member(state, full)
            yield Member(
                name=full, size=info.file_size, rejected=over or MemberRejected(full, problem)
            )
            continue
        try:
            fobj = zf.open(info)
        except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, EOFError) as exc:
            over = _count_member(state, full)
            yield Member(
                name=full,
                size=info.file_size,
                rejected=over or MemberRejected(full, _translate(exc)),
            )
            continue
        # The declared sizes may lie: _ZipRatio counts what really comes out against
        # this member's own compressed size.
        with fobj:
            yield from _zip_member(fobj, full, state, info, depth=depth)


def _zip_member(
    fobj: IO[bytes], full: str, state: _State, info: zipfile.ZipInfo, *, depth: int
) -> Iterator[Member]:
    compressed = info.compress_type != zipfile.ZIP_STORED
    inner = _buffered(_ZipRatio(fobj, full, state, info.compress_size, compressed))
    try:
        head = _peek(inner)
    except MemberRejected as exc:
        yield Member(name=full, size=info.file_size, rejected=exc)
        return
    if is_archive(head) and depth + 1 <= state.limits.max_depth:
        yield from _expand(inner, full, state, depth=depth + 1, outer_compressed=compressed)
        return
    over = _count_member(state, full)
    if over:
        yield Member(name=full, size=info.file_size, rejected=over)
        return

    def opener() -> BinaryIO:
        return _buffered(_Guarded(inner, full, state, compressed=False))

    yield Member(name=full, size=info.file_size, _opener=opener)


class _ZipRatio(io.RawIOBase):
    """Checks one zip member's real expansion against its stored compressed size."""

    def __init__(
        self, inner: IO[bytes], name: str, state: _State, packed: int, compressed: bool
    ) -> None:
        self.inner = inner
        self.name = name
        self.state = state
        self.packed = max(packed, 1)
        self.compressed = compressed
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        try:
            data = self.inner.read(min(len(b), CHUNK))
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, lzma.LZMAError) as exc:
            raise MemberRejected(self.name, _translate(exc)) from None
        self.count += len(data)
        lim = self.state.limits
        if (
            self.compressed
            and self.count > lim.ratio_floor_bytes
            and self.count / self.packed > lim.max_ratio
        ):
            reason = f"compression ratio above {lim.max_ratio:g}:1 (a zip bomb?)"
            self.state.fatal = _fatal(reason)
            raise MemberRejected(self.name, reason)
        b[: len(data)] = data
        return len(data)
