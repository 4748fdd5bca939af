"""Kind detection asks every recogniser's literals of the head in one pass (``Head.has``):
the same kinds as ``in`` tests over the decoded head, for declared and undeclared literals."""

from __future__ import annotations

import pytest

from rankscope import parsers
from rankscope.detect import Head, Recognizer, classify_artifact


def _recognizers(*extra: Recognizer) -> list[Recognizer]:
    return sorted([*parsers.artifact_recognizers(), *extra], key=lambda r: r.order)


def test_a_declared_literal_is_answered_from_the_shared_pass() -> None:
    mine = Recognizer("my_kind", 45, lambda h: h.has("MYTOOL v2"), literals=("MYTOOL v2",))
    head = b"x" * 70000 + b"MYTOOL v2"  # past the 64 KiB a recogniser sees: not there
    assert classify_artifact("a.log", b"start\nMYTOOL v2 ready\n", _recognizers(mine)) == "my_kind"
    calls: list[bool] = []

    def test(h: Head) -> bool:
        calls.append(h.has("MYTOOL v2"))
        return calls[-1]

    later = Recognizer("my_kind", 45, test, literals=("MYTOOL v2",))
    assert classify_artifact("a.log", head, _recognizers(later)) == "rank_log"
    assert calls == [False]


def test_an_undeclared_literal_is_looked_for_in_the_text() -> None:
    h = Head("a.log", "caf\u00e9 NVIDIA-SMI 535".encode())
    assert h.has("NVIDIA-SMI") and h.has("caf\u00e9") and not h.has("NVSMI LOG")


@pytest.mark.parametrize(
    ("name", "head", "kind"),
    [
        ("x.log", b"[   12.345678] NVRM: Xid (PCI:0000:3b:00): 79\n", "dmesg"),
        ("x.log", b"[I1121 08:00:01.000 train.py:10] step 1\n", "rank_log"),
        ("x.log", b"[rank0]: step 1\n", "rank_log"),
        ("x.log", b"[2024-03-05 10:11:12] step 1\n", "rank_log"),
        (
            "x.log",
            b"JobId=4242 JobName=train\n   JobState=FAILED Reason=NonZeroExitCode\n",
            "slurm_job",
        ),
        (
            "x.log",
            b"+-----+\n| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05 |\n",
            "nvidia_smi",
        ),
        (
            "x.log",
            b"Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error\n",
            "nvidia_smi",
        ),
        ("x.log", b"GPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV12\t0-31\n", "topology"),
        (
            "x.log",
            b"Started up at 2024/03/05 10:11:12, host t1, go1.21.5 for linux/amd64\n",
            "aistore",
        ),
        ("x.json", b'{"version": "2.4", "pg_status": {}, "entries": {}}', "flight_recorder"),
        (
            "x.log",
            b"# nThread 1 nGpus 8 minBytes 8 maxBytes 8G\n# Rank  0 Group  0\n",
            "nccl_tests",
        ),
    ],
)
def test_each_kind_still_recognised_from_its_head(name: str, head: bytes, kind: str) -> None:
    assert parsers.detect_kind(name, head) == kind


def test_the_first_line_is_that_of_the_decoded_head() -> None:
    for data in (b"ab\xe2\x82\nrest", b"Time,GPU \xff\xfe\n", b"no newline \xf0\x9f", b""):
        text = data.decode("utf-8", errors="replace")
        assert Head("a.csv", data).first_line == text.split("\n", 1)[0].lower().replace(" ", "")
