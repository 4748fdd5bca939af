"""Two people editing the same record: a stale copy must not undo the other's change, and a
status change that lost the race is refused with a clear message (409 in the views)."""

import pytest
from django.urls import reverse

from apps.investigation import selectors, services
from apps.investigation.models import ActionItem, Fix, Hypothesis

pytestmark = pytest.mark.django_db


def _stale(model, obj):
    """A second copy of the row, as another request loaded it before the first one wrote."""
    return model.objects.get(pk=obj.pk)


def test_recording_a_test_from_a_stale_copy_keeps_a_concurrent_description_edit(
    incident, owner, teammate
):
    h = services.hypothesis_create(incident=incident, actor=owner, title="Loader stalls")
    mine = _stale(Hypothesis, h)
    theirs = _stale(Hypothesis, h)
    services.hypothesis_update(
        hypothesis=theirs, actor=teammate, description="Only on node-1, after hour 5"
    )
    services.hypothesis_record_test(
        hypothesis=mine,
        actor=owner,
        status="supported",
        test_plan="py-spy dump rank 9",
        test_result="blocked in the loader's queue.get",
    )
    h.refresh_from_db()
    assert h.status == "supported"
    assert h.test_result == "blocked in the loader's queue.get"
    assert h.description == "Only on node-1, after hour 5"


def test_a_hypothesis_tested_by_someone_else_first_is_not_silently_overwritten(
    incident, owner, teammate
):
    h = services.hypothesis_create(incident=incident, actor=owner, title="Loader stalls")
    mine = _stale(Hypothesis, h)
    services.hypothesis_record_test(
        hypothesis=_stale(Hypothesis, h),
        actor=teammate,
        status="refuted",
        test_plan="swap the loader",
        test_result="still hangs",
        evidence=[{"file": "rank9.log", "line": 42, "text": "hang"}],
    )
    with pytest.raises(services.ConflictError, match="refuted first"):
        services.hypothesis_record_test(
            hypothesis=mine,
            actor=owner,
            status="supported",
            test_plan="py-spy",
            test_result="looks like the loader",
        )
    h.refresh_from_db()
    assert h.status == "refuted" and h.test_result == "still hangs"
    assert h.evidence == [{"file": "rank9.log", "line": 42, "text": "hang"}]


def test_retesting_appends_evidence_to_what_is_stored_not_to_a_stale_list(incident, owner):
    h = services.hypothesis_create(incident=incident, actor=owner, title="Loader stalls")
    services.hypothesis_record_test(
        hypothesis=h, actor=owner, status="supported", test_plan="p", test_result="r1"
    )
    mine = _stale(Hypothesis, h)
    # Someone else adds evidence while keeping the status (a re-test with the same verdict).
    services.hypothesis_record_test(
        hypothesis=_stale(Hypothesis, h),
        actor=owner,
        status="supported",
        test_plan="p",
        test_result="r2",
        evidence=[{"file": "a.log", "line": 1, "text": "theirs"}],
    )
    services.hypothesis_record_test(
        hypothesis=mine,
        actor=owner,
        status="supported",
        test_plan="p",
        test_result="r3",
        evidence=[{"file": "b.log", "line": 2, "text": "mine"}],
    )
    h.refresh_from_db()
    assert [e["text"] for e in h.evidence] == ["theirs", "mine"]
    assert h.test_result == "r3"


def test_updating_an_action_item_from_a_stale_copy_keeps_a_concurrent_priority_change(
    incident, owner, teammate
):
    item = services.action_item_create(incident=incident, actor=owner, text="Add a watchdog")
    mine = _stale(ActionItem, item)
    services.action_item_update(item=_stale(ActionItem, item), actor=teammate, priority="p1")
    services.action_item_update(item=mine, actor=owner, owner=teammate)
    item.refresh_from_db()
    assert item.owner == teammate
    assert item.priority == "p1"


def test_an_action_status_changed_by_someone_else_first_is_refused_and_kept(
    incident, owner, teammate
):
    item = services.action_item_create(incident=incident, actor=owner, text="Add a watchdog")
    mine = _stale(ActionItem, item)
    services.action_item_update(item=_stale(ActionItem, item), actor=teammate, status="done")
    with pytest.raises(services.ConflictError, match="status first"):
        services.action_item_update(item=mine, actor=owner, status="dropped", priority="p3")
    item.refresh_from_db()
    assert item.status == "done" and item.priority == "p2"


def test_the_view_answers_a_lost_status_change_with_409_and_a_message(
    owner_client, incident, owner, teammate, monkeypatch
):
    item = services.action_item_create(incident=incident, actor=owner, text="Add a watchdog")
    stale = _stale(ActionItem, item)
    services.action_item_update(item=_stale(ActionItem, item), actor=teammate, status="done")
    # The request loaded the row just before the other person's change committed.
    monkeypatch.setattr(selectors, "action_item_get", lambda *, incident, code: stale)
    resp = owner_client.post(
        reverse("investigation:action_update", args=[incident.code, item.code]),
        {"status": "in_progress"},
        HTTP_HX_REQUEST="true",
    )
    assert resp.status_code == 409
    assert "Someone else changed this action item" in resp.content.decode()
    item.refresh_from_db()
    assert item.status == "done"


def test_the_view_still_answers_404_to_an_outsider(outsider_client, incident, owner):
    item = services.action_item_create(incident=incident, actor=owner, text="Add a watchdog")
    resp = outsider_client.post(
        reverse("investigation:action_update", args=[incident.code, item.code]),
        {"status": "done"},
    )
    assert resp.status_code == 404
    item.refresh_from_db()
    assert item.status == "open"


def test_marking_a_fix_applied_from_a_stale_copy_does_not_undo_its_verification(
    incident, owner, teammate
):
    fix = services.fix_create(incident=incident, actor=owner, kind="immediate", title="Reroute")
    mine = _stale(Fix, fix)
    services.fix_mark_applied(fix=_stale(Fix, fix), actor=teammate)
    services.fix_verify(
        fix=_stale(Fix, fix),
        actor=teammate,
        baseline={"step_time": [11.2, 11.0]},
        post_fix={"step_time": [7.1, 7.0]},
        target="step_time",
    )
    assert Fix.objects.get(pk=fix.pk).status == "verified"
    with pytest.raises(services.ConflictError):
        services.fix_mark_applied(fix=mine, actor=owner)
    assert Fix.objects.get(pk=fix.pk).status == "verified"


def test_marking_an_applied_fix_applied_again_is_refused(incident, owner):
    fix = services.fix_create(
        incident=incident, actor=owner, kind="immediate", title="Reroute", applied=True
    )
    with pytest.raises(services.InvestigationError, match="already marked applied"):
        services.fix_mark_applied(fix=fix, actor=owner)


def test_a_verification_from_a_stale_copy_does_not_overwrite_a_newer_fix_status(
    incident, owner, teammate
):
    fix = services.fix_create(
        incident=incident, actor=owner, kind="immediate", title="Reroute", applied=True
    )
    mine = _stale(Fix, fix)
    services.fix_verify(
        fix=_stale(Fix, fix),
        actor=teammate,
        baseline={"step_time": [11.2, 11.0]},
        post_fix={"step_time": [7.1, 7.0]},
        target="step_time",
    )
    with pytest.raises(services.ConflictError):
        services.fix_verify(
            fix=mine,
            actor=owner,
            baseline={"step_time": [11.2, 11.0]},
            post_fix={"step_time": [11.3, 11.1]},
            target="step_time",
        )
    fix.refresh_from_db()
    assert fix.status == "verified"
    assert [v.verdict for v in fix.verifications.all()] == ["FIXED"]
