"""The job rules in-process, against Django's test database (a real SQLite
file): transitions and their refusals, delivery claims, recovery, sweeps,
the list and its cursor, idempotency and forgetting. No worker, no browser:
these run in about a second."""

from __future__ import annotations

import time

import pytest

from core.api import status_of
from core.errors import JobsFull, JobStillRunning, NoSuchJob
from jobs import selectors, services
from jobs.delivery import Attempt, claim_due_attempts, record_outcome
from jobs.models import DeliveryAttempt, Job, attempt_offsets, webhook_window
from jobs.options import JobOptions
from media_store import store as media
from media_store.models import MediaFile

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def job_settings(settings, tmp_path):
    settings.MAX_JOBS = 5
    settings.WEBHOOK_ATTEMPTS_S = [0, 1, 2]
    settings.WEBHOOK_TIMEOUT_S = 1
    settings.MEDIA_DIR = tmp_path / "media"
    settings.STORE_DIR = tmp_path  # the deliverers' life locks
    return settings


def polling(ttl: float = 30, key: str | None = None) -> JobOptions:
    return JobOptions(ttl=ttl, idempotency_key=key)


def webhook(url: str = "http://127.0.0.1:9/hook") -> JobOptions:
    return JobOptions(callback=url)


def start(number: int, *, options: JobOptions | None = None, held: services.HeldJobsBound | None = None, **fields) -> Job:
    return services.create_job(
        job_id=f"{number:016x}", page_id=fields.get("page_id", "main"), plugin=fields.get("plugin", "demo/echo"),
        params={"n": number}, options=options or polling(), held=held or services.HeldJobsBound(),
    )


def end(job: Job, status: int = 200, **extra) -> Job | None:
    return services.end_job(
        job=job, state=extra.get("state", Job.State.DONE), status=status, result={"success": True, "n": job.id},
        media_tokens=extra.get("media_tokens", []), progress=extra.get("progress"),
    )


# --- transitions --------------------------------------------------------------------------


def test_a_job_starts_running_and_ends_once():
    job = start(1)
    assert Job.objects.with_id(job.id).state == Job.State.RUNNING
    stored = end(job, progress={"done": 3})
    assert stored.state == Job.State.DONE and stored.status == 200
    again = Job.objects.with_id(job.id)
    assert again.expires_at == pytest.approx(again.finished_at + 30)
    assert again.progress == {"done": 3}
    # A second end (a stale copy of the running job) changes nothing.
    assert end(start_copy(job), status=500) is None
    assert Job.objects.with_id(job.id).status == 200


def start_copy(job: Job) -> Job:
    """The job as it was when it started: what a second, late end would hold."""
    copy = Job.objects.with_id(job.id)
    copy.state = Job.State.RUNNING
    return copy


def test_a_webhook_job_ends_with_its_first_attempt_scheduled():
    job = end(start(2, options=webhook()))
    assert job.next_attempt_at == pytest.approx(job.finished_at + attempt_offsets()[0])
    assert job.expires_at == pytest.approx(job.finished_at + webhook_window())


def test_the_id_is_never_reused():
    start(3)
    with pytest.raises(Exception, match="UNIQUE"):
        start(3)


def test_max_jobs_refuses_the_next_start_and_stores_nothing():
    held = services.HeldJobsBound()
    for number in range(5):
        start(10 + number, held=held)
    with pytest.raises(JobsFull) as refused:
        start(20, held=held)
    assert status_of(refused.value) == 503 and "MAX_JOBS" in refused.value.message
    assert Job.objects.count() == 5


# --- idempotency ----------------------------------------------------------------------------


def test_a_key_finds_its_held_job_and_an_expired_job_gives_its_key_up():
    first = start(30, options=polling(ttl=0.001, key="k-1"))
    assert selectors.find_held_by_key(key="k-1", now=time.time()).id == first.id
    end(first)
    later = time.time() + 1
    assert selectors.find_held_by_key(key="k-1", now=later) is None  # past its hold
    second = start(31, options=polling(key="k-1"))  # the sweep has not run: the old row lets the key go
    assert Job.objects.with_id(first.id).idempotency_key is None
    assert selectors.find_held_by_key(key="k-1", now=time.time()).id == second.id


# --- reading ----------------------------------------------------------------------------------


def test_the_list_pages_newest_first_with_filters_and_a_cursor(settings):
    settings.MAX_JOBS = 10
    for number in range(7):
        job = start(40 + number, page_id="main" if number % 2 else "other")
        Job.objects.with_ids([job.id]).update(accepted_at=1000 + number)
    found, after = selectors.find_jobs(now=time.time(), limit=3)
    assert [job.accepted_at for job in found] == [1006, 1005, 1004] and after == (1004, found[-1].id)
    found, after = selectors.find_jobs(now=time.time(), limit=3, after=after)
    assert [job.accepted_at for job in found] == [1003, 1002, 1001]
    found, after = selectors.find_jobs(now=time.time(), limit=3, after=after)
    assert [job.accepted_at for job in found] == [1000] and after is None
    mains, _ = selectors.find_jobs(now=time.time(), limit=10, page_id="main")
    assert {job.page_id for job in mains} == {"main"} and len(mains) == 3
    ended = end(Job.objects.with_id(mains[0].id))
    done, _ = selectors.find_jobs(now=time.time(), limit=10, state="done")
    assert [job.id for job in done] == [ended.id]


def test_a_job_past_its_deadline_is_not_found():
    job = end(start(50, options=polling(ttl=1)))
    assert selectors.find_live_job(job_id=job.id, now=job.expires_at - 0.01) is not None
    assert selectors.find_live_job(job_id=job.id, now=job.expires_at) is None
    assert selectors.find_live_job(job_id="0" * 16, now=time.time()) is None


def test_counts_for_the_waker_and_the_metrics():
    running, done, hooked = start(60), end(start(61)), end(start(62, options=webhook()))
    assert selectors.counts() == (1, 1)
    held = selectors.held_by_state(time.time())
    assert held == {"queued": 0, "running": 1, "done": 2, "interrupted": 0, "cancelled": 0, "timed_out": 0}
    assert running.id and done.id and hooked.id


# --- forgetting -------------------------------------------------------------------------------


def test_forget_refuses_a_running_job_and_deletes_an_ended_one_with_its_files():
    job = start(70)
    with pytest.raises(JobStillRunning):
        services.forget_job(job_id=job.id, now=time.time())
    item = media.put(b"abc", content_type="text/plain", filename="a.txt", holder=job.id)
    end(job, media_tokens=[item.token])
    assert MediaFile.objects.get(token=item.token).expires_at == pytest.approx(Job.objects.with_id(job.id).expires_at)
    services.forget_job(job_id=job.id, now=time.time())
    assert not Job.objects.filter(id=job.id).exists() and not MediaFile.objects.exists()
    with pytest.raises(NoSuchJob):
        services.forget_job(job_id=job.id, now=time.time())


# --- recovery and sweeps -----------------------------------------------------------------------


def test_recovery_interrupts_running_jobs_and_drops_expired_ones():
    running = [start(80 + number) for number in range(3)]
    gone = end(start(90, options=polling(ttl=0.001)))
    counts = services.recover(now=time.time() + 1)
    assert counts == {"retried": 0, "interrupted": 3, "expired": 1}
    for job in running:
        stored = Job.objects.with_id(job.id)
        assert stored.state == Job.State.INTERRUPTED and stored.status == 503
        assert "worker stopped" in stored.result["error"]
    assert Job.objects.with_id(gone.id) is None
    assert services.recover() == {"retried": 0, "interrupted": 0, "expired": 0}


def test_the_sweep_deletes_what_is_past_its_deadline_only():
    kept = end(start(100, options=polling(ttl=60)))
    gone = end(start(101, options=polling(ttl=0.001)))
    DeliveryAttempt.objects.create(job_id=gone.id, number=1, url="http://x/", started_at=0, duration_ms=1,
                                   outcome="retry", expires_at=time.time() - 1)
    swept = services.sweep(now=time.time() + 1)
    assert swept["jobs"] == 1 and swept["attempts"] == 1
    assert Job.objects.with_id(kept.id) is not None and Job.objects.with_id(gone.id) is None


# --- delivery claims ---------------------------------------------------------------------------


def sent(job: Job, owner: str, outcome: str, status: int | None = 200) -> str:
    attempt = Attempt(job.id, job.page_id, job.callback, job.attempts, b"{}", job.finished_at)
    return record_outcome(attempt, owner=owner, started_at=time.time(), duration_ms=1.0, status_code=status,
                          error=None, outcome=outcome)


def test_an_attempt_is_claimed_once_and_only_its_owner_records_it(tmp_path):
    from jobs.delivery import Owner

    first, second = Owner().start(), Owner().start()
    try:
        job = end(start(110, options=webhook()))
        now = job.next_attempt_at
        claimed = claim_due_attempts(first.id, now)
        assert [attempt.job_id for attempt in claimed] == [job.id] and claimed[0].number == 1
        assert claim_due_attempts(second.id, now) == []  # held by a live owner
        job = Job.objects.with_id(job.id)
        # The other deliverer cannot record it; the owner's retry frees it for the next slot.
        assert job.record_retry(owner=second.id, error="x") is False
        assert sent(job, first.id, DeliveryAttempt.Outcome.RETRY, 500) == DeliveryAttempt.Outcome.RETRY
        job = Job.objects.with_id(job.id)
        assert job.claim_owner is None and job.next_attempt_at == pytest.approx(job.finished_at + 1)
        # Its owner gone, a claim is taken over.
        assert [a.number for a in claim_due_attempts(first.id, job.finished_at + 1)] == [2]
        first.stop()
        assert [a.number for a in claim_due_attempts(second.id, job.finished_at + 1)] == [2]  # the same slot again
        job = Job.objects.with_id(job.id)
        assert job.record_final(owner=first.id) is False
        assert sent(job, second.id, DeliveryAttempt.Outcome.DELIVERED) == DeliveryAttempt.Outcome.DELIVERED
        assert Job.objects.with_id(job.id) is None
        assert list(DeliveryAttempt.objects.of_job(job.id).values_list("outcome", flat=True)) == ["delivered", "retry"]
    finally:
        first.stop()
        second.stop()


def test_the_last_slot_gives_up():
    from jobs.delivery import Owner

    owner = Owner().start()
    try:
        job = end(start(120, options=webhook()))
        for slot in range(3):
            claimed = claim_due_attempts(owner.id, job.finished_at + attempt_offsets()[slot])
            assert [attempt.number for attempt in claimed] == [slot + 1]
            outcome = sent(Job.objects.with_id(job.id), owner.id, DeliveryAttempt.Outcome.RETRY, 503)
        assert outcome == DeliveryAttempt.Outcome.GAVE_UP and Job.objects.with_id(job.id) is None
        assert selectors.seconds_until_next_attempt(time.time()) is None
    finally:
        owner.stop()


def test_a_queued_job_knows_how_many_queued_jobs_go_before_it():
    def queued(number: int, priority: int, at: float) -> Job:
        job = start(number, options=JobOptions(ttl=30, queue_timeout=60, priority=priority))
        Job.objects.with_ids([job.id]).update(state=Job.State.QUEUED, enqueued_at=at, priority=priority)
        return Job.objects.with_id(job.id)

    first, urgent, later = queued(130, 0, 1.0), queued(131, 5, 2.0), queued(132, 0, 3.0)
    assert [Job.objects.queued_ahead_of(job) for job in (urgent, first, later)] == [0, 1, 2]
    assert [job.id for job in Job.objects.queued()] == [urgent.id, first.id, later.id]
