"""The rules of retries and re-runs in-process, against Django's test
database (a real SQLite file): which ends are worth another attempt, the
back-off, the requeue of an attempt, recovery of jobs a restart caught with
attempts left, and what a re-run asks. No worker, no browser."""

from __future__ import annotations

import json
import random
import time

import pytest

from core.routes import ANY
from jobs import services
from jobs.models import Job
from jobs.options import MAX_QUEUE_TIMEOUT_S, JobOptions, back_off_s, transient
from jobs.shapes import job_body
from plugins.running import Outcome

pytestmark = pytest.mark.django_db(transaction=True)


def outcome(status: int, retry: bool | None = None) -> Outcome:
    return Outcome(status, {"success": status == 200}, time.time(), 0.1, retry)


@pytest.mark.parametrize(
    ("status", "retry", "worth"),
    [
        (408, None, True), (502, None, True), (503, None, True), (504, None, True),
        (400, None, False), (404, None, False), (409, None, False), (423, None, False), (429, None, False),
        (499, None, False), (500, None, False), (507, None, False),
        (418, True, True), (500, True, True), (503, False, False), (200, True, False),
    ],
)
def test_which_ends_are_worth_another_attempt(status, retry, worth):
    assert transient(outcome(status, retry)) is worth


def test_the_back_off_doubles_per_attempt_within_20_percent():
    rng = random.Random(7)
    for attempt, base in [(1, 5.0), (2, 10.0), (3, 20.0), (4, 40.0)]:
        seen = [back_off_s(5.0, attempt, rng=rng) for _ in range(500)]
        assert base * 0.8 <= min(seen) < base * 0.85 and base * 1.15 < max(seen) <= base * 1.2


def start(number: int, options: JobOptions, *, page_id: str = "main", on_any: bool = False, **fields) -> Job:
    return services.create_job(
        job_id=f"{number:016x}", page_id=page_id, plugin="demo/echo", params={"n": number}, options=options,
        held=services.HeldJobsBound(), on_any=on_any, **fields,
    )


def test_a_transient_end_with_attempts_left_goes_back_in_line_after_its_back_off():
    job = start(1, JobOptions(ttl=30, retries=2, retry_backoff=10, queue_timeout=7))
    assert job.retries_left and job.attempt == 1
    now = time.time()
    again = services.requeue_job(job=job, status=503, now=now)
    stored = Job.objects.with_id(job.id)
    assert again is not None and stored.state == Job.State.QUEUED and stored.attempt == 2
    assert 8 <= stored.retry_at - now <= 12 and stored.enqueued_at == stored.retry_at
    assert stored.queue_deadline == pytest.approx(stored.retry_at + 7)  # its X-Queue-Timeout, once back in line
    assert stored.past_attempts == [{"status": 503, "started_at": round(job.started_at, 3), "finished_at": round(now, 3)}]
    body = job_body(stored, now)
    assert body["attempt"] == 2 and body["next_attempt_at"] == round(stored.retry_at, 3) and body["status"] is None
    assert [attempt["status"] for attempt in body["attempts"]] == [503]
    # Not twice: a stale copy of the running job is no longer running.
    assert services.requeue_job(job=job, status=503, now=now) is None
    # It takes its page again, and its second attempt is its last but one.
    assert services.begin_job(job=stored, now=time.time(), page_id="main") and stored.retries_left
    assert stored.retry_at is None


def test_a_retry_waits_in_line_the_longest_a_queued_job_may_when_it_sent_no_queue_timeout():
    job = start(2, JobOptions(ttl=30, retries=1))
    services.requeue_job(job=job, status=408, now=time.time())
    stored = Job.objects.with_id(job.id)
    assert stored.queue_deadline == pytest.approx(stored.retry_at + MAX_QUEUE_TIMEOUT_S)


def test_a_job_sent_to_any_goes_back_to_the_line_of_any():
    job = start(3, JobOptions(ttl=30, retries=1), page_id="pool-1", on_any=True)
    services.requeue_job(job=job, status=502, now=time.time())
    assert Job.objects.with_id(job.id).page_id == ANY


def test_recovery_queues_again_the_jobs_with_attempts_left_and_no_lease():
    retried = start(4, JobOptions(ttl=30, retries=1))
    leased = start(5, JobOptions(ttl=30, retries=1), under_lease=True)
    plain = start(6, JobOptions(ttl=30))
    spent = start(7, JobOptions(ttl=30, retries=1))
    services.requeue_job(job=spent, status=503, now=time.time())
    services.begin_job(job=spent, now=time.time(), page_id="main")  # its last attempt runs
    assert services.recover() == {"retried": 1, "interrupted": 3, "expired": 0}
    stored = Job.objects.with_id(retried.id)
    assert stored.state == Job.State.QUEUED and stored.attempt == 2 and stored.past_attempts[0]["status"] == 503
    for job in (leased, plain, spent):
        assert Job.objects.with_id(job.id).state == Job.State.INTERRUPTED


def test_a_rerun_asks_what_the_job_asked_but_its_key():
    job = start(8, JobOptions(callback="http://127.0.0.1:9/h", idempotency_key="k", queue_timeout=5, priority=4,
                              retries=3, retry_backoff=0.5))
    again = JobOptions.again(job)
    assert again == JobOptions(callback="http://127.0.0.1:9/h", queue_timeout=5, priority=4, retries=3,
                               retry_backoff=0.5, rerun_of=job.id)


def test_stored_parameters_validate_again_as_they_first_did():
    from tests.support.testing_plugins import family

    sleep = family.actions["sleep"]
    for sent in ({"seconds": 1}, {"seconds": 2, "tag": "x", "media_size": 5}):
        first = sleep.validate(sent)
        assert first["tag"] == sent.get("tag", "")  # a default that the field refuses from a client
        assert sleep.validate_stored(json.loads(json.dumps(first))) == first
