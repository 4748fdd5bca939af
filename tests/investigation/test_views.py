import pytest
from django.urls import reverse

from apps.incidents.models import IncidentEvent
from apps.investigation import services
from apps.investigation.models import ActionItem, Fix, Hypothesis, WhyChain

pytestmark = pytest.mark.django_db

DOC = {
    "schema": "rankscope.triage/v1",
    "job": {
        "world_size": 16,
        "hosts": {"node-0": list(range(8)), "node-1": list(range(8, 16))},
        "ranks_missing": [],
        "ranks_seen": list(range(16)),
    },
    "triage": {
        "shape": "hang",
        "category": "DATA",
        "severity": "CRITICAL",
        "scope": "one_rank",
        "when": "after_hours",
        "confidence": 0.9,
        "summary": "Rank 9's data loader stalled; the other ranks timed out waiting.",
    },
    "localization": {
        "culprit_ranks": [9],
        "culprit_hosts": ["node-1"],
        "initiator_ranks": [0],
        "notified_ranks": [],
        "straggler_ranks": [9],
        "nccl": [],
    },
    "root_cause": {
        "category": "DATA",
        "summary": "loader stalled",
        "chain": [
            {
                "rank": 9,
                "event": "stall",
                "evidence": [
                    {"file": "rank9.log", "line": 42, "text": "<script>alert(1)</script>"}
                ],
            }
        ],
    },
    "findings": [
        {
            "phase": "localization",
            "kind": "straggler",
            "title": "Rank 9 stopped first",
            "detail": "",
            "confidence": 0.9,
            "ranks": [9],
            "hosts": ["node-1"],
            "evidence": [{"file": "rank9.log", "line": 42, "text": "<script>alert(1)</script>"}],
        }
    ],
    "timeline": [],
    "recommendations": [
        {"kind": "immediate", "text": "Drain node-1 and resume from the last checkpoint"}
    ],
    "proposals": {
        "hypotheses": [
            {
                "id": "hp1",
                "title": "Data loader stall on rank 9",
                "description": "d",
                "expected_if_true": "rank 9 idle",
                "test": "py-spy rank 9",
                "category": "DATA",
                "confidence": 0.8,
                "supporting": [],
                "refuting": [],
            }
        ],
        "five_whys": [
            {
                "id": "wp1",
                "title": "Job hung",
                "levels": [
                    {
                        "why": "Why did the job hang?",
                        "answer": "Rank 9 never joined the allreduce",
                        "evidence": [],
                    },
                    {"why": "Why?", "answer": "Its data loader stalled", "evidence": []},
                ],
                "contributing_factors": ["No loader timeout"],
            }
        ],
        "fixes": [
            {
                "id": "fp1",
                "kind": "immediate",
                "title": "Skip the bad shard",
                "detail": "",
                "category": "DATA",
            }
        ],
        "prevention": [
            {
                "id": "pp1",
                "checklist": "pre_training",
                "text": "Verify data loading doesn't bottleneck",
            }
        ],
    },
}


@pytest.fixture
def with_doc(monkeypatch):
    from apps.investigation import selectors

    monkeypatch.setattr(selectors, "analysis_document", lambda *, incident: DOC)
    return DOC


def _url(incident, name, *args):
    return reverse(f"investigation:{name}", args=[incident.code, *args])


def test_incident_page_shows_the_first_screen_and_five_phases_with_questions(
    owner_client, incident, with_doc
):
    resp = owner_client.get(reverse("incidents:detail", args=[incident.code]))
    html = resp.content.decode()
    assert resp.status_code == 200
    assert "What broke" in html and "Rank 9&#x27;s data loader stalled" in html
    assert "Drain node-1 and resume" in html
    for label in ("1. Triage", "2. Localization", "3. Isolation", "4. Root cause", "5. Resolution"):
        assert label in html
    assert "Is training still running?" in html
    assert "Move on to Localization" in html
    # log text is escaped, never markup
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_incident_page_without_analysis_explains_what_to_do(owner_client, incident):
    html = owner_client.get(reverse("incidents:detail", args=[incident.code])).content.decode()
    assert "No analysis yet" in html
    assert "No hypotheses yet" in html


def test_a_record_code_from_another_incident_is_404(owner_client, incident, team, owner):
    from apps.incidents.services import incident_create

    other = incident_create(team=team, title="other", actor=owner)
    h = services.hypothesis_create(incident=other, actor=owner, title="elsewhere")
    resp = owner_client.post(
        _url(incident, "hypothesis_test", h.code),
        {"status": "supported", "test_result": "r", "test_plan": "p"},
    )
    assert resp.status_code == 404


def test_teammate_adds_a_hypothesis_and_marks_it_supported_via_htmx(teammate_client, incident):
    resp = teammate_client.post(
        _url(incident, "hypothesis_add"),
        {
            "title": "Straggler on node-1",
            "expected_if_true": "one rank slower",
            "evidence": "rank9.log:42 stalled",
        },
        HTTP_HX_REQUEST="true",
    )
    assert resp.status_code == 200
    assert 'id="section-hypotheses"' in resp.content.decode()
    h = Hypothesis.objects.get(incident=incident)
    assert h.evidence == [{"file": "rank9.log", "line": 42, "text": "stalled"}]
    resp = teammate_client.post(
        _url(incident, "hypothesis_test", h.code),
        {
            "status": "supported",
            "test_plan": "compare step times",
            "test_result": "rank 9 is 2x slower",
        },
    )
    assert resp.status_code == 302 and resp["Location"].endswith("#section-hypotheses")
    h.refresh_from_db()
    assert h.status == "supported" and h.test_result == "rank 9 is 2x slower"
    kinds = list(IncidentEvent.objects.filter(incident=incident).values_list("kind", flat=True))
    assert "investigation.hypothesis_added" in kinds and "investigation.hypothesis_tested" in kinds


def test_marking_a_hypothesis_without_a_result_is_refused_with_a_message(owner_client, incident):
    h = services.hypothesis_create(incident=incident, actor=None, title="x")
    resp = owner_client.post(
        _url(incident, "hypothesis_test", h.code),
        {"status": "refuted", "test_plan": "", "test_result": ""},
        HTTP_HX_REQUEST="true",
    )
    assert resp.status_code == 422
    assert "Say which test was run" in resp.content.decode()
    h.refresh_from_db()
    assert h.status == "pending"


def test_proposals_can_be_accepted_once_or_dismissed(owner_client, incident, with_doc):
    owner_client.post(_url(incident, "proposal_accept", "hypotheses", "hp1"))
    h = Hypothesis.objects.get(incident=incident)
    assert h.source == "proposed" and h.proposal_id == "hp1" and h.test_plan == "py-spy rank 9"
    resp = owner_client.post(
        _url(incident, "proposal_accept", "hypotheses", "hp1"), HTTP_HX_REQUEST="true"
    )
    assert resp.status_code == 422
    assert Hypothesis.objects.filter(incident=incident).count() == 1

    owner_client.post(_url(incident, "proposal_accept", "five_whys", "wp1"))
    chain = WhyChain.objects.get(incident=incident)
    assert [s.answer for s in chain.steps.all()] == [
        "Rank 9 never joined the allreduce",
        "Its data loader stalled",
    ]
    assert chain.is_chosen and chain.root_cause.answer == "Its data loader stalled"
    assert incident.contributing_factors.get().text == "No loader timeout"

    owner_client.post(_url(incident, "proposal_dismiss", "fixes", "fp1"))
    html = owner_client.get(reverse("incidents:detail", args=[incident.code])).content.decode()
    assert "Skip the bad shard" not in html
    assert "Data loader stall on rank 9" in html  # now a record, not a proposal
    assert "Start from this chain" not in html


def test_five_whys_levels_are_ordered_and_another_chain_can_be_chosen(owner_client, incident):
    owner_client.post(
        _url(incident, "why_chain_add"),
        {"title": "Throughput dropped", "why": "Why low?", "answer": "AllReduce slow"},
    )
    first = WhyChain.objects.get(incident=incident)
    owner_client.post(
        _url(incident, "why_step_add", first.code),
        {"why": "Why slow?", "answer": "CRC errors", "evidence": "switch.log:7"},
    )
    assert [s.order for s in first.steps.all()] == [1, 2]
    owner_client.post(_url(incident, "why_chain_add"), {"title": "Alt chain"})
    second = WhyChain.objects.get(title="Alt chain")
    assert not second.is_chosen
    owner_client.post(_url(incident, "why_chain_choose", second.code))
    first.refresh_from_db()
    second.refresh_from_db()
    assert second.is_chosen and not first.is_chosen


def test_fix_verification_from_entered_numbers_records_the_verdict(owner_client, incident):
    owner_client.post(
        _url(incident, "fix_add"), {"title": "Reroute port 17", "kind": "immediate", "applied": "1"}
    )
    fix = Fix.objects.get(incident=incident)
    assert fix.status == "applied" and fix.applied_at
    resp = owner_client.post(
        _url(incident, "fix_verify", fix.code),
        {
            "baseline": "step_time: 11.2, 11.0\nmem_peak: 70, 70",
            "post_fix": "step_time: 7.1, 7.0\nmem_peak: 77, 77",
            "target": "step_time",
            "tolerance": "5",
        },
        HTTP_HX_REQUEST="true",
    )
    html = resp.content.decode()
    assert resp.status_code == 200
    v = fix.verifications.get()
    assert v.verdict == "REGRESSION" and v.tolerance == 0.05
    assert v.details["regressions"] == ["mem_peak +10.0 % (70 → 77)"]
    assert "Regression" in html and "mem_peak +10.0 %" in html


def test_fix_verification_with_unreadable_numbers_keeps_the_fix_and_says_why(
    owner_client, incident
):
    fix = services.fix_create(incident=incident, actor=None, kind="immediate", title="f")
    resp = owner_client.post(
        _url(incident, "fix_verify", fix.code),
        {"baseline": "step_time: fast", "post_fix": "step_time: 1"},
        HTTP_HX_REQUEST="true",
    )
    assert resp.status_code == 422
    assert "is not a number" in resp.content.decode()
    assert not fix.verifications.exists()


def test_prevention_items_are_seeded_from_a_checklist_once_and_get_an_owner(
    owner_client, incident, teammate
):
    owner_client.post(_url(incident, "actions_seed"), {"checklist": "long_runs"})
    owner_client.post(_url(incident, "actions_seed"), {"checklist": "long_runs"})
    items = ActionItem.objects.filter(incident=incident)
    assert items.count() == 5 and {i.checklist for i in items} == {"long_runs"}
    item = items.first()
    owner_client.post(
        _url(incident, "action_update", item.code),
        {"owner": teammate.username, "due_date": "2030-01-31", "status": "in_progress"},
    )
    item.refresh_from_db()
    assert (
        item.owner == teammate
        and str(item.due_date) == "2030-01-31"
        and item.status == "in_progress"
    )


def test_an_owner_outside_the_team_is_refused(owner_client, incident, outsider):
    resp = owner_client.post(
        _url(incident, "action_add"),
        {"text": "x", "owner": outsider.username},
        HTTP_HX_REQUEST="true",
    )
    assert resp.status_code == 422
    assert not ActionItem.objects.filter(incident=incident).exists()


def test_charts_section_says_why_it_is_empty_and_draws_the_rank_map_with_a_document(
    owner_client, incident, monkeypatch
):
    resp = owner_client.get(_url(incident, "charts"), HTTP_HX_REQUEST="true")
    assert "No charts yet" in resp.content.decode()
    from apps.investigation import selectors

    monkeypatch.setattr(selectors, "analysis_document", lambda *, incident: DOC)
    html = owner_client.get(_url(incident, "charts")).content.decode()
    assert 'data-plotly="rank-map-data"' in html and 'id="rank-map-data"' in html


def test_an_unknown_action_priority_or_kind_is_refused_and_nothing_changes(owner_client, incident):
    resp = owner_client.post(
        _url(incident, "action_add"),
        {"text": "add a watchdog", "priority": "p9", "kind": "bogus"},
        HTTP_HX_REQUEST="true",
    )
    assert resp.status_code == 422
    assert not ActionItem.objects.filter(incident=incident).exists()
    item = services.action_item_create(incident=incident, actor=None, text="add a watchdog")
    resp = owner_client.post(
        _url(incident, "action_update", item.code),
        {"priority": "urgent"},
        HTTP_HX_REQUEST="true",
    )
    assert resp.status_code == 422
    item.refresh_from_db()
    assert item.priority == "p2"


def test_a_why_level_and_a_factor_can_be_edited_confirmed_and_removed(owner_client, incident):
    from apps.investigation.models import ContributingFactor, WhyChain, WhyStep

    chain = WhyChain.objects.create(incident=incident, title="Job crashed")
    WhyStep.objects.create(chain=chain, order=1, why="Why did it crash?", answer="OOM on rank 5")
    draft = WhyStep.objects.create(
        chain=chain,
        order=2,
        why="Why did that happen: rank 5 ran out of memory?",
        answer="The memory budget was not checked (draft: confirm or edit)",
    )
    WhyStep.objects.create(chain=chain, order=3, why="Why?", answer="No review")
    factor = ContributingFactor.objects.create(incident=incident, text="Noisy retries")
    url = f"/incidents/{incident.code}/investigation/whys/{chain.code}/steps/{draft.pk}/"
    page = owner_client.get(f"/incidents/{incident.code}/").content.decode()
    assert "draft: confirm or edit</span>" in page and f'action="{url}"' in page

    # Saving the level confirms it: the draft mark is gone.
    r = owner_client.post(
        url, {"why": draft.why, "answer": "Budget not checked"}, HTTP_HX_REQUEST="true"
    )
    assert r.status_code == 200
    draft.refresh_from_db()
    assert draft.answer == "Budget not checked"
    # Removing the first level moves the others up.
    first = chain.steps.get(order=1)
    owner_client.post(
        f"/incidents/{incident.code}/investigation/whys/{chain.code}/steps/{first.pk}/",
        {"action": "remove"},
    )
    assert list(chain.steps.values_list("order", "answer")) == [
        (1, "Budget not checked"),
        (2, "No review"),
    ]
    owner_client.post(
        f"/incidents/{incident.code}/investigation/factors/{factor.pk}/", {"action": "remove"}
    )
    assert not ContributingFactor.objects.filter(pk=factor.pk).exists()


def test_an_evidence_reference_that_names_no_uploaded_file_is_flagged(owner_client, incident):
    from apps.ingest.models import Artifact

    Artifact.objects.create(
        incident=incident,
        original_name="job.tar.gz",
        display_name="job.tar.gz/logs/rank_5.log",
        size=1,
        parse_status="parsed",
    )
    owner_client.post(
        f"/incidents/{incident.code}/investigation/hypotheses/",
        {"title": "OOM on rank 5", "evidence": "rank_5.log:73 the OOM\nrank_9.log:1 typo"},
    )
    page = owner_client.get(f"/incidents/{incident.code}/").content.decode()
    hyp = page.split('id="section-hypotheses"', 1)[1]
    # the file's own name resolves to the archive member; the unknown one is flagged
    assert "?line=73#L73" in hyp
    assert hyp.count("not among the uploaded files") == 1
