"""What a file's first bytes say it is: an archive, a compressed stream, or plain.

Apart from ``rankscope.archives`` (which expands them) so that reading a plain log does
not import the tar, zip and decompressor modules: the offline command on a text log
looks at 512 bytes and goes on.
"""

from __future__ import annotations

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def kind_of(head: bytes) -> str:
    """``gzip``, ``bzip2``, ``xz``, ``zstd``, ``zip``, ``tar`` or ``plain`` from the first 512 bytes."""
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    if head[:3] == b"BZh" and head[3:4].isdigit():
        return "bzip2"
    if head[:6] == b"\xfd7zXZ\x00":
        return "xz"
    if head[:4] == ZSTD_MAGIC:
        return "zstd"
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return "zip"
    if head[257:262] == b"ustar":
        return "tar"
    return "plain"


def is_archive(head: bytes) -> bool:
    return kind_of(head) != "plain"
