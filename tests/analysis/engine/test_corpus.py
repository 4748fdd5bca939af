"""Every case of the public-failure corpus is a test: the engine, run on the case's files
exactly as the offline CLI runs it, must give each labeled field."""

from __future__ import annotations

import pytest

from rankscope.testing.corpus import Case, load_cases, run_engine, score

CASES = load_cases()


def _param(case: Case) -> object:
    marks = [pytest.mark.xfail(strict=True, reason=case.xfail)] if case.xfail else []
    return pytest.param(case, id=case.id, marks=marks)


def test_corpus_is_present() -> None:
    assert len(CASES) >= 100, "the public-failure corpus is missing or cut"


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_case(case: Case) -> None:
    doc = run_engine(case)
    got = score(case, doc)
    wrong = {k: v for k, v in got.items() if v is False}
    if wrong:
        tri, loc = doc["triage"], doc["localization"]
        lab = case.labels
        detail = {
            "category": (lab.get("category"), tri.get("category")),
            "shape": (lab.get("shape"), tri.get("shape")),
            "culprit_ranks": (lab.get("culprit_ranks"), loc.get("culprit_ranks")),
            "culprit_hosts": (lab.get("culprit_hosts"), loc.get("culprit_hosts")),
            "initiator_ranks": (lab.get("initiator_ranks"), loc.get("initiator_ranks")),
            "evidence": (lab.get("evidence"), (doc.get("root_cause") or {}).get("chain")),
        }
        pytest.fail(
            "wrong fields (label, engine): "
            + "; ".join(f"{k}: {detail[k]}" for k in wrong)
            + f" — summary: {tri.get('summary')}"
        )
