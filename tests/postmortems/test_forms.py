"""A refused post-mortem form comes back on the page with the error at its field and what
was typed kept; nothing stored changes."""

import pytest
from django.urls import reverse

from apps.postmortems import services
from apps.postmortems.models import EDITABLE_FIELDS, PostMortem, ReviewComment, Status

pytestmark = pytest.mark.django_db


@pytest.fixture
def pm(rich_incident, owner) -> PostMortem:
    return services.postmortem_draft_create(incident=rich_incident, actor=owner)


def _narrative(pm: PostMortem) -> dict:
    return {name: getattr(pm, name) for name, _ in EDITABLE_FIELDS}


def test_a_too_long_title_is_shown_at_its_field_and_the_text_is_kept(owner_client, pm):
    before = _narrative(pm)
    data = {**before, "expected_revision": pm.revision, "title": "T" * 201}
    data["lessons"] = "Alert on NIC flaps"
    response = owner_client.post(reverse("postmortems:edit", args=[pm.code]), data)
    assert response.status_code == 422
    html = response.content.decode()
    assert "at most 200 characters (it has 201)" in html
    assert "Alert on NIC flaps" in html  # the rest of what was typed is still in the form
    pm.refresh_from_db()
    assert _narrative(pm) == before and pm.revision == 1


def test_an_edit_over_someone_elses_save_keeps_the_typed_text(owner_client, pm, owner):
    data = {**_narrative(pm), "expected_revision": pm.revision, "lessons": "mine"}
    services.postmortem_update(
        postmortem=pm, actor=owner, expected_revision=pm.revision, lessons="theirs"
    )
    response = owner_client.post(reverse("postmortems:edit", args=[pm.code]), data)
    assert response.status_code == 409
    html = response.content.decode()
    assert "Someone else saved this post-mortem first" in html and "mine</textarea>" in html
    pm.refresh_from_db()
    assert pm.lessons == "theirs"


def test_a_too_long_review_note_is_refused_and_the_status_stays(owner_client, pm):
    response = owner_client.post(
        reverse("postmortems:status", args=[pm.code]),
        {"status": "in_review", "note": "n" * 2001},
    )
    assert response.status_code == 422
    assert "at most 2000 characters (it has 2001)" in response.content.decode()
    pm.refresh_from_db()
    assert pm.status == Status.DRAFT


def test_a_too_long_comment_is_refused_at_its_field(teammate_client, pm):
    response = teammate_client.post(
        reverse("postmortems:comment", args=[pm.code]),
        {"section": "general", "body": "c" * 20_001},
    )
    assert response.status_code == 422
    assert "at most 20000 characters (it has 20001)" in response.content.decode()
    assert not ReviewComment.objects.exists()


def test_cost_inputs_refused_without_htmx_come_back_on_the_page(owner_client, pm):
    response = owner_client.post(reverse("postmortems:cost", args=[pm.code]), {"gpu_count": "-3"})
    assert response.status_code == 422
    assert "greater than or equal to 0" in response.content.decode()
