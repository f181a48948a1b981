"""The job runner in-process: a real Chromium and a real SQLite file, no
server. Each step of a job's life is followed by `runner.check()`, which
fails naming the first invariant of jobs/runner.py that does not hold."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from browser.pages import ManagedPage
from core.db_thread import on_db_thread
from core.errors import JobNotCancellable, KeyInFlight, KeyReused, NoSuchJob, PageBusy
from jobs.models import Job
from jobs.options import JobOptions
from jobs.runner import JobRunner
from jobs.selectors import find_live_job
from tests.support import testing_plugins

pytestmark = pytest.mark.django_db(transaction=True)

SLEEP = testing_plugins.family.actions["sleep"]


@pytest.fixture
async def page(settings, tmp_path, runtime) -> AsyncIterator[ManagedPage]:
    settings.PROFILE_DIR = tmp_path / "profile"
    settings.MEDIA_DIR = tmp_path / "media"
    settings.CANCEL_GRACE_S = 2
    browser = runtime.browser
    runtime.pages.attach(browser, await browser.start())
    try:
        yield runtime.pages.get("main")
    finally:
        await browser.stopping()
        runtime.pages.detach()
        await browser.close()


async def start(runner: JobRunner, page: ManagedPage, seconds: float, **options) -> Job:
    params = SLEEP.validate({"seconds": seconds, "tag": options.pop("tag", "runner")})
    return await runner.submit(page=page, action=SLEEP, params=params, lease_id=None, options=JobOptions(ttl=30, **options))


async def test_a_job_from_start_to_forget(page, runtime):
    runner = runtime.jobs
    job = await start(runner, page, 0.3)
    runner.check()
    run = runner.running[job.id]
    assert run.job is job and page.job_id == job.id
    with pytest.raises(PageBusy):
        await start(runner, page, 0)
    polled = await runner.poll(job.id)
    assert polled.state == Job.State.RUNNING
    ended = await runner.wait(job.id, 10)
    runner.check()
    assert ended.state == Job.State.DONE and ended.status == 200 and ended.result["success"] is True
    # The end is kept as stored: the next poll reads no row.
    assert await runner.poll(job.id) is ended
    await run.task
    assert job.id not in runner.running and page.job_id is None
    runner.check()
    await runner.forget(job.id)
    with pytest.raises(NoSuchJob):
        await runner.poll(job.id)
    runner.check()


async def test_a_cancel_ends_the_job_cancelled_once(page, runtime):
    runner = runtime.jobs
    job = await start(runner, page, 60)
    waiting = asyncio.ensure_future(runner.wait(job.id, 30))
    await asyncio.sleep(0)  # the long-poll is registered
    assert runner.waiters.count == 1
    cancelled = await runner.cancel(job.id)
    runner.check()
    assert cancelled.state == Job.State.CANCELLED and cancelled.status == 499
    assert (await waiting).state == Job.State.CANCELLED  # woken by the stored end
    assert runner.waiters.count == 0 and not page.busy
    with pytest.raises(JobNotCancellable, match="already ended"):
        await runner.cancel(job.id)


async def test_a_key_in_flight_is_refused_and_a_repeat_answers_the_same_job(page, runtime):
    runner = runtime.jobs
    first, second = await asyncio.gather(
        start(runner, page, 0, idempotency_key="k"), start(runner, page, 0, idempotency_key="k"),
        return_exceptions=True,
    )
    assert isinstance(first, Job) and isinstance(second, KeyInFlight)
    assert runner.starting == set()
    runner.check()
    await runner.wait(first.id, 10)
    repeat = await start(runner, page, 0, idempotency_key="k")
    assert repeat.id == first.id
    with pytest.raises(KeyReused):
        await start(runner, page, 0, idempotency_key="k", tag="another request")
    runner.check()


async def test_a_stop_leaves_the_job_running_for_recovery(page, runtime):
    runner = runtime.jobs
    job = await start(runner, page, 60)
    await runner.stop()
    assert runner.running == {} and not page.busy
    stored = await on_db_thread(find_live_job)(job_id=job.id, now=time.time())
    assert stored.state == Job.State.RUNNING


FLAKY = testing_plugins.family.actions["flaky"]


async def test_a_retried_job_keeps_the_invariants_through_its_back_off_and_its_next_attempt(page, runtime, tmp_path):
    runner = runtime.jobs
    params = FLAKY.validate({"path": str(tmp_path / "attempts"), "failures": 1, "status": 502})
    job = await runner.submit(
        page=page, action=FLAKY, params=params, lease_id=None, options=JobOptions(ttl=30, retries=1, retry_backoff=0.3)
    )
    run = runner.running[job.id]
    while not run.requeued:  # the first attempt fails, and is stored queued for the next
        await asyncio.sleep(0.01)
    runner.check()
    assert run.claim is None and run.job.state == Job.State.QUEUED and run.job.attempt == 2 and not page.busy
    polled = await runner.poll(job.id)
    assert polled.state == Job.State.QUEUED and polled.retry_at > time.time()
    ended = await runner.wait(job.id, 10)
    runner.check()
    assert ended.state == Job.State.DONE and ended.status == 200 and ended.attempt == 2
    assert [attempt["status"] for attempt in ended.past_attempts] == [502]
    await run.task
    assert job.id not in runner.running and page.job_id is None
    runner.check()
