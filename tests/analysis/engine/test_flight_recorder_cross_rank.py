"""Cross-rank flight-recorder comparison: dumps from every rank → who never joined, who mismatched."""

from __future__ import annotations

import io
import json
import pickle
from pathlib import Path
from typing import Any

import pytest

import rankscope as engine
from rankscope.testing.flight_recorder import write_dumps

from .conftest import triage_dir


def _triage(tmp_path: Path, **kw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    manifest = write_dumps(tmp_path / "dumps", **kw)
    return manifest, triage_dir(tmp_path / "dumps")


def _group(doc: dict[str, Any], pg: str = "0") -> dict[str, Any]:
    return next(g for g in doc["localization"]["flight_recorder"]["groups"] if g["pg"] == pg)


def _finding(doc: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(f for f in doc["findings"] if f["kind"] == kind)


@pytest.mark.parametrize("fmt", ["pickle", "json"])
def test_a_rank_that_never_joined_seq_s_is_named_the_culprit(tmp_path: Path, fmt: str) -> None:
    m, doc = _triage(tmp_path, ranks=8, fmt=fmt, missing_rank=5, fault_seq=30)
    g = _group(doc)
    assert (g["outcome"], g["seq"], g["missing_ranks"]) == ("not_joined", 30, [5])
    assert g["waiting_ranks"] == [0, 1, 2, 3, 4, 6, 7]
    loc = doc["localization"]
    assert loc["culprit_ranks"] == m["culprit_ranks"] == [5]
    assert 5 in loc["straggler_ranks"]
    assert doc["triage"]["shape"] == "hang"
    f = _finding(doc, "fr_not_joined")
    assert f["ranks"] == [5] and "seq 30" in f["title"]
    files = {e["file"].rsplit("/", 1)[-1] for e in f["evidence"]}
    assert "comm_lib_trace_rank_5" in files  # the culprit's own last entry is shown
    # the subgroups every rank finished are fine
    assert all(
        x["outcome"] == "matched" for x in loc["flight_recorder"]["groups"] if x["pg"] != "0"
    )


def test_json_evidence_points_at_the_entry_line_and_pickle_evidence_is_described(
    tmp_path: Path,
) -> None:
    _m, doc = _triage(tmp_path / "j", ranks=4, fmt="json", missing_rank=2, fault_seq=12)
    ev = _finding(doc, "fr_not_joined")["evidence"][0]
    path = tmp_path / "j" / "dumps" / ev["file"].rsplit("/", 1)[-1]
    lines = path.read_text().split("\n")
    assert lines[ev["line"] - 1] == ev["text"] and '"collective_seq_id": 12' in ev["text"]
    assert not ev.get("described")

    _m, doc = _triage(
        tmp_path / "c", ranks=4, fmt="json", pretty=False, missing_rank=2, fault_seq=12
    )
    ev = _finding(doc, "fr_not_joined")["evidence"][0]
    raw = (tmp_path / "c" / "dumps" / ev["file"].rsplit("/", 1)[-1]).read_text()
    assert ev["line"] == 1 and ev["text"].startswith("{") and ev["text"] in raw

    _m, doc = _triage(tmp_path / "p", ranks=4, fmt="pickle", missing_rank=2, fault_seq=12)
    ev = _finding(doc, "fr_not_joined")["evidence"][0]
    assert ev["line"] == 1 and ev["described"] is True and "collective_seq_id=12" in ev["text"]


@pytest.mark.parametrize("fmt", ["pickle", "json"])
def test_a_size_mismatch_is_software_on_the_mismatched_rank(tmp_path: Path, fmt: str) -> None:
    _m, doc = _triage(tmp_path, ranks=8, fmt=fmt, size_rank=3, fault_seq=21)
    g = _group(doc)
    assert (g["outcome"], g["seq"], g["culprit_ranks"]) == ("size", 21, [3])
    assert doc["triage"]["category"] == "SOFTWARE"
    assert doc["localization"]["culprit_ranks"] == [3]
    f = _finding(doc, "fr_mismatch")
    assert f["ranks"] == [3] and f["category"] == "SOFTWARE"


def test_the_first_rank_is_blamed_only_when_it_is_the_odd_one(tmp_path: Path) -> None:
    _m, doc = _triage(tmp_path / "a", ranks=8, dtype_rank=0, fault_seq=21)
    assert (_group(doc)["outcome"], doc["localization"]["culprit_ranks"]) == ("dtype", [0])
    _m, doc = _triage(tmp_path / "b", ranks=8, type_rank=6, fault_seq=21)
    assert (_group(doc)["outcome"], doc["localization"]["culprit_ranks"]) == ("type", [6])


def test_an_all_gather_size_mismatch_is_found_on_an_all_gather(tmp_path: Path) -> None:
    # seq 20 is an _allgather_base (output = input x group size on every rank)
    _m, doc = _triage(tmp_path, ranks=8, size_rank=4, fault_seq=20)
    g = _group(doc)
    assert (g["outcome"], g["op"], g["culprit_ranks"]) == ("size", "_allgather_base", [4])


def test_all_matched_dumps_blame_nobody(tmp_path: Path) -> None:
    _m, doc = _triage(tmp_path, ranks=8)
    fr = doc["localization"]["flight_recorder"]
    assert all(g["outcome"] == "matched" for g in fr["groups"]) and not fr["partial"]
    loc = doc["localization"]
    assert loc["culprit_ranks"] == [] and loc["straggler_ranks"] == []
    assert not [
        f for f in doc["findings"] if f["kind"].startswith("fr_") or f["kind"] == "nccl_ahead"
    ]
    assert doc["triage"]["shape"] == "none"


def test_ring_buffer_wrap_is_aligned_before_comparing(tmp_path: Path) -> None:
    # rank 3's buffer wrapped further: its oldest 20 entries are gone
    _m, doc = _triage(tmp_path / "w", ranks=8, buffer=30, wrap={3: 20})
    g = _group(doc)
    assert g["outcome"] == "matched" and g["compared_seqs"][0] > 30
    assert doc["localization"]["culprit_ranks"] == []
    # and a real fault inside the aligned window is still found
    _m, doc = _triage(
        tmp_path / "f", ranks=8, buffer=30, wrap={3: 20}, missing_rank=6, fault_seq=38
    )
    assert (_group(doc)["outcome"], doc["localization"]["culprit_ranks"]) == ("not_joined", [6])


def test_a_missing_dump_makes_the_analysis_partial_without_a_false_culprit(tmp_path: Path) -> None:
    # rank 5 hung and wrote no dump: every other rank waits in seq 21
    _m, doc = _triage(tmp_path, ranks=8, missing_rank=5, no_dump=[5], fault_seq=21)
    fr = doc["localization"]["flight_recorder"]
    assert fr["partial"] and fr["ranks_without_dump"] == [5]
    g = _group(doc)
    assert g["outcome"] == "undecided" and g["culprit_ranks"] == []
    assert doc["localization"]["culprit_ranks"] == []
    f = _finding(doc, "fr_partial")
    assert f["ranks"] == [] and "5" in f["title"]


def test_v2_4_and_v2_10_dumps_give_the_same_answer(tmp_path: Path) -> None:
    out = {}
    for version, fmt in (("2.4", "pickle"), ("2.10", "pickle"), ("2.4", "json"), ("2.10", "json")):
        m, doc = _triage(
            tmp_path / f"{version}-{fmt}",
            ranks=8,
            version=version,
            fmt=fmt,
            missing_rank=1,
            fault_seq=17,
        )
        names = m["files"]
        assert names[0].startswith(
            "comm_lib_trace_rank_" if version == "2.10" else "nccl_trace_rank_"
        )
        assert doc["localization"]["flight_recorder"]["versions"] == [version]
        out[(version, fmt)] = (
            _group(doc)["outcome"],
            _group(doc)["seq"],
            tuple(doc["localization"]["culprit_ranks"]),
        )
    assert set(out.values()) == {("not_joined", 17, (1,))}


def test_the_rank_comes_from_the_file_name_suffix_even_with_a_host_in_it(tmp_path: Path) -> None:
    m, doc = _triage(
        tmp_path, ranks=16, missing_rank=10, fault_seq=9, host_in_name=True, version="2.4"
    )
    assert "nccl_trace_rank_container-node01_10" in m["files"]
    assert doc["localization"]["culprit_ranks"] == [10]


def test_the_parse_keeps_only_what_the_comparison_needs(tmp_path: Path) -> None:
    write_dumps(tmp_path, ranks=2, seqs=3000, buffer=6000, fmt="pickle")
    path = tmp_path / "comm_lib_trace_rank_1"
    r = engine.parse_artifact(io.BytesIO(path.read_bytes()), name=path.name)
    fr = r.flight_recorder
    assert r.error is None and r.ranks == [1]
    assert fr["entry_counts"]["0"] == 3000 and len(fr["entries"]["0"]) == 2000
    assert fr["entries"]["0"][-1]["seq"] == 3000  # the newest are kept
    assert fr["pg_config"]["0"]["ranks"] == [[0, 1]]
    assert len(json.dumps(r.to_json())) < 3_000_000


def test_a_pickle_naming_a_class_is_refused(tmp_path: Path) -> None:
    dump = {"version": "2.10", "pg_status": {}, "entries": [{"record_id": Path("/etc/passwd")}]}
    r = engine.parse_artifact(io.BytesIO(pickle.dumps(dump)), name="comm_lib_trace_rank_3")
    assert r.error and "refused" in r.error and r.flight_recorder is None
