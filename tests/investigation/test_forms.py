"""What a person sees when an investigation form is refused: the error at the field, what
they typed still in it, and nothing stored or changed."""

import pytest
from django.urls import reverse

from apps.incidents.models import IncidentEvent
from apps.investigation import services
from apps.investigation.models import ActionItem, ContributingFactor, Hypothesis, WhyChain

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def _url(incident, name, *args):
    return reverse(f"investigation:{name}", args=[incident.code, *args])


def _events(incident) -> int:
    return IncidentEvent.objects.filter(incident=incident).count()


def test_a_too_long_hypothesis_is_answered_at_its_field_and_nothing_is_stored(
    owner_client, incident
):
    title = "Straggler " + "x" * 291  # 301 characters
    events = _events(incident)
    resp = owner_client.post(
        _url(incident, "hypothesis_add"), {"title": title, "test_plan": "compare"}, **HTMX
    )
    assert resp.status_code == 422
    html = resp.content.decode()
    assert 'id="section-hypotheses"' in html and "<html" not in html
    assert "at most 300 characters (it has 301)" in html
    assert title in html and 'value="compare"' in html  # the typed text is kept
    assert not Hypothesis.objects.exists()
    assert _events(incident) == events


def test_a_hypothesis_of_the_longest_allowed_title_is_stored_whole(owner_client, incident):
    title = "y" * 300
    resp = owner_client.post(_url(incident, "hypothesis_add"), {"title": title}, **HTMX)
    assert resp.status_code == 200
    assert Hypothesis.objects.get(incident=incident).title == title


def test_without_htmx_a_refused_hypothesis_comes_back_on_the_incident_page(owner_client, incident):
    resp = owner_client.post(_url(incident, "hypothesis_add"), {"title": "z" * 400})
    assert resp.status_code == 422
    html = resp.content.decode()
    assert "<html" in html and 'id="first-screen"' in html
    assert "at most 300 characters (it has 400)" in html
    assert not Hypothesis.objects.exists()


def test_typed_text_that_comes_back_is_escaped(owner_client, incident):
    resp = owner_client.post(
        _url(incident, "hypothesis_add"),
        {"title": "", "expected_if_true": '<script>alert("x")</script>'},
        **HTMX,
    )
    assert resp.status_code == 422
    html = resp.content.decode()
    assert "<script>alert" not in html and "&lt;script&gt;alert" in html
    assert "A hypothesis needs a title." in html or "This field is required." in html


def test_a_refused_edit_keeps_what_was_stored(owner_client, incident):
    h = services.hypothesis_create(incident=incident, actor=None, title="NIC flaps")
    resp = owner_client.post(
        _url(incident, "hypothesis_edit", h.code),
        {"title": "t" * 301, "description": "new"},
        **HTMX,
    )
    assert resp.status_code == 422
    assert "at most 300 characters" in resp.content.decode()
    h.refresh_from_db()
    assert h.title == "NIC flaps" and h.description == ""


def test_evidence_with_a_line_too_long_or_too_many_lines_is_refused_not_cut(owner_client, incident):
    long_line = "rank3.log:12 " + "e" * 2000
    resp = owner_client.post(
        _url(incident, "hypothesis_add"), {"title": "ok", "evidence": long_line}, **HTMX
    )
    assert resp.status_code == 422
    assert "Evidence line 1 has 2013 characters; at most 2000." in resp.content.decode()
    many = "\n".join(f"rank{i}.log:{i}" for i in range(51))
    resp = owner_client.post(
        _url(incident, "hypothesis_add"), {"title": "ok", "evidence": many}, **HTMX
    )
    assert resp.status_code == 422
    assert "At most 50 evidence lines (this has 51)." in resp.content.decode()
    assert not Hypothesis.objects.exists()


def test_a_too_long_why_chain_title_is_refused(owner_client, incident):
    resp = owner_client.post(_url(incident, "why_chain_add"), {"title": "w" * 301}, **HTMX)
    assert resp.status_code == 422
    assert "at most 300 characters (it has 301)" in resp.content.decode()
    assert not WhyChain.objects.exists()


def test_a_too_long_contributing_factor_is_refused_and_an_edit_keeps_the_old_text(
    owner_client, incident
):
    resp = owner_client.post(_url(incident, "factor_add"), {"text": "f" * 2001}, **HTMX)
    assert resp.status_code == 422
    assert "at most 2000 characters (it has 2001)" in resp.content.decode()
    assert not ContributingFactor.objects.exists()
    factor = services.contributing_factor_add(incident=incident, actor=None, text="no alerting")
    resp = owner_client.post(
        _url(incident, "factor_change", factor.pk), {"text": "g" * 2001}, **HTMX
    )
    assert resp.status_code == 422
    factor.refresh_from_db()
    assert factor.text == "no alerting"


def test_an_action_item_with_a_bad_due_date_or_an_outside_owner_says_which_field(
    owner_client, incident, outsider
):
    resp = owner_client.post(
        _url(incident, "action_add"),
        {"text": "add a watchdog", "due_date": "next week", "owner": outsider.username},
        **HTMX,
    )
    assert resp.status_code == 422
    html = resp.content.decode()
    assert "Due date must be a date (YYYY-MM-DD)." in html
    assert "The owner must be a member of the incident&#x27;s team." in html
    assert 'value="add a watchdog"' in html
    assert not ActionItem.objects.exists()


def test_an_action_item_update_with_a_bad_date_changes_nothing(owner_client, incident):
    item = services.action_item_create(incident=incident, actor=None, text="add a watchdog")
    resp = owner_client.post(
        _url(incident, "action_update", item.code),
        {"status": "done", "due_date": "2026-13-40"},
        **HTMX,
    )
    assert resp.status_code == 422
    item.refresh_from_db()
    assert item.status == "open" and item.due_date is None


def test_verifying_with_a_metrics_file_of_no_part_of_the_incident_is_refused_at_the_field(
    owner_client, incident
):
    fix = services.fix_create(incident=incident, actor=None, kind="immediate", title="f")
    resp = owner_client.post(
        _url(incident, "fix_verify", fix.code),
        {"post_fix": "step_time: 1", "baseline_files": ["a-file-elsewhere"], "tolerance": "x"},
        **HTMX,
    )
    assert resp.status_code == 422
    html = resp.content.decode()
    assert "That metrics file is not part of this incident." in html
    assert "Tolerance is a percentage, e.g. 5." in html
    assert not fix.verifications.exists()


def test_a_proposal_id_longer_than_any_proposal_is_not_found(owner_client, incident):
    events = _events(incident)
    resp = owner_client.post(_url(incident, "proposal_dismiss", "hypotheses", "p" * 121))
    assert resp.status_code == 404
    assert _events(incident) == events


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("why_chain_add", {"title": "w" * 301}, "at most 300 characters (it has 301)"),
        ("factor_add", {"text": "f" * 2001}, "at most 2000 characters (it has 2001)"),
        ("fix_add", {"title": "ok", "kind": "someday"}, "someday is not one of the"),
        ("action_add", {"text": "ok", "due_date": "soon"}, "Due date must be a date"),
        ("actions_seed", {"checklist": "nope"}, "Unknown checklist."),
    ],
)
def test_without_htmx_each_section_shows_its_refused_form_on_the_page(
    owner_client, incident, name, data, message
):
    events = _events(incident)
    resp = owner_client.post(_url(incident, name), data)
    assert resp.status_code == 422
    html = resp.content.decode()
    assert "<html" in html and message in html
    assert html.count('class="error" role="alert"') == 1  # in the one section that was sent
    assert _events(incident) == events
