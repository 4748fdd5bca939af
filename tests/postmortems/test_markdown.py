# ruff: noqa: RUF001, RUF003 — × and − are the symbols people read in a formula
import re

import pytest

from apps.incidents.models import Incident
from apps.postmortems import services
from apps.postmortems.cost import CostInputs, cost_compute
from apps.postmortems.formatting import fmt_duration, fmt_hours, fmt_input, fmt_usd
from apps.postmortems.models import PostMortem

from .conftest import make_incident, triage_doc

pytestmark = pytest.mark.django_db

SECTIONS = [
    "## Summary",
    "## Impact",
    "## Cost",
    "## Trigger and leadup",
    "## Detection",
    "## Response and recovery",
    "## Timeline",
    "## Technical analysis",
    "### Triage",
    "### Localization",
    "### Findings",
    "## Hypotheses and tests",
    "## Root cause",
    "### Five Whys",
    "## Contributing factors",
    "## Fix and verification",
    "## Action items",
    "## What went well",
    "## What went wrong",
    "## Where we got lucky",
    "## Lessons learned",
    "## Similar incidents",
    "## Review record",
]


def _front_matter(text: str) -> dict[str, str]:
    assert text.startswith("---\n")
    block = text.split("---\n", 2)[1]
    return dict(line.split(": ", 1) for line in block.strip().splitlines())


def test_the_markdown_has_front_matter_every_section_and_every_number(rich_incident, owner):
    pm = services.postmortem_draft_create(incident=rich_incident, actor=owner)
    inputs = CostInputs.from_json({**pm.cost_inputs, "downtime_hours": 0.5})
    pm = services.postmortem_cost_update(postmortem=pm, actor=owner, inputs=inputs)
    text = services.postmortem_render_markdown(postmortem=pm)
    result = cost_compute(inputs)

    front = _front_matter(text)
    assert front["status"] == '"draft"'
    assert front["severity"] == '"untriaged"'
    assert front["failure_class"] == '"NETWORK"'
    assert front["cluster"] == '"eos"'
    assert front["job_ids"] == '["771234"]'
    assert front["owner"] == '"alice"'
    assert float(front["gpu_hours_lost"]) == pytest.approx(result.gpu_hours_lost, abs=0.01)
    assert float(front["cost_usd"]) == pytest.approx(result.cost_usd, abs=0.01)

    for heading in SECTIONS:
        assert re.search(rf"^{re.escape(heading)}\b", text, re.MULTILINE), heading

    # Every cost input and result, as the page shows them.
    for name, value in inputs.to_json().items():
        if value is not None:
            assert fmt_input(value) in text, name
    for figure in [
        fmt_hours(result.gpu_hours_lost),
        fmt_usd(result.cost_usd),
        fmt_hours(result.undetected_gpu_hours),
        fmt_usd(result.undetected_cost_usd),
        fmt_hours(result.recompute_gpu_hours),
        fmt_hours(result.downtime_gpu_hours),
        fmt_hours(result.degraded_gpu_hours),
    ]:
        assert figure in text, figure
    assert "GPU-hours lost = GPUs × (degraded hours × waste fraction + downtime hours)" in text
    # Lessons learned: phase × time spent × key action, and the response durations.
    phases = [
        ("Triage", 5),
        ("Localization", 15),
        ("Isolation", 20),
        ("Root cause", 10),
        ("Resolution", 55),  # until the incident was resolved (T0+110 min), not until today
    ]
    for label, minutes in phases:
        assert re.search(rf"\| {label} \| {minutes} min \|", text), label
    assert "Per-rank timing revealed asymmetric AllReduce" in text
    assert f"| Time to detect | {fmt_duration(300)} |" in text
    assert f"| Time to mitigate | {fmt_duration(75 * 60)} |" in text
    assert f"| Time to resolve | {fmt_duration(105 * 60)} |" in text
    # The investigation's records.
    for fragment in [
        "Degraded link on a spine switch",
        "Degrading optical transceiver",
        "No alert on bus bandwidth",
        "Disable switch-04 port 17 and reroute",
        "**FIXED**",
        "Add NCCL bus bandwidth to per-step monitoring",
        "2026-04-01",
        "node-09",
        "rank-72.log:8812",
    ]:
        assert fragment in text, fragment


def test_pipes_newlines_and_html_in_user_and_log_text_do_not_break_tables(rich_incident, owner):
    pm = services.postmortem_draft_create(incident=rich_incident, actor=owner)
    pm = services.postmortem_update(
        postmortem=pm,
        actor=owner,
        phase_key_actions={"triage": "split | across\nlines <b>bold</b>"},
    )
    text = services.postmortem_render_markdown(postmortem=pm)
    row = next(line for line in text.splitlines() if line.startswith("| Triage |"))
    assert row.count(" | ") == 2  # three cells, the pipe in the text escaped
    assert "split \\| across lines &lt;b&gt;bold&lt;/b&gt;" in row
    # Hypothesis test result holds a pipe; the log line holds a pipe and a script tag.
    hyp = next(line for line in text.splitlines() if "Only nodes behind switch-04" in line)
    assert "switch-04 \\| slow" in hyp
    # Log text is quoted in code spans, where markdown shows HTML as text; never bare.
    assert "`allreduce took 7100 ms <script>alert(1)</script>`" in text
    assert text.count("<script>") == text.count("`allreduce took 7100 ms <script>")
    for line in text.splitlines():
        if line.startswith("|"):
            assert line.endswith("|"), line


def test_similar_incidents_appear_in_the_markdown_with_their_reasons(team, owner):
    earlier = make_incident(
        team, owner, title="Earlier slow AllReduce", doc=triage_doc(), job_id="1"
    )
    services.incident_signature_refresh(incident=earlier)
    now = make_incident(team, owner, title="Today slow AllReduce", doc=triage_doc(), job_id="2")
    pm = services.postmortem_draft_create(incident=now, actor=owner)
    text = services.postmortem_render_markdown(postmortem=pm)
    section = text.split("## Similar incidents", 1)[1].split("## Review record", 1)[0]
    assert f"Earlier slow AllReduce ({earlier.code})" in section
    assert "same host: node-09" in section
    assert "Host node-09 also appears in 1 other incident" in section


def test_a_bare_incident_still_renders_every_section(team, owner):
    incident = make_incident(team, owner, title="Nothing known yet")
    pm = services.postmortem_draft_create(incident=incident, actor=owner)
    text = services.postmortem_render_markdown(postmortem=pm)
    for heading in SECTIONS:
        if heading != "### Findings":
            assert heading in text
    assert "No analysis had run when this was drafted" in text
    assert PostMortem.objects.get(pk=pm.pk).cost_usd is not None  # $/GPU-hour known, zero hours
    assert Incident.objects.filter(pk=incident.pk).exists()


def test_evidence_links_to_the_viewer_at_its_line_and_times_are_to_the_second(rich_incident, owner):
    from apps.ingest.models import Artifact
    from apps.investigation.models import WhyChain, WhyStep

    # The file came out of an archive; the analysis and people cite it by its own name.
    artifact = Artifact.objects.create(
        incident=rich_incident,
        original_name="logs.tar.gz",
        display_name="logs.tar.gz/switch-04.log",
        size=10,
        parse_status="parsed",
    )
    chain = WhyChain.objects.create(incident=rich_incident, title="Slow AllReduce")
    WhyStep.objects.create(chain=chain, order=1, why="Why was it slow?", answer="CRC errors")
    pm = services.postmortem_draft_create(incident=rich_incident, actor=owner)
    text = services.postmortem_render_markdown(postmortem=pm, base_url="https://rs.example/")

    url = (
        f"https://rs.example/incidents/{rich_incident.code}/artifacts/{artifact.code}/?line=17#L17"
    )
    assert f"[switch-04.log:17](<{url}>)" in text
    # a reference to a file that was never uploaded stays plain text, not a dead link
    assert "rank-72.log:8812 `allreduce" in text and "(<https://rs.example/None" not in text
    # times to the second, never microsecond ISO strings
    assert "2026-03-09 02:40:00" in text
    assert not re.search(r"\d{2}:\d{2}:\d{2}\.\d{3,}", text)
    assert not re.search(r"\|\s*\d{4}-\d{2}-\d{2}T\d{2}:", text)
    # a Why written as a question does not get a second "Why?"
    assert "1. Why was it slow? → CRC errors" in text
    assert "Why? Why" not in text


def test_the_verification_table_has_the_columns_of_the_page(rich_incident, owner):
    pm = services.postmortem_draft_create(incident=rich_incident, actor=owner)
    text = services.postmortem_render_markdown(postmortem=pm)
    section = text.split("## Fix and verification", 1)[1].split("## Action items", 1)[0]
    assert "Verification at" in section
    assert "| Metric | Baseline | After fix | Change | Outcome |" in section
    # throughput 141750 → 139200 on average: -1.8 %
    assert "| throughput | 142000, 141500 | 139000, 139400 | -1.8 % |" in section


def test_a_crash_prefills_gpus_and_impact_start_from_the_logs(team, owner):
    doc = triage_doc(shape="crash", category="OOM")
    doc["job"]["world_size"] = 8
    doc["metrics"] = {}  # no throughput: the waste fraction comes from the shape
    incident = make_incident(team, owner, title="8-GPU crash", doc=doc)
    pm = services.postmortem_draft_create(incident=incident, actor=owner)
    assert pm.cost_inputs["gpu_count"] == 8  # one GPU per rank, from the logs
    started = pm.snapshot["durations"]["milestones"][0]
    assert started["key"] == "started" and started["source"] == "from the logs"
    assert started["at"].startswith("2026-03-09T02:40:00")  # the chain's trigger
    text = services.postmortem_render_markdown(postmortem=pm)
    assert "| Impact started (from the logs) | 2026-03-09 02:40:00 UTC |" in text
    # "Detected" is not the moment the incident was opened, months after the logs
    assert "| Detected (from the logs) | 2026-03-09 02:40:00 UTC |" in text
    assert "| GPUs | 8 | from the logs |" in text
    assert "— from the logs" in text  # the crash's waste fraction was not typed by anyone
    assert (
        "Cost if undetected for the rest" not in text
    )  # a crashed job does not keep burning GPUs unseen


def test_a_run_of_uploads_in_the_timeline_names_its_first_and_last_file(team, owner):
    from apps.incidents.services import incident_event_add

    incident = make_incident(team, owner, title="Two files")
    for name in ("dmesg.txt", "gpu_burn.log"):
        incident_event_add(
            incident=incident, kind="ingest.upload", message=f"Uploaded {name}: 1 stored"
        )
    pm = services.postmortem_draft_create(incident=incident, actor=owner)
    text = services.postmortem_render_markdown(postmortem=pm)
    assert "Uploaded dmesg.txt: 1 stored … Uploaded gpu_burn.log: 1 stored (×2)" in text


def test_the_log_timeline_shows_each_line_as_code_and_it_cannot_break_the_table(team, owner):
    doc = triage_doc()
    line = "[rank3]: NCCL WARN NET/IB : Got completion | <script>alert(1)</script> with error 12"
    doc["timeline"] = [
        {
            "time": None,
            "rank": 3,
            "file": "node-09.out",
            "line": 7,
            "event": "nccl_error",
            "text": line,
        }
    ]
    incident = make_incident(team, owner, title="Log timeline", doc=doc)
    pm = services.postmortem_draft_create(incident=incident, actor=owner)
    text = services.postmortem_render_markdown(postmortem=pm)
    block = text.split("### From the logs", 1)[1].split("\n## ", 1)[0]
    row = next(r for r in block.splitlines() if "nccl_error" in r)
    assert "nccl_error: `[rank3]: NCCL WARN NET/IB : Got completion \\| <script>" in row
    # the row keeps its four columns: the only unescaped pipes are the cell borders
    assert len(re.findall(r"(?<!\\)\|", row)) == 5
