import datetime as dt

import pytest
from django.utils import timezone

from apps.incidents.models import IncidentEvent, PhaseTransition, Status
from apps.incidents.selectors import incident_phase_durations
from apps.incidents.services import (
    TransitionError,
    incident_change_phase,
    incident_change_status,
)

pytestmark = pytest.mark.django_db


def test_status_goes_open_mitigated_resolved_closed_with_timestamps(incident, owner):
    for status in ["mitigated", "resolved", "closed"]:
        incident = incident_change_status(incident=incident, to_status=status, actor=owner)
    assert incident.status == Status.CLOSED
    assert incident.mitigated_at <= incident.resolved_at <= incident.closed_at
    kinds = list(incident.events.values_list("kind", flat=True))
    assert kinds.count("incident.status") == 3


def test_a_closed_incident_can_only_be_reopened(incident, owner):
    incident = incident_change_status(incident=incident, to_status="closed", actor=owner)
    with pytest.raises(TransitionError):
        incident_change_status(incident=incident, to_status="mitigated", actor=owner)
    incident = incident_change_status(incident=incident, to_status="open", actor=owner)
    assert incident.status == Status.OPEN


def test_a_stale_phase_change_loses_to_the_one_that_won(incident, owner):
    from apps.incidents.models import Incident

    stale = Incident.objects.get(pk=incident.pk)
    incident_change_phase(incident=incident, to_phase="localization", actor=owner)
    with pytest.raises(TransitionError, match="Someone else"):
        incident_change_phase(incident=stale, to_phase="isolation", actor=owner)


def test_time_per_phase_sums_every_visit(incident, owner):
    t0 = timezone.now() - dt.timedelta(hours=3)
    PhaseTransition.objects.filter(incident=incident).update(at=t0)
    incident_change_phase(incident=incident, to_phase="localization", actor=owner)
    incident_change_phase(incident=incident, to_phase="triage", actor=owner)
    incident_change_phase(incident=incident, to_phase="localization", actor=owner)
    # Put the transitions at known times: triage 1 h, localization 30 min, triage 15 min.
    moments = [
        t0,
        t0 + dt.timedelta(hours=1),
        t0 + dt.timedelta(minutes=90),
        t0 + dt.timedelta(minutes=105),
    ]
    for transition, at in zip(incident.transitions.order_by("pk"), moments, strict=True):
        PhaseTransition.objects.filter(pk=transition.pk).update(at=at)
    now = t0 + dt.timedelta(hours=2)
    spans = {s.phase: s for s in incident_phase_durations(incident=incident, now=now)}
    assert spans["triage"].seconds == pytest.approx(75 * 60)
    assert spans["localization"].seconds == pytest.approx(30 * 60 + 15 * 60)
    assert spans["isolation"].seconds == 0
    assert spans["localization"].current


def test_the_timeline_is_append_only(incident):
    event = IncidentEvent.objects.filter(incident=incident).first()
    event.message = "rewritten history"
    with pytest.raises(ValueError, match="append-only"):
        event.save()


def test_editing_fields_on_a_stale_copy_keeps_a_status_change_made_meanwhile(incident, owner):
    from apps.incidents.models import Incident
    from apps.incidents.services import incident_update

    stale = Incident.objects.get(pk=incident.pk)
    incident_change_status(incident=incident, to_status="mitigated", actor=owner)
    incident_change_phase(incident=incident, to_phase="localization", actor=owner)
    incident_update(incident=stale, actor=owner, title="renamed")
    fresh = Incident.objects.get(pk=incident.pk)
    assert fresh.title == "renamed"
    assert fresh.status == Status.MITIGATED
    assert fresh.phase == "localization"
    assert fresh.mitigated_at is not None
