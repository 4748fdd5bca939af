"""The 3 AM path in a real browser: sign in, upload logs, watch the analysis finish, follow a
finding to its log line, and record the investigation (hypothesis, Five Whys, fix)."""

from __future__ import annotations

import io
import re
import tarfile
import time

import pytest

from apps.incidents.services import incident_create
from apps.investigation.models import FixVerification, Hypothesis, WhyChain
from tests.conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.worker]

XSS = "<script>window.__pwned = 1</script>"


def _log_archive(ranks: int = 8) -> bytes:
    """A small job: rank 3 runs out of memory, the others time out in the collective."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for r in range(ranks):
            lines = [
                f"[rank{r}]:[2026-01-10 02:47:{r:02d}] INFO training step 4200 loss 2.134",
                f"[rank{r}]:[2026-01-10 02:47:{r:02d}] INFO note {XSS}",
            ]
            if r == 3:
                lines.append(
                    f"[rank{r}]:[2026-01-10 02:48:00] torch.OutOfMemoryError: CUDA out of memory. "
                    "Tried to allocate 2.00 GiB (GPU 3; 79.15 GiB total capacity)"
                )
            else:
                lines.append(
                    f"[rank{r}]:[2026-01-10 03:18:00] [E ProcessGroupNCCL.cpp:616] [Rank {r}] "
                    "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1234, "
                    "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for "
                    "1800012 milliseconds before timing out."
                )
            data = ("\n".join(lines) + "\n").encode()
            info = tarfile.TarInfo(f"logs/rank{r}.log")
            info.size = len(data)
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _sign_in(page, live_server, user) -> None:
    """Sign in through the login form."""
    page.goto(f"{live_server.url}/login/")
    page.locator("input[name=username]").fill(user.username)
    page.locator("input[name=password]").fill(PASSWORD)
    page.locator("form button[type=submit], form input[type=submit]").last.click()
    page.wait_for_url(re.compile(r"/incidents/"))


def _open_phase(page, phase: str) -> None:
    details = page.locator(f"#phase-{phase}")
    if details.get_attribute("open") is None:
        details.locator("summary").first.click()


def test_on_call_engineer_investigates_an_incident_end_to_end(
    page, live_server, celery_worker_process, team, owner, artifacts_dir, tmp_path
):
    incident = incident_create(team=team, title="8-GPU run crashed at step 4200", actor=owner)
    url = f"{live_server.url}/incidents/{incident.code}/"
    _sign_in(page, live_server, owner)
    page.goto(url)
    assert page.get_by_role("heading", name="No analysis yet").is_visible()

    archive = tmp_path / "job-logs.tar.gz"
    archive.write_bytes(_log_archive())
    page.locator("input[type=file][name=files]").set_input_files(str(archive))
    page.get_by_role("button", name="Upload").click()

    # No reload: the page follows parsing and the run, and swaps the verdict in by itself.
    page.evaluate("window.__sameDocument = true")
    try:
        page.locator("#first-screen h2", has_text="What broke").wait_for(timeout=90_000)
    except Exception:
        pytest.fail(
            "the verdict did not appear without a reload within 90 s:\n"
            + celery_worker_process.log()[-3000:]
        )
    assert page.evaluate("window.__sameDocument") is True  # the page was never reloaded
    assert "out of memory" in page.locator("#first-screen").inner_text().lower()
    # ...and the phases' findings came with it, each shown once (not again in the panel).
    _open_phase(page, "triage")
    assert page.locator("#phase-findings-triage article.finding").count() >= 1
    assert page.locator("#analysis-panel .finding").count() == 0
    page.screenshot(path=str(artifacts_dir / "incident-desktop.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=str(artifacts_dir / "incident-phone.png"), full_page=False)
    page.set_viewport_size({"width": 1280, "height": 900})

    # A finding's evidence opens the exact log line; log text is text, never markup.
    link = page.locator("#first-screen a.evidence-link").first
    link.click()
    page.wait_for_url(re.compile(r"/artifacts/.+line=\d+"))
    assert page.evaluate("window.__pwned") is None
    page.goto(url)
    _open_phase(page, "triage")
    assert page.evaluate("window.__pwned") is None

    # Isolation: add a hypothesis and mark it supported (htmx partial).
    _open_phase(page, "isolation")
    page.get_by_label("Hypothesis", exact=True).fill("Rank 3 ran out of memory first")
    page.get_by_label("Expected if true").fill("rank 3 logs an OOM before the timeouts")
    page.get_by_role("button", name="Add hypothesis").click()
    hyp = page.locator("#section-hypotheses article.hypothesis").first
    hyp.get_by_text("Record a test result").click()
    hyp.get_by_label("Supported").check()
    hyp.get_by_label("Test that was run").fill("grep first error per rank")
    hyp.get_by_label("Its result").fill("rank 3 OOM at 02:48, others time out at 03:18")
    hyp.get_by_role("button", name="Save result").click()
    page.locator("#section-hypotheses .badge.st-supported").wait_for()
    assert Hypothesis.objects.get(incident=incident).status == "supported"

    # Root cause: a Five Whys chain of three levels.
    _open_phase(page, "root_cause")
    page.get_by_label("Symptom").fill("Job crashed at step 4200")
    page.locator("#chain-why").fill("Why did the job crash?")
    page.locator("#chain-answer").fill("Rank 3 ran out of GPU memory")
    page.get_by_role("button", name="Start chain").click()
    for why, answer in [
        ("Why did rank 3 run out of memory?", "A long sequence batch"),
        ("Why was there a long batch?", "No maximum sequence length"),
    ]:
        chain = page.locator("#section-whys article.chain").first
        chain.locator("summary", has_text="Add level").click()
        chain.get_by_label("Why?").fill(why)
        chain.get_by_label("Because").fill(answer)
        chain.get_by_role("button", name="Add level").click()
        page.locator("#section-whys ol.whys li", has_text=answer).wait_for()
    assert (
        page.locator("#section-whys .root-cause").inner_text().count("No maximum sequence length")
    )
    assert WhyChain.objects.get(incident=incident).steps.count() == 3
    # A level can be corrected in place, and removed.
    chain = page.locator("#section-whys article.chain").first
    chain.locator("summary", has_text="Edit or remove level 2").click()
    chain.get_by_label("Answer of level 2").fill("A batch of 64k-token sequences")
    chain.get_by_role("button", name="Save level 2").click()
    page.locator("#section-whys ol.whys li", has_text="A batch of 64k-token sequences").wait_for()

    # Resolution: record a fix and verify it against the baseline.
    _open_phase(page, "resolution")
    page.get_by_label("Fix", exact=True).fill("Cap sequence length at 8192")
    page.get_by_role("button", name="Record fix").click()
    fix = page.locator("#section-fixes article.fix").first
    fix.get_by_text("Verify this fix").click()
    fix.get_by_label("Baseline (before)").fill("step_time: 7.0, 7.1\nmem_peak: 79, 79")
    fix.get_by_label("After the fix").fill("step_time: 7.0, 7.0\nmem_peak: 70, 71")
    fix.get_by_label(re.compile("Target metric")).fill("mem_peak")
    fix.get_by_role("button", name="Compare").click()
    page.locator("#section-fixes .badge.vd-FIXED").wait_for()
    assert FixVerification.objects.get(fix__incident=incident).verdict == "FIXED"
    page.screenshot(path=str(artifacts_dir / "incident-resolution-desktop.png"), full_page=True)


def test_the_incident_page_fits_a_phone_and_is_keyboard_usable(
    page, live_server, transactional_db, team, owner, artifacts_dir
):
    incident = incident_create(team=team, title="Phone check", actor=owner)
    _sign_in(page, live_server, owner)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/incidents/{incident.code}/")
    # nothing wider than the screen
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.screenshot(path=str(artifacts_dir / "incident-empty-phone.png"), full_page=True)
    # every visible form field has a label
    unlabelled = page.evaluate(
        """() => [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
            .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label'))
            .map(el => el.name)"""
    )
    assert unlabelled == []
    # the hypotheses form is reachable and submittable by keyboard alone
    page.locator("#phase-isolation summary").first.focus()
    page.keyboard.press("Enter")
    page.locator("#hyp-title").focus()
    page.keyboard.type("Keyboard hypothesis")
    page.keyboard.press("Enter")
    page.locator(
        "#section-hypotheses article.hypothesis", has_text="Keyboard hypothesis"
    ).wait_for()


def test_the_upload_button_explains_itself_and_does_not_nag_during_an_upload(
    page, live_server, transactional_db, team, owner, tmp_path
):
    """Chosen files upload at once; pressing the button then is not an error, and pressing
    it with nothing chosen says what to do in the page (not a browser bubble)."""
    incident = incident_create(team=team, title="Upload button", actor=owner)
    _sign_in(page, live_server, owner)
    page.goto(f"{live_server.url}/incidents/{incident.code}/")
    form = page.locator("form[data-upload]")
    button = form.get_by_role("button", name="Upload")
    button.click()
    form.locator("li.rejected", has_text="Choose at least one file to upload.").wait_for()
    page.reload()
    archive = tmp_path / "job-logs.tar.gz"
    archive.write_bytes(_log_archive(2))
    page.locator("input[type=file][name=files]").set_input_files(str(archive))
    button.click()
    form.locator("span.name", has_text="job-logs.tar.gz").wait_for()  # its upload row
    assert form.locator("li", has_text="Choose at least one file").count() == 0


def test_a_refused_htmx_form_shows_why_in_place(page, live_server, transactional_db, team, owner):
    """A 422 from an htmx form is shown where the form is, not silently dropped."""
    incident = incident_create(team=team, title="Refused form", actor=owner)
    _sign_in(page, live_server, owner)
    page.goto(f"{live_server.url}/incidents/{incident.code}/")
    _open_phase(page, "isolation")
    page.locator("#hyp-title").fill("   ")  # passes the browser's `required`, not the service
    page.get_by_role("button", name="Add hypothesis").click()
    page.locator("#section-hypotheses", has_text="A hypothesis needs a title.").wait_for()
    assert page.url.rstrip("/").endswith(incident.code)  # stayed on the page: it was htmx
