"""When a job was accepted and when it started, in-process against Django's
test database (a real SQLite file): a job that runs at once starts when it
is accepted and answers as before; a queued one has no start until it takes
its page; a retried one keeps its first; the list keeps each job where its
acceptance put it; and the migration reads rows stored before it so."""

from __future__ import annotations

import time

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from jobs import selectors, services
from jobs.models import Job
from jobs.options import JobOptions
from jobs.shapes import job_body
from tests.test_jobs import JOB_KEYS

pytestmark = pytest.mark.django_db(transaction=True)


def start(number: int, options: JobOptions | None = None, *, queued: bool = False) -> Job:
    return services.create_job(
        job_id=f"{number:016x}", page_id="main", plugin="demo/echo", params={"n": number},
        options=options or JobOptions(ttl=30), held=services.HeldJobsBound(), queued=queued,
    )


def test_a_job_that_runs_at_once_starts_when_it_is_accepted_and_answers_as_before():
    job = start(1, JobOptions(ttl=30, queue_timeout=60))  # asked to queue, but its page was free
    assert job.started_at == job.accepted_at == job.attempt_started_at
    body = job_body(Job.objects.with_id(job.id), time.time())
    assert set(body) == JOB_KEYS and body["started_at"] == round(job.accepted_at, 3)


def test_a_queued_job_is_accepted_now_and_starts_when_it_takes_its_page():
    before = time.time()
    job = start(2, JobOptions(ttl=30, queue_timeout=60), queued=True)
    stored = Job.objects.with_id(job.id)
    assert before <= stored.accepted_at == stored.enqueued_at and stored.started_at is None
    waiting = job_body(stored, time.time())
    assert waiting["state"] == "queued" and waiting["accepted_at"] == round(stored.accepted_at, 3)
    assert waiting["started_at"] is None
    assert list(waiting).index("accepted_at") == list(waiting).index("started_at") - 1  # just before its start
    took = stored.accepted_at + 2.5
    assert services.begin_job(job=stored, now=took, page_id="main")
    running = job_body(Job.objects.with_id(job.id), time.time())
    assert running["state"] == "running" and running["started_at"] == round(took, 3)
    assert running["accepted_at"] == waiting["accepted_at"] and running["queue"] is None
    ended = services.end_job(job=stored, state=Job.State.DONE, status=200, result={"success": True}, media_tokens=[],
                             progress=None)
    assert job_body(ended, time.time())["started_at"] == round(took, 3)


def test_a_queued_job_that_never_took_its_page_ends_without_a_start_or_an_attempt():
    job = start(3, JobOptions(ttl=30, queue_timeout=60, retries=1), queued=True)
    ended = services.end_job(job=job, state=Job.State.TIMED_OUT, status=409, result={"success": False},
                             media_tokens=[], progress=None)
    body = job_body(ended, time.time())
    assert body["state"] == "timed_out" and body["started_at"] is None and body["accepted_at"] is not None
    assert body["attempt"] == 1 and body["attempts"] == []  # its first attempt never ran


def test_a_retried_job_keeps_its_first_start_and_each_attempt_its_own():
    job = start(4, JobOptions(ttl=30, retries=2, retry_backoff=1, queue_timeout=60), queued=True)
    first = job.accepted_at + 1
    assert services.begin_job(job=job, now=first, page_id="main")
    assert services.requeue_job(job=job, status=503, now=first + 1) is not None
    backing_off = job_body(Job.objects.with_id(job.id), time.time())
    assert backing_off["state"] == "queued" and backing_off["started_at"] == round(first, 3)
    second = first + 5
    assert services.begin_job(job=job, now=second, page_id="main")
    stored = Job.objects.with_id(job.id)
    assert (stored.started_at, stored.attempt_started_at) == (first, second)
    body = job_body(stored, time.time())
    assert body["started_at"] == round(first, 3) and body["accepted_at"] == round(job.accepted_at, 3)
    assert [attempt["started_at"] for attempt in body["attempts"]] == [round(first, 3), round(second, 3)]


def test_the_list_keeps_a_queued_job_where_its_acceptance_put_it():
    queued = start(5, JobOptions(ttl=30, queue_timeout=60), queued=True)
    later = start(6)
    Job.objects.with_ids([later.id]).update(accepted_at=queued.accepted_at + 1, started_at=queued.accepted_at + 1)
    found, _ = selectors.find_jobs(now=time.time(), limit=10)
    assert [job.id for job in found] == [later.id, queued.id]
    services.begin_job(job=queued, now=queued.accepted_at + 10, page_id="main")  # it starts after the later one
    found, after = selectors.find_jobs(now=time.time(), limit=1)
    assert [job.id for job in found] == [later.id]
    rest, _ = selectors.find_jobs(now=time.time(), limit=10, after=after)
    assert [job.id for job in rest] == [queued.id]


BEFORE = [("jobs", "0008_debug_and_family_version")]
AFTER = [("jobs", "0009_accepted_at")]


def test_the_migration_tells_each_stored_job_s_acceptance_from_its_start():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    try:
        Old = executor.loader.project_state(BEFORE).apps.get_model("jobs", "Job")
        past = [{"status": 503, "started_at": 400.0, "finished_at": 405.0}]
        for job_id, state, started_at, enqueued_at, past_attempts in [
            ("a", "done", 100.0, None, None),  # ran at once
            ("b", "queued", 200.0, 200.0, None),  # waits: its start was its acceptance
            ("c", "running", 305.0, 300.0, None),  # waited, then took its page
            ("d", "queued", 410.0, 415.0, past),  # retried, waiting out its back-off
            ("e", "timed_out", 500.0, 500.0, None),  # waited in vain
        ]:
            Old.objects.create(id=job_id * 16, page_id="main", plugin="demo/echo", mode="poll", state=state,
                               started_at=started_at, enqueued_at=enqueued_at, past_attempts=past_attempts)
        executor = MigrationExecutor(connection)
        executor.migrate(AFTER)
        stored = {job.id[0]: (job.accepted_at, job.started_at, job.attempt_started_at) for job in Job.objects.all()}
        assert stored == {
            "a": (100.0, 100.0, 100.0), "b": (200.0, None, None), "c": (300.0, 305.0, 305.0),
            "d": (400.0, 400.0, 410.0), "e": (500.0, None, None),
        }
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes("jobs"))
