"""read_paths: a corrupt or truncated archive is reported and the other paths still read."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import rankscope as engine
from rankscope import sources


def _tgz(path: Path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:gz") as tf:
        for n, data in members.items():
            info = tarfile.TarInfo(n)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


def _read_all(paths: list[Path]) -> list[engine.ParseResult]:
    return [engine.parse_artifact(s, name=n) for n, s in sources.read_paths(paths)]


def test_truncated_archive_is_reported_and_the_next_path_is_read(tmp_path: Path) -> None:
    whole = tmp_path / "whole.tgz"
    _tgz(whole, {"big.log": os.urandom(300_000).hex().encode(), "b.log": b"x\n"})
    cut = tmp_path / "cut.tgz"
    cut.write_bytes(whole.read_bytes()[:40_000])
    good = tmp_path / "error-77-3.out"
    good.write_text(
        "slurmstepd: error: *** JOB 77 ON gpu-n3 CANCELLED AT 2031-05-06T07:08:09 "
        "DUE TO TIME LIMIT ***\n"
    )
    results = _read_all([cut, good])
    bad = [r for r in results if r.error]
    assert bad and all("cut.tgz" in r.name for r in bad)
    assert any("truncated" in (r.error or "") for r in bad)
    (ok,) = [r for r in results if r.name == "error-77-3.out"]
    assert ok.error is None and [e.kind for e in ok.events] == ["slurm_time_limit"]


def test_garbage_behind_an_archive_magic_is_one_unreadable_artifact(tmp_path: Path) -> None:
    junk = tmp_path / "logs.zip"
    junk.write_bytes(b"PK\x03\x04" + b"not a zip at all" * 8)
    plain = tmp_path / "rank_0.log"
    plain.write_text("hello\n")
    results = _read_all([junk, plain])
    assert [r.name for r in results] == ["logs.zip", "rank_0.log"]
    assert "archive unreadable" in (results[0].error or "")
    assert results[1].error is None


def test_iter_files_lists_in_os_walk_order_without_links(tmp_path: Path) -> None:
    """Files of a folder by name, then its folders by name; links (to files or to folders)
    skipped and not followed; names relative to the given folder's own name."""
    job = tmp_path / "job"
    for rel in ("b.log", "A.log", "sub/z.log", "sub/deeper/x.log", "Sub2/y.log"):
        (job / rel).parent.mkdir(parents=True, exist_ok=True)
        (job / rel).write_text("x\n")
    (job / "link.log").symlink_to(job / "b.log")
    (job / "sub" / "to-sub2").symlink_to(job / "Sub2")
    want = []
    for root, dirs, files in os.walk(job, followlinks=False):
        dirs.sort()
        for fn in sorted(files):
            fp = Path(root) / fn
            if not fp.is_symlink() and fp.is_file():
                want.append((str(Path(job.name) / fp.relative_to(job)), fp))
    assert list(sources.iter_files([job])) == want
    assert [n for n, _ in want] == [
        "job/A.log",
        "job/b.log",
        "job/Sub2/y.log",
        "job/sub/z.log",
        "job/sub/deeper/x.log",
    ]


def _settled(path: Path) -> Path:
    old = path.stat().st_mtime - 3600  # long written: a plain file this old is mapped
    os.utime(path, (old, old))
    return path


def test_every_single_file_compression_reads_as_the_plain_log(tmp_path: Path) -> None:
    import bz2
    import gzip
    import lzma

    import zstandard

    # big and incompressible enough that the compressed file itself is in the range the
    # text parser maps: the decompressed stream must be read, never the compressed bytes
    lines = [f"[rank1]: step {i} {os.urandom(48).hex()}" for i in range(6000)]
    lines.append("[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    data = ("\n".join(lines) + "\n").encode()
    packed = {
        "gz": gzip.compress(data),
        "bz2": bz2.compress(data),
        "xz": lzma.compress(data),
        "zst": zstandard.ZstdCompressor().compress(data),
    }
    want = engine.parse_artifact(io.BytesIO(data), name="rank_1.log")
    for suffix, blob in packed.items():
        path = tmp_path / f"rank_1.log.{suffix}"
        path.write_bytes(blob)
        _settled(path)
        (got,) = [r for r in _read(path) if r.name == "rank_1.log"]
        assert got.error is None, suffix
        assert (got.lines, [(e.kind, e.line) for e in got.events]) == (
            want.lines,
            [(e.kind, e.line) for e in want.events],
        ), suffix


def _read(path: Path) -> list:
    from rankscope.cli import parse_paths

    return parse_paths([path], jobs=1)
