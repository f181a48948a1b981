"""A short load run in the suite: MAX_JOBS held and 64 pollers. The full
minute is `scripts/load.sh`; docs/RELIABILITY.md has its figures."""

from __future__ import annotations

import pytest

from tests.support.load import run_load, start_worker

# 1000 jobs and 64 pollers load both cores, and the worker's memory is measured: alone (pytest.ini, `serial`).
pytestmark = pytest.mark.serial


async def test_max_jobs_held_and_64_pollers(tmp_path):
    worker = start_worker(tmp_path / "store", max_jobs=1000, pages=8)
    try:
        report = await run_load(worker, max_jobs=1000, pages=8, pollers=64, duration_s=5)
    finally:
        worker.stop()
    assert report.jobs_held == 1000
    assert report.extra_job_status == 503
    assert set(report.poll_statuses) == {200} and report.polls > 64
    assert report.wrong_results == 0
    assert report.checked_after == 1000
    # Memory stays bounded: polling held results does not grow the worker.
    assert report.rss_mb_max - report.rss_mb_start < 100
