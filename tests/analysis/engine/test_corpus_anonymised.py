"""The public-failure corpus carries no identifying value a re-synthesis must replace
(tests/corpus/README.md, "Replace identifying values"): no IPv4 address outside the
placeholder ranges, no e-mail address, no home directory other than the placeholder
user names. Only checks that cannot fire on legitimate log text: program output keeps
its formats, so a hit is a value that was left from the report."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from rankscope.testing.corpus import CORPUS

# A dotted quad that is not part of a longer dotted or word token (a version such as
# 2.0.1.post1 or 1.2.3.4.5 is not an address).
_IPV4 = re.compile(r"(?<![\w.-])(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?![\w.])")
_EMAIL = re.compile(r"(?<![\w.%+-])([\w.%+-]+)@([A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,})\b")
_HOME = re.compile(r"/(?:home|Users)/([A-Za-z0-9_][A-Za-z0-9._-]*)")

# Placeholder values (documented in tests/corpus/README.md).
HOME_NAMES = re.compile(r"user\d*|ray|jovyan|runner|aiscuser")
EMAIL_DOMAINS = re.compile(r"(?:.+\.)?example(?:\.(?:com|org|net))?", re.IGNORECASE)


def _placeholder_ipv4(octets: tuple[int, ...]) -> bool:
    a, b, c, _ = octets
    return (
        a in (0, 10, 127, 255)  # unspecified, the 10/8 placeholders, loopback, masks
        or (a, b, c) in ((192, 0, 2), (198, 51, 100), (203, 0, 113))  # RFC 5737
    )


def ipv4_leaks(line: str) -> list[str]:
    out = []
    for m in _IPV4.finditer(line):
        octets = tuple(int(g) for g in m.groups())
        if max(octets) <= 255 and not _placeholder_ipv4(octets):
            out.append(m.group(0))
    return out


def email_leaks(line: str) -> list[str]:
    # git@host:repo is an SSH remote, not someone's address
    return [
        m.group(0)
        for m in _EMAIL.finditer(line)
        if m.group(1) != "git" and not EMAIL_DOMAINS.fullmatch(m.group(2))
    ]


def home_leaks(line: str) -> list[str]:
    return [m.group(0) for m in _HOME.finditer(line) if not HOME_NAMES.fullmatch(m.group(1))]


def _lines(root: Path) -> Iterator[tuple[str, int, str]]:
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        with path.open(encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                yield str(path.relative_to(root)), n, line


@pytest.mark.parametrize("check", [ipv4_leaks, email_leaks, home_leaks], ids=lambda f: f.__name__)
def test_corpus_has_no_identifying_value(check) -> None:
    found = [f"{name}:{n}: {hit}" for name, n, line in _lines(CORPUS) for hit in check(line)]
    assert not found, "values left from the reports:\n" + "\n".join(found[:40])


def test_checks_flag_real_values_and_pass_placeholders() -> None:
    assert ipv4_leaks("NCCL INFO Bootstrap : Using eth0:172.16.121.86<0>") == ["172.16.121.86"]
    assert ipv4_leaks("connect to 34.117.59.81:443 failed") == ["34.117.59.81"]
    assert ipv4_leaks("eth0:10.0.7.33<0> peer 192.0.2.4 mask 255.255.255.0 0.0.0.0:29500") == []
    assert ipv4_leaks("torch 2.0.1.post1, nccl 2.18.1.1.x, build 1.2.3.4.5") == []
    assert email_leaks("Contact Email: jdoe@cs.univ.edu") == ["jdoe@cs.univ.edu"]
    assert email_leaks("git@github.com:org/repo.git ops@example.com builder@U22-I3-B10") == []
    assert home_leaks('File "/home/mingzeya/train.py"') == ["/home/mingzeya"]
    assert home_leaks("/Users/jdoe/venv /home/user3/a /home/ray/b /home/.conda/envs") == [
        "/Users/jdoe"
    ]
