"""The demo incident carries per-rank step metrics, so its charts page has step charts."""

from __future__ import annotations

import time

import pytest
from django.core.management import call_command

from apps.incidents.models import Incident
from apps.ingest.models import Artifact
from apps.ingest.services import artifact_parse
from apps.investigation import charts, selectors
from rankscope.testing.generate import generate

pytestmark = pytest.mark.django_db


def _demo() -> Incident:
    return Incident.objects.get(title__startswith="Demo:")


def test_the_demo_has_a_metrics_file_whose_charts_show_the_stalled_rank(tmp_path):
    stalled = generate("data_stall", tmp_path, ranks=128)["expected"]["culprit_ranks"]
    started = time.monotonic()
    call_command("seed_demo")
    assert time.monotonic() - started < 20
    incident = _demo()
    metrics = Artifact.objects.get(incident=incident, original_name="train_metrics.csv")
    assert metrics.kind == "metrics"
    artifact_parse(artifact_id=metrics.id)
    table = selectors.incident_metrics_table(incident=incident)
    assert table is not None and len(table) == 128 * 60
    ids = [f["id"] for f in charts.incident_figures(None, table)]
    assert ids[:2] == ["step-time", "compute-comm"] and len(ids) >= 4
    # The hottest cell of the step-time heatmap is the stalled rank's last steps.
    heat = charts.step_time_heatmap(table)["data"][0]
    row = max(range(len(heat["z"])), key=lambda i: max(v or 0 for v in heat["z"][i]))
    assert [heat["y"][row]] == stalled


def test_a_demo_seeded_before_metrics_existed_gets_only_the_metrics_file():
    call_command("seed_demo")
    incident = _demo()
    Artifact.objects.filter(incident=incident, original_name="train_metrics.csv").delete()
    logs = Artifact.objects.filter(incident=incident).count()
    call_command("seed_demo")
    assert Artifact.objects.filter(incident=incident).count() == logs + 1
    call_command("seed_demo")
    assert Artifact.objects.filter(incident=incident).count() == logs + 1
