"""The admin shows jobs and media read-only, with JSON escaped."""

from __future__ import annotations

import asyncio
import re
import time

import pytest
from django.contrib.auth.models import User
from django.urls import clear_script_prefix, set_script_prefix

from core.admin_base import when
from jobs.models import DeliveryAttempt, Job


@pytest.fixture
def operator(client, db):
    User.objects.create_superuser("operator", "op@example.com", "pw")
    client.login(username="operator", password="pw")
    return client


def test_jobs_are_listed_filtered_and_shown_escaped(operator):
    now = time.time()
    Job.objects.create(
        id="00000000000000aa", page_id="main", plugin="demo/get-following", mode="poll", ttl=60,
        accepted_at=now, started_at=now,
        state="done", finished_at=now, expires_at=now + 60, status=200,
        result={"success": True, "page_id": "main", "note": "<script>alert(1)</script>"},
    )
    listing = operator.get("/admin/jobs/job/?state__exact=done")
    assert listing.status_code == 200 and b"00000000000000aa" in listing.content
    assert b"00000000000000aa" not in operator.get("/admin/jobs/job/?state__exact=running").content
    assert b"00000000000000aa" in operator.get("/admin/jobs/job/?q=00000000000000aa").content
    detail = operator.get("/admin/jobs/job/00000000000000aa/change/")
    assert detail.status_code == 200
    assert b"&lt;script&gt;alert(1)&lt;/script&gt;" in detail.content
    assert b"<script>alert(1)" not in detail.content


def test_queued_jobs_are_filtered_and_show_their_place(operator):
    now = time.time()
    for number, priority in ((1, 0), (2, 4)):
        Job.objects.create(
            id=f"00000000000000c{number}", page_id="main", plugin="demo/get-following", mode="poll", ttl=60,
            accepted_at=now + number, state="queued", enqueued_at=now + number, queue_deadline=now + 120,
            priority=priority,
        )
    listing = operator.get("/admin/jobs/job/?state__exact=queued").content
    assert b"00000000000000c1" in listing and b"00000000000000c2" in listing
    assert b"#2, priority 0" in listing and b"#1, priority 4" in listing  # the higher priority goes first
    detail = operator.get("/admin/jobs/job/00000000000000c1/change/").content
    assert b"queued until" in detail.lower() and b"#2, priority 0" in detail


def shown(detail: str, field: str) -> str:
    """What the change page shows for one of its read-only fields."""
    found = re.search(rf'field-{field}\b.*?<div class="readonly">(.*?)</div>', detail, re.DOTALL)
    assert found, f"no {field} on the page"
    return found.group(1).strip()


def test_a_queued_job_shows_when_it_was_accepted_and_no_start_until_it_takes_its_page(operator, runtime_client):
    operator = runtime_client  # a running job's page reads the worker's runtime
    operator.login(username="operator", password="pw")
    accepted_at = 1796207100.402
    Job.objects.create(
        id="00000000000000c3", page_id="main", plugin="demo/get-following", mode="poll", ttl=60,
        accepted_at=accepted_at, state="queued", enqueued_at=accepted_at, queue_deadline=accepted_at + 120,
    )
    detail = operator.get("/admin/jobs/job/00000000000000c3/change/").content.decode()
    assert shown(detail, "accepted") == when(accepted_at) and shown(detail, "started") == "-"
    assert when(accepted_at) in operator.get("/admin/jobs/job/?state__exact=queued").content.decode()
    job = Job.objects.with_id("00000000000000c3")
    assert job.begin(now=accepted_at + 5, page_id="main")
    detail = operator.get("/admin/jobs/job/00000000000000c3/change/").content.decode()
    assert shown(detail, "accepted") == when(accepted_at) and shown(detail, "started") == when(accepted_at + 5)


def test_the_admin_cannot_change_anything(operator):
    assert operator.get("/admin/jobs/job/add/").status_code == 403
    assert operator.get("/admin/media_store/mediafile/add/").status_code == 403
    assert operator.get("/admin/jobs/deliveryattempt/").status_code == 200
    assert operator.get("/admin/media_store/mediafile/").status_code == 200


def test_a_cancelled_job_shows_its_state_and_progress(operator):
    now = time.time()
    Job.objects.create(
        id="00000000000000cc", page_id="main", plugin="demo/get-following", mode="poll", ttl=60,
        accepted_at=now, started_at=now,
        state="cancelled", finished_at=now, expires_at=now + 60, status=499,
        result={"success": False, "error": "job cancelled by a client", "page_id": "main"},
        progress={"done": 40, "total": 200, "message": "40 of 200 handles", "at": now},
    )
    listing = operator.get("/admin/jobs/job/?state__exact=cancelled")
    assert b"00000000000000cc" in listing.content and b"cancelled" in listing.content
    assert b"00000000000000cc" not in operator.get("/admin/jobs/job/?state__exact=done").content
    detail = operator.get("/admin/jobs/job/00000000000000cc/change/").content
    assert b"40 of 200 handles" in detail and b"job cancelled by a client" in detail


def job(job_id: str, plugin: str, params: dict) -> Job:
    now = time.time()
    return Job.objects.create(
        id=job_id, page_id="main", plugin=plugin, params=params, mode="poll", ttl=60, accepted_at=now, started_at=now,
        state="done", finished_at=now, expires_at=now + 60, status=200, result={"success": True, "page_id": "main"},
    )


def test_json_shows_non_ascii_characters_as_they_are(operator):
    job("00000000000000dd", "demo/open-account", {"handle": "alice", "note": "café — naïve <b>"})
    detail = operator.get("/admin/jobs/job/00000000000000dd/change/")
    assert detail.status_code == 200
    text = detail.content.decode()
    assert "café — naïve &lt;b&gt;" in text
    assert "\\u2014" not in text and "\\u00e9" not in text


def test_jobs_are_found_by_plugin_and_by_a_word_in_their_parameters(operator):
    job("00000000000000e1", "demo/open-account", {"handle": "zanzibar", "note": "café — naïve"})
    job("00000000000000e2", "testing/sleep", {"seconds": 1, "tag": "other"})

    def found(term: str) -> set[str]:
        listing = operator.get("/admin/jobs/job/", {"q": term})
        assert listing.status_code == 200
        return {job_id for job_id in ("00000000000000e1", "00000000000000e2") if job_id.encode() in listing.content}

    assert found("demo/open-account") == {"00000000000000e1"}
    assert found("testing/sleep") == {"00000000000000e2"}
    assert found("zanzibar") == {"00000000000000e1"}
    assert found("ZANZI") == {"00000000000000e1"}  # any part of a word, any case
    assert found("naïve") == {"00000000000000e1"}
    assert found("café naïve") == {"00000000000000e1"}
    assert found("other") == {"00000000000000e2"}
    assert found("nowhere-to-be-found") == set()


def test_delivery_attempt_durations_are_shown_to_a_tenth_of_a_millisecond(operator):
    DeliveryAttempt.objects.create(
        job_id="00000000000000ff", number=1, url="http://127.0.0.1:9/hook", started_at=time.time(),
        duration_ms=12.3456, status_code=200, outcome="delivered",
    )
    listing = operator.get("/admin/jobs/deliveryattempt/")
    assert listing.status_code == 200
    assert b">12.3<" in listing.content and b"12.3456" not in listing.content
    ordered = operator.get("/admin/jobs/deliveryattempt/", {"o": "5"})  # by the duration column
    assert ordered.status_code == 200 and b">12.3<" in ordered.content


def test_the_job_list_says_when_a_result_goes_and_view_site_leads_to_the_health(operator):
    now = time.time()
    for job_id, expires_at in (("00000000000000e8", now - 5), ("00000000000000e9", now + 600)):
        Job.objects.create(
            id=job_id, page_id="main", plugin="web/state", mode="poll", ttl=60,
            accepted_at=now - 60, started_at=now - 60, state="done",
            finished_at=now - 60, expires_at=expires_at, status=200, result={"success": True, "page_id": "main"},
        )
    listing = operator.get("/admin/jobs/job/").content.decode()
    expired_row = listing[listing.index("00000000000000e8"):].split("</tr>")[0]
    held_row = listing[listing.index("00000000000000e9"):].split("</tr>")[0]
    assert "expired, removed at the next sweep" in expired_row
    assert "expired" not in held_row and " UTC" in held_row
    assert 'href="/api/v1/health"' in operator.get("/admin/").content.decode()


def test_manage_jobs_says_an_expired_job_is_removed_at_the_next_sweep(db):
    from io import StringIO

    from django.core.management import call_command

    now = time.time()
    Job.objects.create(
        id="00000000000000ea", page_id="main", plugin="web/state", mode="poll", ttl=60,
        accepted_at=now - 90, started_at=now - 90, state="done",
        finished_at=now - 90, expires_at=now - 30, status=200, result={"success": True, "page_id": "main"},
    )
    out = StringIO()
    call_command("jobs", "00000000000000ea", stdout=out)
    assert "expires in  expired, removed at the next sweep" in out.getvalue()


def test_a_running_job_links_its_live_view(operator, runtime, runtime_client):
    from browser.pages import ManagedPage

    operator = runtime_client
    operator.login(username="operator", password="pw")
    registry, links = runtime.pages, runtime.links
    now = time.time()
    Job.objects.create(
        id="00000000000000f1", page_id="watched", plugin="demo/sign-in", mode="poll", ttl=60, accepted_at=now,
        started_at=now,
    )
    Job.objects.create(
        id="00000000000000f2", page_id="watched", plugin="demo/sign-in", mode="poll", ttl=60,
        accepted_at=now, started_at=now,
        state="done", finished_at=now, expires_at=now + 60, status=200, result={"success": True, "page_id": "watched"},
    )
    detail = operator.get("/admin/jobs/job/00000000000000f1/change/").content.decode()
    assert "/admin/jobs/job/00000000000000f1/live/" in detail
    assert "/live/" not in operator.get("/admin/jobs/job/00000000000000f2/change/").content.decode()
    # Not open here (no browser in this process): nothing to watch, and no link made.
    assert operator.get("/admin/jobs/job/00000000000000f1/live/").status_code == 404
    page = registry.pages["watched"] = ManagedPage("watched")
    try:
        opened = operator.get("/admin/jobs/job/00000000000000f1/live/")
        assert opened.status_code == 302
        link = links.find(opened["Location"].removeprefix("/live/"))
        assert link is not None and link.page is page and link.control
        assert operator.get("/admin/jobs/job/00000000000000f2/live/").status_code == 404  # ended: no link
        # Under a root path (the waker's /w/{persona}, which forwards live/
        # there too: waker/admin_forward.py), the link is under it.
        set_script_prefix("/w/desk/")  # as Django's handler does for a root path; the test client does not
        prefixed = operator.get("/admin/jobs/job/00000000000000f1/live/", SCRIPT_NAME="/w/desk")
        assert prefixed.status_code == 302 and prefixed["Location"].startswith("/w/desk/live/")
        assert links.find(prefixed["Location"].removeprefix("/w/desk/live/")).page is page
    finally:
        clear_script_prefix()
        links.revoke_page("watched")


def test_a_job_shows_its_family_version_and_opens_its_artifacts_safely(operator, settings, tmp_path):
    from media_store import store

    settings.MEDIA_DIR = tmp_path / "media"
    until = time.time() + 60
    shot = store.put(b"\x89PNG\r\n\x1a\n-not-really", content_type="image/png", filename="screenshot.png",
                     holder="00000000000000d1", held_until=until)
    page = store.put(b"<script>alert(1)</script>", content_type="text/html", filename="page.html",
                     holder="00000000000000d1", held_until=until)
    stranger = store.put(b"someone else's", content_type="text/plain", filename="x.txt")
    now = time.time()
    Job.objects.create(
        id="00000000000000d1", page_id="main", plugin="shop/get-items", mode="poll", ttl=60,
        accepted_at=now, started_at=now,
        state="done", finished_at=now, expires_at=until, status=502, family_version="1.4.0",
        media_tokens=[shot.token, page.token],
        result={"success": False, "page_id": "main", "error": "no list", "artifacts": {
            "screenshot": shot.link(), "html": page.link(), "console": None, "network": None, "trace": None,
            "stolen": {"url": f"/api/v1/media/{stranger.token}"},
        }},
    )
    assert b"1.4.0" in operator.get("/admin/jobs/job/").content
    detail = operator.get("/admin/jobs/job/00000000000000d1/change/").content.decode()
    assert "1.4.0" in detail
    assert "/admin/jobs/job/00000000000000d1/artifact/screenshot/" in detail
    assert "/admin/jobs/job/00000000000000d1/artifact/console/" not in detail  # none was kept
    image = operator.get("/admin/jobs/job/00000000000000d1/artifact/screenshot/")
    assert image.status_code == 200 and image["Content-Type"] == "image/png"
    assert b"".join(image.streaming_content).startswith(b"\x89PNG")
    html = operator.get("/admin/jobs/job/00000000000000d1/artifact/html/")
    # The page's HTML is a download that never runs in the admin's origin.
    assert html["Content-Security-Policy"] == "sandbox" and html["Content-Disposition"].startswith("attachment")
    assert b"".join(html.streaming_content) == b"<script>alert(1)</script>"
    # A token the job does not hold opens nothing, and neither does a name it has no file for.
    assert operator.get("/admin/jobs/job/00000000000000d1/artifact/stolen/").status_code == 404
    assert operator.get("/admin/jobs/job/00000000000000d1/artifact/trace/").status_code == 404
    image.close()
    html.close()


def test_a_running_job_shows_its_live_progress_and_nothing_before_its_first_report(operator, runtime, runtime_client):
    from jobs.run import JobRun

    operator = runtime_client
    operator.login(username="operator", password="pw")
    now = time.time()
    job = Job.objects.create(
        id="00000000000000b1", page_id="main", plugin="demo/get-following", mode="poll", ttl=60, accepted_at=now,
        started_at=now,
    )
    detail = operator.get("/admin/jobs/job/00000000000000b1/change/").content.decode()
    assert shown(detail, "progress_json") == "-"  # not running here, and no report stored: nothing, not `null`
    loop = asyncio.new_event_loop()  # a run's cancel is a future of the worker's loop
    run = JobRun(job=job, claim=None, parts=runtime.jobs.parts, cancel_requested=loop.create_future())
    runtime.jobs.running[job.id] = run
    try:
        assert shown(operator.get("/admin/jobs/job/00000000000000b1/change/").content.decode(), "progress_json") == "-"
        run.progress = {"done": 40, "total": 200, "message": "40 of 200 handles", "at": now}  # what the plugin reported
        detail = operator.get("/admin/jobs/job/00000000000000b1/change/").content.decode()
        assert "40 of 200 handles" in shown(detail, "progress_json") and "&quot;done&quot;: 40" in detail
        assert Job.objects.with_id(job.id).progress is None  # read from the worker's memory, not written to the row
    finally:
        del runtime.jobs.running[job.id]
        loop.close()
