"""``read_paths``: files, directories and archives → ``(name, binary stream)`` pairs.

Archives are NOT expanded here: that is the job of the shared archive-safety
module ``rankscope.archives`` (the same rules as uploads: members stay in a
private temporary space, no ``..``/absolute paths, size and ratio limits).
A rejected member (``..`` path, link, bomb, corrupt) becomes a stream that
fails on first read, so ``parse_artifact`` reports it in the artifact list and
the other files are still analysed.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from .compressed import is_archive


class UnreadableStream(io.RawIOBase):
    """A stream that fails on first read with a message ``parse_artifact`` will report."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        raise OSError(self.reason)


def _expand(path: Path, name: str) -> Iterator[tuple[str, BinaryIO]]:
    from . import archives  # only for an archive or a compressed log: tarfile, zipfile…

    yielded = 0
    try:
        for member in archives.iter_members(path, name):
            yielded += 1
            if member.rejected is not None:
                yield member.name, UnreadableStream(f"skipped: {member.rejected.reason}")
                continue
            stream = member.open()
            try:
                yield member.name, stream
            finally:
                stream.close()
    except archives.ArchiveError as exc:
        # a corrupt or truncated archive: report it as one unreadable artifact and go on
        if yielded:
            yield (
                f"{name} (rest of archive)",
                UnreadableStream(f"archive unreadable past this point: {exc}"),
            )
        else:
            yield name, UnreadableStream(f"archive unreadable: {exc}")


def read_one(path: Path, name: str) -> Iterator[tuple[str, BinaryIO]]:
    """One file as ``(name, stream)``: itself, or each member when it is an archive/compressed."""
    try:
        f = open(path, "rb")  # noqa: SIM115 — closed below, after the consumer is done
    except OSError as exc:
        yield name, UnreadableStream(f"cannot open: {exc.strerror or exc}")
        return
    try:
        head = f.read(512)
        if is_archive(head):
            f.close()
            yield from _expand(path, name)
            return
        f.seek(0)
        yield name, f
    finally:
        f.close()


def iter_files(paths: Iterable[str | os.PathLike[str]]) -> Iterator[tuple[str, Path]]:
    """Regular files under ``paths`` with display names; symlinks inside directories are skipped."""
    for p in paths:
        path = Path(p)
        if path.is_dir():
            yield from _walk(str(path), str(Path(path.name)))
        else:
            yield path.name if path.is_file() else str(path), path


def _walk(top: str, shown: str) -> Iterator[tuple[str, Path]]:
    """``os.walk`` order (a folder's files by name, then its folders by name, links to
    folders not followed) from one ``scandir`` a folder, whose entries know their type
    without a ``stat`` each (~30 µs a file on a 512-file job)."""
    try:
        with os.scandir(top) as it:
            entries = list(it)
    except OSError:
        return
    files, dirs = [], []
    for e in entries:
        try:
            is_dir = e.is_dir()
        except OSError:
            is_dir = False
        (dirs if is_dir else files).append(e)
    for e in sorted(files, key=lambda e: e.name):
        if not e.is_symlink() and e.is_file():
            yield (e.name if shown == "." else f"{shown}/{e.name}"), Path(e.path)
    for e in sorted(dirs, key=lambda e: e.name):
        if not e.is_symlink():
            yield from _walk(e.path, e.name if shown == "." else f"{shown}/{e.name}")


def read_paths(paths: Iterable[str | os.PathLike[str]]) -> Iterator[tuple[str, BinaryIO]]:
    """Each file under ``paths`` (recursively, archives expanded) as ``(name, stream)``.

    Streams are closed when the iteration moves on: consume each before the next.
    A path that does not exist or cannot be read yields a stream that fails on read,
    so the caller reports it and goes on.
    """
    for name, path in iter_files(paths):
        if not path.exists():
            yield name, UnreadableStream("no such file or directory")
            continue
        yield from read_one(path, name)
