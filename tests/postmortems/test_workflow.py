# ruff: noqa: RUF003 — × and − are the symbols people read in a formula
import pytest

from apps.incidents.models import IncidentEvent
from apps.incidents.services import incident_update
from apps.investigation.models import Hypothesis
from apps.postmortems import services
from apps.postmortems.models import Approval, PostMortem, Status
from apps.postmortems.selectors import postmortem_latest_for_incident

from .conftest import complete_narrative

pytestmark = pytest.mark.django_db


def test_one_click_draft_holds_every_part_of_the_investigation(rich_incident, owner):
    pm = services.postmortem_draft_create(incident=rich_incident, actor=owner)
    snap = pm.snapshot
    assert pm.status == Status.DRAFT and pm.owner == owner
    assert pm.summary == "AllReduce is slow on nodes behind switch-04"
    assert pm.root_cause == "Degrading optical transceiver on switch-04 port 17"
    assert pm.category == "NETWORK"
    assert {h["title"] for h in snap["hypotheses"]} == {
        "Network contention from another job",
        "Degraded link on a spine switch",
    }
    assert [s["answer"] for s in snap["five_whys"][0]["steps"]][
        -1
    ] == "Degrading optical transceiver"
    assert snap["contributing_factors"] == ["No alert on bus bandwidth"]
    assert snap["fixes"][0]["verifications"][0]["verdict"] == "FIXED"
    assert snap["action_items"][0]["owner"] == "bob"
    assert snap["localization"]["culprit_hosts"] == ["node-09"]
    markers = {e["marker"] for e in snap["timeline"]}
    assert {"detection", "key_moment"} <= markers
    # The lessons-learned table comes from the recorded phase transitions.
    assert [(p["phase"], p["seconds"]) for p in snap["phases"]][:4] == [
        ("triage", 300.0),
        ("localization", 900.0),
        ("isolation", 1200.0),
        ("root_cause", 600.0),
    ]
    assert pm.phase_key_actions["localization"] == "Per-rank timing revealed asymmetric AllReduce"
    assert snap["durations"]["time_to_detect_s"] == 300
    assert snap["durations"]["time_to_mitigate_s"] == 75 * 60


def test_the_draft_prefills_cost_inputs_from_the_incident_and_the_triage_document(
    rich_incident, owner
):
    pm = services.postmortem_draft_create(incident=rich_incident, actor=owner)
    inputs = pm.cost_inputs
    assert inputs["gpu_count"] == 256
    assert inputs["gpu_hour_usd"] == 4.0
    assert inputs["remaining_run_hours"] == 288
    assert inputs["degraded_hours"] == pytest.approx(80 / 60, abs=1e-3)
    assert inputs["baseline_throughput"] == 142_000 and inputs["degraded_throughput"] == 89_000
    assert inputs["steps_since_checkpoint"] == 201 and inputs["step_time_seconds"] == 7.0
    # 256 × 4/3 × (1 − 89/142) + 201 × 7 / 3600 × 256
    expected = 256 * (80 / 60) * (1 - 89 / 142) + 201 * 7 / 3600 * 256
    assert pm.gpu_hours_lost == pytest.approx(expected, abs=1e-2)
    assert float(pm.cost_usd) == pytest.approx(expected * 4, abs=0.01)


def test_the_draft_is_a_snapshot_that_later_incident_edits_do_not_rewrite(rich_incident, owner):
    pm = services.postmortem_draft_create(incident=rich_incident, actor=owner)
    incident_update(incident=rich_incident, actor=owner, title="Renamed later", gpu_count=8)
    Hypothesis.objects.filter(incident=rich_incident).update(title="Changed later")
    pm.refresh_from_db()
    assert pm.snapshot["incident"]["title"] == "Throughput collapse on 256 H100s"
    assert pm.snapshot["incident"]["gpu_count"] == 256
    assert "Changed later" not in str(pm.snapshot)
    markdown = services.postmortem_render_markdown(postmortem=pm)
    assert "Changed later" not in markdown and "Renamed later" not in markdown


def test_drafting_twice_returns_the_open_draft(rich_incident, owner, teammate):
    first = services.postmortem_draft_create(incident=rich_incident, actor=owner)
    second = services.postmortem_draft_create(incident=rich_incident, actor=teammate)
    assert first.pk == second.pk
    assert PostMortem.objects.filter(incident=rich_incident).count() == 1
    assert postmortem_latest_for_incident(incident=rich_incident) == first


def test_review_goes_draft_review_approved_published_with_every_step_on_the_timeline(
    rich_incident, owner, teammate
):
    pm = services.postmortem_draft_create(incident=rich_incident, actor=teammate)
    pm = services.postmortem_transition(postmortem=pm, to_status=Status.IN_REVIEW, actor=teammate)
    services.postmortem_comment_add(
        postmortem=pm, actor=teammate, section="cost", body="Downtime looks short"
    )
    pm = complete_narrative(pm, teammate)
    pm = services.postmortem_transition(
        postmortem=pm, to_status=Status.APPROVED, actor=owner, note="LGTM"
    )
    pm = services.postmortem_transition(postmortem=pm, to_status=Status.PUBLISHED, actor=owner)
    assert pm.status == Status.PUBLISHED and pm.published_at is not None
    assert Approval.objects.get(postmortem=pm).approver == owner
    kinds = list(
        IncidentEvent.objects.filter(incident=rich_incident, kind__startswith="postmortem.")
        .order_by("pk")
        .values_list("kind", flat=True)
    )
    assert kinds == [
        "postmortem.drafted",
        "postmortem.status",
        "postmortem.comment",
        "postmortem.edited",  # the reviewer wrote the sections publishing requires
        "postmortem.status",
        "postmortem.status",
    ]
    assert pm.revisions.filter(note="Published").exists()


def test_a_teammate_who_is_not_a_lead_cannot_approve_or_publish(rich_incident, owner, teammate):
    pm = services.postmortem_draft_create(incident=rich_incident, actor=teammate)
    pm = services.postmortem_transition(postmortem=pm, to_status=Status.IN_REVIEW, actor=teammate)
    with pytest.raises(services.ReviewError, match="team lead"):
        services.postmortem_transition(postmortem=pm, to_status=Status.APPROVED, actor=teammate)
    pm.refresh_from_db()
    assert pm.status == Status.IN_REVIEW
    assert not Approval.objects.exists()
    pm = services.postmortem_transition(postmortem=pm, to_status=Status.APPROVED, actor=owner)
    with pytest.raises(services.ReviewError, match="team lead"):
        services.postmortem_transition(postmortem=pm, to_status=Status.PUBLISHED, actor=teammate)


def test_transitions_skip_no_step_and_are_compare_and_set(rich_incident, owner):
    pm = services.postmortem_draft_create(incident=rich_incident, actor=owner)
    with pytest.raises(services.ReviewError, match="cannot go from Draft to Published"):
        services.postmortem_transition(postmortem=pm, to_status=Status.PUBLISHED, actor=owner)
    stale = PostMortem.objects.get(pk=pm.pk)
    services.postmortem_transition(postmortem=pm, to_status=Status.IN_REVIEW, actor=owner)
    # A second reviewer acting on the page they loaded before the change loses cleanly.
    stale.status = Status.DRAFT
    with pytest.raises(services.ReviewError):
        services.postmortem_transition(postmortem=stale, to_status=Status.IN_REVIEW, actor=owner)


def test_edits_keep_revisions_and_an_approved_text_goes_back_to_review(rich_incident, owner):
    pm = services.postmortem_draft_create(incident=rich_incident, actor=owner)
    pm = services.postmortem_transition(postmortem=pm, to_status=Status.IN_REVIEW, actor=owner)
    pm = services.postmortem_transition(postmortem=pm, to_status=Status.APPROVED, actor=owner)
    old_summary = pm.summary
    pm = services.postmortem_update(
        postmortem=pm, actor=owner, expected_revision=1, summary="A sharper summary"
    )
    assert pm.revision == 2 and pm.status == Status.IN_REVIEW
    assert pm.revisions.get(number=1).content["summary"] == old_summary
    with pytest.raises(services.ReviewError, match="Someone else saved"):
        services.postmortem_update(
            postmortem=pm, actor=owner, expected_revision=1, summary="Lost update"
        )


def test_a_published_postmortem_keeps_its_revisions_when_edited(rich_incident, owner):
    pm = complete_narrative(
        services.postmortem_draft_create(incident=rich_incident, actor=owner), owner
    )
    for status in [Status.IN_REVIEW, Status.APPROVED, Status.PUBLISHED]:
        pm = services.postmortem_transition(postmortem=pm, to_status=status, actor=owner)
    published_text = pm.lessons
    pm = services.postmortem_update(postmortem=pm, actor=owner, lessons="Added a week later")
    assert pm.status == Status.PUBLISHED
    published = pm.revisions.get(note="Published")
    assert published.content["lessons"] == published_text
    assert published.status == Status.PUBLISHED
    assert pm.lessons == "Added a week later"


def test_comments_need_text_and_a_known_section(rich_incident, owner):
    pm = services.postmortem_draft_create(incident=rich_incident, actor=owner)
    with pytest.raises(services.ReviewError):
        services.postmortem_comment_add(postmortem=pm, actor=owner, section="cost", body="  ")
    with pytest.raises(services.ReviewError):
        services.postmortem_comment_add(postmortem=pm, actor=owner, section="nope", body="x")
