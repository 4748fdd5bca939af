"""An incident with everything a post-mortem draws on: analysis, phases, investigation records."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from apps.incidents.models import Incident, Phase, PhaseTransition
from apps.incidents.services import incident_create

T0 = dt.datetime(2026, 3, 9, 2, 47, tzinfo=dt.UTC)


def triage_doc(
    *,
    category: str = "NETWORK",
    shape: str = "slow",
    hosts: tuple[str, ...] = ("node-09",),
    kinds: tuple[str, ...] = ("allreduce_slow", "link_crc_errors"),
    op: str = "ALLREDUCE",
    summary: str = "AllReduce is slow on nodes behind switch-04",
    root: str = "Degrading optical transceiver on switch-04 port 17",
) -> dict[str, Any]:
    return {
        "schema": "rankscope.triage/v1",
        "engine_version": "test",
        "job": {
            "framework": "megatron",
            "world_size": 256,
            "last_step": 48_201,
            "last_checkpoint_step": 48_000,
        },
        "metrics": {
            "baseline_throughput": 142_000,
            "degraded_throughput": 89_000,
            "step_time": 7.0,
        },
        "triage": {
            "shape": shape,
            "category": category,
            "severity": "WARNING",
            "scope": "some_ranks",
            "when": "after_hours",
            "confidence": 0.8,
            "summary": summary,
        },
        "localization": {
            "culprit_ranks": [72],
            "culprit_hosts": list(hosts),
            "initiator_ranks": [],
            "notified_ranks": [],
            "straggler_ranks": [72, 200],
            "nccl": [
                {
                    "rank": 72,
                    "pg": "0",
                    "seq": 1234,
                    "op": op,
                    "last_completed": 1233,
                    "role": "straggler",
                }
            ],
        },
        "root_cause": {
            "category": category,
            "summary": root,
            "chain": [
                {
                    "time": "2026-03-09T02:40:00Z",
                    "rank": 72,
                    "event": "CRC errors on switch-04 port 17",
                    "evidence": [
                        {
                            "file": "switch-04.log",
                            "line": 17,
                            "text": "port 17: CRC errors 14,302 | rising",
                        }
                    ],
                }
            ],
        },
        "findings": [
            {
                "phase": "localization",
                "kind": kind,
                "title": f"{kind} on {', '.join(hosts)}",
                "detail": "",
                "confidence": 0.8,
                "ranks": [72],
                "hosts": list(hosts),
                "evidence": [
                    {
                        "file": "rank-72.log",
                        "line": 8812,
                        "text": "allreduce took 7100 ms <script>alert(1)</script>",
                    }
                ],
            }
            for kind in kinds
        ],
        "timeline": [
            {
                "time": "2026-03-09T02:47:00Z",
                "rank": 72,
                "file": "rank-72.log",
                "line": 8812,
                "event": "step time 11.2 s",
            }
        ],
        "recommendations": [{"kind": "prevention", "text": "Alert on busbw drop > 20%"}],
    }


def add_analysis(incident: Incident, doc: dict[str, Any]):
    from apps.analysis.models import AnalysisRun

    now = timezone.now()
    return AnalysisRun.objects.create(
        incident=incident,
        status="succeeded",
        fingerprint=f"fp-{AnalysisRun.objects.count()}-{now.timestamp()}",
        engine_version="test",
        document=doc,
        started_at=now,
        finished_at=now,
    )


def make_incident(
    team, owner, *, title: str, doc: dict[str, Any] | None = None, job_id: str = ""
) -> Incident:
    incident = incident_create(team=team, title=title, actor=owner, cluster="eos", job_id=job_id)
    if doc is not None:
        add_analysis(incident, doc)
    return incident


@pytest.fixture
def rich_incident(team, owner, teammate) -> Incident:
    from apps.investigation.models import (
        ActionItem,
        ContributingFactor,
        Fix,
        FixVerification,
        Hypothesis,
        WhyChain,
        WhyStep,
    )

    incident = incident_create(
        team=team,
        title="Throughput collapse on 256 H100s",
        actor=owner,
        cluster="eos",
        job_id="771234",
        framework="megatron",
        gpu_count=256,
        gpu_type="H100",
        gpu_hour_usd=Decimal("4.00"),
        remaining_run_hours=288,
        problem_started_at=T0,
        detected_at=T0 + dt.timedelta(minutes=5),
    )
    Incident.objects.filter(pk=incident.pk).update(
        mitigated_at=T0 + dt.timedelta(minutes=80),
        resolved_at=T0 + dt.timedelta(minutes=110),
        status="resolved",
        phase=Phase.RESOLUTION,
    )
    # Phases as the playbook's lessons table: 5, 15, 20, 10, 30 minutes.
    incident.transitions.update(at=T0 + dt.timedelta(minutes=5))
    at = T0 + dt.timedelta(minutes=5)
    steps = [
        (Phase.TRIAGE, Phase.LOCALIZATION, 5, "Classified as perf degradation, not crash"),
        (Phase.LOCALIZATION, Phase.ISOLATION, 15, "Per-rank timing revealed asymmetric AllReduce"),
        (Phase.ISOLATION, Phase.ROOT_CAUSE, 20, "nccl-tests on affected vs unaffected nodes"),
        (Phase.ROOT_CAUSE, Phase.RESOLUTION, 10, "Switch diagnostics: optical transceiver"),
    ]
    for from_phase, to_phase, minutes, note in steps:
        at += dt.timedelta(minutes=minutes)
        PhaseTransition.objects.create(
            incident=incident,
            from_phase=from_phase,
            to_phase=to_phase,
            at=at,
            actor=owner,
            note=note,
        )
    incident.refresh_from_db()
    add_analysis(incident, triage_doc())
    Hypothesis.objects.create(
        incident=incident,
        title="Network contention from another job",
        expected_if_true="All nodes slow equally",
        test_plan="Compare AllReduce time across nodes",
        test_result="Only nodes behind switch-04 | slow",
        status="refuted",
    )
    Hypothesis.objects.create(
        incident=incident,
        title="Degraded link on a spine switch",
        expected_if_true="Slow path always through one switch",
        test_plan="Point-to-point bandwidth between node pairs",
        test_result="Slow path always via switch-04",
        status="supported",
    )
    chain = WhyChain.objects.create(
        incident=incident, title="Why throughput dropped", is_chosen=True
    )
    for order, (why, answer) in enumerate(
        [
            ("Why is throughput low?", "AllReduce is slow on some nodes"),
            ("Why is AllReduce slow?", "Inter-node bandwidth is degraded"),
            ("Why are there CRC errors?", "Degrading optical transceiver"),
        ],
        1,
    ):
        WhyStep.objects.create(
            chain=chain,
            order=order,
            why=why,
            answer=answer,
            evidence=[{"file": "switch-04.log", "line": 17, "text": "CRC errors 14,302"}],
        )
    ContributingFactor.objects.create(incident=incident, text="No alert on bus bandwidth")
    fix = Fix.objects.create(
        incident=incident,
        kind="immediate",
        title="Disable switch-04 port 17 and reroute",
        detail="Fat-tree provides a redundant path",
        status="verified",
        applied_at=T0 + dt.timedelta(minutes=80),
    )
    FixVerification.objects.create(
        fix=fix,
        baseline={"throughput": [142000, 141500]},
        post_fix={"throughput": [139000, 139400]},
        tolerance=0.05,
        verdict="FIXED",
    )
    ActionItem.objects.create(
        incident=incident,
        text="Add NCCL bus bandwidth to per-step monitoring",
        kind="prevention",
        owner=teammate,
        priority="p1",
        due_date=dt.date(2026, 4, 1),
        status="open",
    )
    return incident


def complete_narrative(pm, actor):
    """Write every section publishing requires (what a reviewer does before publishing)."""
    from apps.postmortems import services

    fields = {
        name: f"{label}: written by the reviewer."
        for name, label in services.REQUIRED_SECTIONS
        if not str(getattr(pm, name) or "").strip()
    }
    return services.postmortem_update(postmortem=pm, actor=actor, **fields) if fields else pm
