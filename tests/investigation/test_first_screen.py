"""The first screen's 'where' evidence must point at the failure, never at noise."""

from apps.investigation.selectors import findings_by_phase, first_screen

NOISE_LINE = "[rank76]: Retrying (Retry(total=4)) after connection broken by 'ProtocolError'"
STALL_LINE = "[rank76]: DataLoader worker 3 has not produced a batch for 300 s"


def _doc() -> dict:
    return {
        "triage": {"shape": "hang", "category": "DATA", "severity": "CRITICAL"},
        "localization": {"culprit_ranks": [76], "culprit_hosts": ["node-09"]},
        "findings": [
            {
                "phase": "triage",
                "kind": "retry_noise",
                "title": "retries recovered: noise",
                "confidence": 0.9,
                "ranks": [3, 76],
                "evidence": [{"file": "node-09.out", "line": 10, "text": NOISE_LINE}],
            },
            {
                "phase": "localization",
                "kind": "straggler",
                "title": "rank 76 never entered the collective",
                "confidence": 0.8,
                "ranks": [76],
                "evidence": [{"file": "node-09.out", "line": 546, "text": STALL_LINE}],
            },
        ],
    }


def test_where_evidence_skips_retry_noise_even_when_it_is_more_confident():
    screen = first_screen(doc=_doc())
    texts = [ref["text"] for ref in screen.where_evidence]
    assert texts == [STALL_LINE]


def test_noise_findings_are_listed_after_the_findings_that_matter():
    doc = _doc()
    doc["findings"][1]["phase"] = "triage"
    kinds = [f["kind"] for f in findings_by_phase(doc=doc)["triage"]]
    assert kinds == ["straggler", "retry_noise"]


def test_a_line_cited_by_several_findings_is_shown_once():
    doc = _doc()
    doc["findings"].append(dict(doc["findings"][1], kind="nccl_role", title="rank 76 waiting"))
    refs = first_screen(doc=doc).where_evidence
    assert [(r["file"], r["line"]) for r in refs] == [("node-09.out", 546)]


def test_the_scope_is_said_with_its_name_and_left_out_when_unknown():
    doc = _doc()
    doc["triage"]["scope"] = "single_node"
    assert first_screen(doc=doc).scope == "scope: single node"
    doc["triage"]["scope"] = "unknown"
    assert first_screen(doc=doc).scope == ""
