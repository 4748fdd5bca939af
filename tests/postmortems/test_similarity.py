from apps.postmortems.similarity import (
    Signature,
    signature_from_document,
    signature_similarity,
)


def _doc(
    category="HARDWARE",
    shape="crash",
    kinds=("xid", "nccl_watchdog_timeout"),
    hosts=("node-09",),
    op="ALLREDUCE",
    xid_line="NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.",
):
    return {
        "triage": {"shape": shape, "category": category},
        "root_cause": {"category": category},
        "localization": {
            "culprit_hosts": list(hosts),
            "nccl": [
                {"rank": 3, "op": op, "role": "straggler"},
                {"rank": 4, "op": op, "role": "waiting"},
            ],
        },
        "findings": [
            {
                "kind": kind,
                "title": kind,
                "hosts": list(hosts),
                "evidence": [{"file": "dmesg.txt", "line": 10, "text": xid_line}],
            }
            for kind in kinds
        ],
    }


def test_the_signature_holds_category_shape_errors_collective_xids_and_hosts():
    sig = signature_from_document(_doc())
    assert sig.category == "HARDWARE"
    assert sig.shape == "crash"
    assert sig.error_kinds == {"xid", "nccl_watchdog_timeout"}
    assert sig.collective_ops == {"ALLREDUCE"}
    assert sig.xid_codes == {"79"}
    assert sig.hosts == {"node-09"}


def test_no_document_gives_an_empty_signature():
    assert signature_from_document(None).is_empty()
    assert signature_from_document({"triage": {"category": "UNKNOWN", "shape": "none"}}).is_empty()


def test_identical_failures_score_one_with_every_reason():
    a = signature_from_document(_doc())
    match = signature_similarity(a, a)
    assert match.score == 1.0
    text = " ".join(match.reasons)
    for word in ["HARDWARE", "crash", "xid", "ALLREDUCE", "Xid: 79", "node-09"]:
        assert word in text


def test_a_shared_host_ranks_above_a_category_only_match():
    base = signature_from_document(_doc())
    same_host = signature_from_document(_doc(category="NETWORK", kinds=("nccl_watchdog_timeout",)))
    same_category = signature_from_document(
        _doc(kinds=("cuda_oom",), hosts=("node-77",), op="BROADCAST", xid_line="nothing")
    )
    assert (
        signature_similarity(base, same_host).score
        > signature_similarity(base, same_category).score
    )
    assert "same host: node-09" in signature_similarity(base, same_host).reasons


def test_unrelated_failures_score_zero():
    a = Signature(category="OOM", shape="crash", error_kinds=frozenset({"cuda_oom"}))
    b = Signature(category="DATA", shape="hang", error_kinds=frozenset({"dataloader_stall"}))
    assert signature_similarity(a, b).score == 0.0
    assert signature_similarity(a, b).reasons == []
