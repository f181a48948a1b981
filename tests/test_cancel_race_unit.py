"""A cancel and the plugin's own end in the same turn of the loop, without a
browser: the job keeps the plugin's outcome, whichever came first."""

from __future__ import annotations

import asyncio

import pytest

from browser.pages import Claim, ManagedPage
from jobs.models import Job
from jobs.run import JobRun, WorkerParts


def running_job(number: int, parts: WorkerParts) -> JobRun:
    return JobRun(
        job=Job(id=f"{number:016x}", page_id="main"), claim=Claim(page=ManagedPage("main"), lease=None), parts=parts
    )


@pytest.mark.parametrize("cancel_first", [False, True])
async def test_a_plugin_that_ends_in_the_same_turn_as_a_cancel_keeps_its_result(cancel_first, runtime):
    loop = asyncio.get_running_loop()
    for number in range(200):
        run = running_job(number, runtime.jobs.parts)
        plugin = loop.create_future()
        decision = asyncio.ensure_future(run.plugin_ended_or_cancelled(plugin))
        await asyncio.sleep(0)  # it now waits for either
        # Both in one turn, before the run resumes: the request is taken (the
        # outcome was not chosen yet), yet the plugin's result stands.
        if cancel_first:
            assert run.request_cancel()
            plugin.set_result(f"result {number}")
        else:
            plugin.set_result(f"result {number}")
            assert run.request_cancel()
        assert await decision is False
        assert plugin.result() == f"result {number}"


async def test_a_cancel_before_the_plugin_ends_stops_it(runtime):
    run = running_job(1, runtime.jobs.parts)
    plugin = asyncio.ensure_future(asyncio.sleep(60))
    decision = asyncio.ensure_future(run.plugin_ended_or_cancelled(plugin))
    await asyncio.sleep(0)
    assert run.request_cancel()
    assert await decision is True
    assert plugin.cancelled()
