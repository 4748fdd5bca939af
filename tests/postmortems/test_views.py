import pytest
from django.urls import reverse

from apps.incidents.models import IncidentEvent
from apps.postmortems import services
from apps.postmortems.models import PostMortem, ReviewComment, Status

from .conftest import complete_narrative, make_incident, triage_doc

pytestmark = pytest.mark.django_db


@pytest.fixture
def pm(rich_incident, owner) -> PostMortem:
    return services.postmortem_draft_create(incident=rich_incident, actor=owner)


@pytest.mark.parametrize(
    ("name", "method"),
    [
        ("postmortems:detail", "get"),
        ("postmortems:markdown", "get"),
        ("postmortems:edit", "post"),
        ("postmortems:cost", "post"),
        ("postmortems:status", "post"),
        ("postmortems:comment", "post"),
    ],
)
def test_outsiders_get_404_on_every_postmortem_url(outsider_client, pm, name, method):
    response = getattr(outsider_client, method)(
        reverse(name, args=[pm.code]),
        {"status": "in_review", "section": "general", "body": "x", "gpu_count": "1"},
    )
    assert response.status_code == 404
    pm.refresh_from_db()
    assert pm.status == Status.DRAFT and pm.cost_inputs["gpu_count"] == 256
    assert not ReviewComment.objects.exists()


@pytest.mark.parametrize("name", ["incident_postmortem:panel", "incident_postmortem:draft"])
def test_outsiders_get_404_on_the_incident_panel_and_drafting(outsider_client, rich_incident, name):
    method = "get" if name.endswith("panel") else "post"
    response = getattr(outsider_client, method)(reverse(name, args=[rich_incident.code]))
    assert response.status_code == 404
    assert not PostMortem.objects.exists()


def test_outsiders_do_not_see_other_teams_postmortems_in_the_list(
    outsider_client, owner_client, pm
):
    assert pm.title in owner_client.get(reverse("postmortems:list")).content.decode()
    assert pm.title not in outsider_client.get(reverse("postmortems:list")).content.decode()
    assert outsider_client.get(reverse("postmortems:list"), {"q": "switch"}).status_code == 200


def test_one_click_on_the_incident_panel_drafts_and_opens_the_postmortem(
    teammate_client, rich_incident
):
    panel = teammate_client.get(
        reverse("incident_postmortem:panel", args=[rich_incident.code]), HTTP_HX_REQUEST="true"
    )
    assert panel.status_code == 200
    body = panel.content.decode()
    assert "Draft the post-mortem" in body and "<html" not in body
    response = teammate_client.post(reverse("incident_postmortem:draft", args=[rich_incident.code]))
    pm = PostMortem.objects.get(incident=rich_incident)
    assert response.status_code == 302 and response["Location"] == pm.get_absolute_url()
    page = teammate_client.get(pm.get_absolute_url()).content.decode()
    for heading in [
        "Summary",
        "Impact",
        "Cost",
        "Timeline",
        "Technical analysis",
        "Hypotheses and tests",
        "Root cause and Five Whys",
        "Contributing factors",
        "Fix and verification",
        "Action items",
        "What went well",
        "Lessons learned",
        "Similar incidents",
    ]:
        assert f">{heading}</h2>" in page or f">{heading} " in page, heading
    # Log text is escaped on the page.
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert(1)" not in page


def test_the_panel_without_htmx_is_a_full_page_fallback(owner_client, rich_incident):
    response = owner_client.get(reverse("incident_postmortem:panel", args=[rich_incident.code]))
    assert response.status_code == 200
    assert "<html" in response.content.decode()


def test_the_panel_include_loads_itself_and_keeps_a_real_link(rich_incident):
    from django.template.loader import render_to_string

    html = render_to_string("postmortems/_incident_panel.html", {"incident": rich_incident})
    url = reverse("incident_postmortem:panel", args=[rich_incident.code])
    assert f'hx-get="{url}"' in html and 'hx-trigger="load"' in html
    assert f'href="{url}"' in html


def test_cost_inputs_recompute_the_results_over_htmx(owner_client, pm):
    data = {
        "gpu_count": "256",
        "gpu_hour_usd": "4",
        "degraded_hours": "1.3333333333",
        "downtime_hours": "0.5",
        "baseline_throughput": "142000",
        "degraded_throughput": "89000",
        "remaining_run_hours": "288",
    }
    response = owner_client.post(
        reverse("postmortems:cost", args=[pm.code]), data, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert 'id="cost"' in body and "<html" not in body
    assert "255.40" in body and "$1,021.60" in body and "$110,072.79" in body
    pm.refresh_from_db()
    assert float(pm.cost_usd) == pytest.approx(1021.60, abs=0.01)
    assert IncidentEvent.objects.filter(kind="postmortem.cost").exists()


def test_bad_cost_input_is_refused_and_nothing_stored_changes(owner_client, pm):
    before = dict(pm.cost_inputs)
    response = owner_client.post(
        reverse("postmortems:cost", args=[pm.code]),
        {"gpu_count": "-3", "waste_fraction": "2"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 422
    assert "greater than or equal to 0" in response.content.decode()
    pm.refresh_from_db()
    assert pm.cost_inputs == before


def test_a_teammate_cannot_approve_through_the_page_but_a_lead_can(
    owner_client, teammate_client, pm
):
    url = reverse("postmortems:status", args=[pm.code])
    teammate_client.post(url, {"status": "in_review"})
    pm.refresh_from_db()
    assert pm.status == Status.IN_REVIEW
    page = teammate_client.get(pm.get_absolute_url()).content.decode()
    assert "Approve (team lead)" in page
    response = teammate_client.post(url, {"status": "approved"}, follow=True)
    assert "Only a team lead" in response.content.decode()
    pm.refresh_from_db()
    assert pm.status == Status.IN_REVIEW
    owner_client.post(url, {"status": "approved"})
    # Publishing with empty sections is refused, with the list of what is missing.
    page = owner_client.post(url, {"status": "published"}, follow=True).content.decode()
    pm.refresh_from_db()
    assert pm.status == Status.APPROVED
    assert "Not published yet" in page and "Detection is empty" in page
    complete_narrative(pm, pm.owner)  # an edit sends it back to review
    owner_client.post(url, {"status": "approved"})
    owner_client.post(url, {"status": "published"})
    pm.refresh_from_db()
    assert pm.status == Status.PUBLISHED


def test_comments_on_sections_show_under_the_section(teammate_client, pm):
    teammate_client.post(
        reverse("postmortems:comment", args=[pm.code]),
        {"section": "cost", "body": "Is 30 min of downtime right? <b>sure</b>"},
    )
    page = teammate_client.get(pm.get_absolute_url()).content.decode()
    cost_section = page.split('id="cost"', 1)[1].split("</section>", 1)[0]
    assert "Is 30 min of downtime right? &lt;b&gt;sure&lt;/b&gt;" in cost_section


def test_editing_the_narrative_on_the_page_keeps_a_revision(owner_client, pm):
    data = {
        "expected_revision": pm.revision,
        **{
            name: getattr(pm, name)
            for name in [
                "title",
                "summary",
                "impact",
                "root_cause",
                "trigger",
                "detection",
                "response",
                "went_well",
                "went_wrong",
                "got_lucky",
                "lessons",
            ]
        },
        "went_well": "Per-rank timing found it in 15 minutes",
        "key_action_triage": "Classified quickly",
    }
    owner_client.post(reverse("postmortems:edit", args=[pm.code]), data)
    pm.refresh_from_db()
    assert pm.went_well == "Per-rank timing found it in 15 minutes"
    assert pm.phase_key_actions["triage"] == "Classified quickly"
    assert pm.revision == 2 and pm.revisions.get(number=1).content["went_well"] == ""


def test_markdown_downloads_as_an_attachment(owner_client, pm):
    response = owner_client.get(reverse("postmortems:markdown", args=[pm.code]))
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/markdown")
    assert f'filename="postmortem-{pm.code}.md"' in response["Content-Disposition"]
    assert response.content.decode() == services.postmortem_render_markdown(
        postmortem=pm, base_url="http://testserver/"
    )


def test_full_text_search_finds_words_in_the_snapshot_and_ranks_by_title(owner_client, team, owner):
    oom = make_incident(
        team,
        owner,
        title="OOM at step 90k",
        job_id="a",
        doc=triage_doc(
            category="OOM",
            shape="crash",
            kinds=("cuda_oom",),
            summary="CUDA out of memory on rank 5",
            root="Activation memory grew past 80 GB",
        ),
    )
    net = make_incident(team, owner, title="Slow allreduce", job_id="b", doc=triage_doc())
    services.postmortem_draft_create(incident=oom, actor=owner)
    services.postmortem_draft_create(incident=net, actor=owner)
    url = reverse("postmortems:list")
    # Stemming: "transceivers" finds "transceiver" (root cause in the snapshot).
    body = owner_client.get(url, {"q": "transceivers"}).content.decode()
    assert "Slow allreduce" in body and "OOM at step 90k" not in body
    body = owner_client.get(url, {"q": "memory"}).content.decode()
    assert "OOM at step 90k" in body and "Slow allreduce" not in body
    body = owner_client.get(url, {"q": "memory -nothing"}).content.decode()
    assert "OOM at step 90k" in body


def test_the_list_filters_by_status_category_cluster_date_and_cost(owner_client, team, owner):
    cheap = make_incident(
        team, owner, title="Cheap one", job_id="c", doc=triage_doc(category="OOM")
    )
    dear = make_incident(team, owner, title="Dear one", job_id="d", doc=triage_doc())
    p1 = services.postmortem_draft_create(incident=cheap, actor=owner)
    p2 = services.postmortem_draft_create(incident=dear, actor=owner)
    from apps.postmortems.cost import CostInputs

    services.postmortem_cost_update(
        postmortem=p1, actor=owner, inputs=CostInputs(gpu_count=8, gpu_hour_usd=2, downtime_hours=1)
    )
    services.postmortem_cost_update(
        postmortem=p2,
        actor=owner,
        inputs=CostInputs(gpu_count=512, gpu_hour_usd=4, downtime_hours=10),
    )
    services.postmortem_transition(postmortem=p2, to_status="in_review", actor=owner)
    url = reverse("postmortems:list")

    def titles(**params):
        body = owner_client.get(url, params).content.decode()
        return {t for t in ["Cheap one", "Dear one"] if t in body}

    assert titles(cost_min="1000") == {"Dear one"}
    assert titles(cost_max="100") == {"Cheap one"}
    assert titles(status="in_review") == {"Dear one"}
    assert titles(category="OOM") == {"Cheap one"}
    assert titles(cluster="eos") == {"Cheap one", "Dear one"}
    today = cheap.created_at.date().isoformat()
    assert titles(date_from=today, date_to=today) == {"Cheap one", "Dear one"}
    assert titles(date_to="2000-01-01") == set()
    partial = owner_client.get(
        url, {"status": "draft"}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="postmortem-results"
    )
    assert "<html" not in partial.content.decode() and "Cheap one" in partial.content.decode()


def test_the_list_costs_the_same_queries_for_many_postmortems_as_for_few(
    owner_client, team, owner, teammate
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert owner_client.get(reverse("postmortems:list")).status_code == 200
        return len(ctx.captured_queries)

    def draft(i: int) -> None:
        incident = make_incident(team, owner, title=f"pm {i}", job_id=f"j{i}")
        pm = services.postmortem_draft_create(incident=incident, actor=owner)
        PostMortem.objects.filter(pk=pm.pk).update(owner=teammate if i % 2 else owner)

    for i in range(2):
        draft(i)
    few = queries()
    for i in range(2, 25):
        draft(i)
    assert queries() == few
