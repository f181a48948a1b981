"""The admin shows jobs and media read-only, with JSON escaped."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth.models import User

from jobs.models import Job


@pytest.fixture
def operator(client, db):
    User.objects.create_superuser("operator", "op@example.com", "pw")
    client.login(username="operator", password="pw")
    return client


def test_jobs_are_listed_filtered_and_shown_escaped(operator):
    now = time.time()
    Job.objects.create(
        id="00000000000000aa", page_id="main", plugin="demo/get-following", mode="poll", ttl=60, started_at=now,
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


def test_the_admin_cannot_change_anything(operator):
    assert operator.get("/admin/jobs/job/add/").status_code == 403
    assert operator.get("/admin/media_store/mediafile/add/").status_code == 403
    assert operator.get("/admin/jobs/deliveryattempt/").status_code == 200
    assert operator.get("/admin/media_store/mediafile/").status_code == 200


def test_a_cancelled_job_shows_its_state_and_progress(operator):
    now = time.time()
    Job.objects.create(
        id="00000000000000cc", page_id="main", plugin="demo/get-following", mode="poll", ttl=60, started_at=now,
        state="cancelled", finished_at=now, expires_at=now + 60, status=499,
        result={"success": False, "error": "job cancelled by a client", "page_id": "main"},
        progress={"done": 40, "total": 200, "message": "40 of 200 handles", "at": now},
    )
    listing = operator.get("/admin/jobs/job/?state__exact=cancelled")
    assert b"00000000000000cc" in listing.content and b"cancelled" in listing.content
    assert b"00000000000000cc" not in operator.get("/admin/jobs/job/?state__exact=done").content
    detail = operator.get("/admin/jobs/job/00000000000000cc/change/").content
    assert b"40 of 200 handles" in detail and b"job cancelled by a client" in detail
