"""rankscope.archives on its own: no Django, streams only."""

from __future__ import annotations

import gzip
import io
import os
import tarfile

import pytest

from rankscope.archives import ArchiveError, Limits, MemberRejected, iter_members
from tests.ingest import logs


def read_all(data: bytes, name: str, **kw) -> dict[str, bytes | str]:
    out: dict[str, bytes | str] = {}
    for m in iter_members(io.BytesIO(data), name, **kw):
        if m.rejected:
            out[m.name] = f"REJECTED {m.rejected.reason}"
            continue
        try:
            with m.open() as s:
                out[m.name] = s.read()
        except MemberRejected as exc:
            out[m.name] = f"REJECTED {exc.reason}"
    return out


def test_a_plain_file_is_one_member_named_as_uploaded():
    assert read_all(b"hello\n", "rank_0.log") == {"rank_0.log": b"hello\n"}


def test_nested_archives_expand_with_their_path_as_prefix():
    inner = logs.tar_gz({"rank_5.log": b"five\n"})
    data = logs.zip_bytes({"a/rank_4.log.gz": gzip.compress(b"four\n"), "b/inner.tgz": inner})
    assert read_all(data, "up.zip") == {
        "up.zip/a/rank_4.log": b"four\n",
        "up.zip/b/inner.tgz/rank_5.log": b"five\n",
    }


def test_a_tar_from_a_path_and_a_hard_link_is_refused(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        info = tarfile.TarInfo("hl")
        info.type, info.linkname = tarfile.LNKTYPE, "etc/passwd"
        t.addfile(info)
    (tmp_path / "x.tar").write_bytes(buf.getvalue())
    (m,) = list(iter_members(tmp_path / "x.tar"))
    assert m.name == "x.tar/hl" and "hard link" in m.rejected.reason


def test_the_per_member_limit_is_enforced_while_streaming_a_gzip():
    out = read_all(gzip.compress(b"x" * 10_000), "a.log.gz", limits=Limits(max_member_bytes=4096))
    assert "per-file limit" in out["a.log"]


def test_a_truncated_tar_gz_rejects_the_member_being_read_then_stops():
    data = logs.tar_gz({"ok.log": b"fine\n", "big.log": os.urandom(1 << 20)})[:-2000]
    seen: dict[str, str] = {}
    with pytest.raises(ArchiveError) as exc:
        for m in iter_members(io.BytesIO(data), "t.tgz"):
            try:
                with m.open() as s:
                    s.read()
                seen[m.name] = "ok"
            except MemberRejected as rej:
                seen[m.name] = rej.reason
    assert seen["t.tgz/ok.log"] == "ok"
    assert "truncated" in seen["t.tgz/big.log"]
    assert exc.value.reported  # the caller already told the user about big.log


def test_members_unpack_as_name_and_stream_for_the_engine():
    data = logs.tar_gz({"rank_0.log": b"zero\n", "../x": b"bad"})
    pairs = [
        (name, s.read() if hasattr(s, "read") else s)
        for name, s in iter_members(io.BytesIO(data), "u.tgz")
    ]
    assert pairs[0] == ("u.tgz/rank_0.log", b"zero\n")
    assert isinstance(pairs[1][1], MemberRejected)
