from datetime import datetime, timedelta

import rankscope as engine
from rankscope.model import Event, ParseResult


def _result(events: list[tuple[str, datetime]]) -> ParseResult:
    r = ParseResult(name="train.log", kind="rank_log", ranks=[0])
    r.events = [
        Event(kind=k, line=i + 1, text=f"{k} at {t}", rank=0, time=t.isoformat(), file="train.log")
        for i, (k, t) in enumerate(events)
    ]
    r.lines = len(events)
    return r


T = datetime(2025, 1, 1)


def test_failures_after_checkpoints_get_a_high_risk_ratio():
    ev = []
    for h in range(12):
        t = T + timedelta(hours=h)
        ev.append(("checkpoint_saved", t))
        ev.append(("eval_start", t + timedelta(minutes=30)))
        if h % 3 == 0:
            ev.append(("cuda_oom", t + timedelta(minutes=2)))
    doc = engine.analyze([_result(ev)])
    corr = doc["isolation"]["correlation"]["precursors"]
    assert corr["checkpoint"]["risk_ratio"] > 2 > corr["eval"]["risk_ratio"]
    f = next(f for f in doc["findings"] if f["kind"] == "precursor_correlation")
    assert f["precursor"] == "checkpoint" and f["evidence"][0]["text"].startswith(
        "checkpoint_saved"
    )


def test_periodic_failures_are_reported_with_their_period():
    ev = [("nccl_error", T + timedelta(minutes=45 * i)) for i in range(6)]
    doc = engine.analyze([_result(ev)])
    f = next(f for f in doc["findings"] if f["kind"] == "periodic_failures")
    assert f["period_seconds"] == 45 * 60


def test_irregular_failures_are_not_periodic():
    ev = [("nccl_error", T + timedelta(minutes=m)) for m in (0, 7, 90, 95, 300)]
    doc = engine.analyze([_result(ev)])
    assert not [f for f in doc["findings"] if f["kind"] == "periodic_failures"]
