"""The console's charts tell the truth at a glance (issue 58): a real waker,
a persona woken for a spike of real calls, some failing, then stopped, and
a real Chromium reading its page. The spike's request-log rows are then
moved two minutes into the past in the persona's store, as if the spike
had passed: the latest minute is empty, as it was when the Calls chart read
`answered: 0 failed: 0` beside 25 calls with 6 failures.

The legend must say the window's totals, labelled, and the latest minute
labelled as latest; a series of one reading (the day view's memory) must
draw a visible point; the day axis must carry dates; the y axis values and
gridlines; a bucket's values on hover; and the fleet's jobs page must list
the newest jobs at first, before any search."""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from harness.waker import WakerProcess
from harness.worker import wait_until
from tests.conftest import worker_env

# A refresh would redraw the page under the pointer; these tests read it still.
ENV = {"WAKER_POLL_S": "0.2", "WAKER_MEMORY_EVERY_S": "0", "CONSOLE_REFRESH_S": "600"}
OK_CALLS, FAILED_CALLS = 19, 6
SHIFT_S = 120  # how far back the spike is moved: out of the latest minute, inside the hour
# The wake must sit in one hour for the day view's memory to be one reading.
HOUR_MARGIN_S = 90  # the wake, 26 calls, a job and the stop take 10 to 30 s here


class Spiked:
    def __init__(self, waker: WakerProcess, job_id: str):
        self.waker = waker
        self.job_id = job_id


def signed_in(waker: WakerProcess) -> httpx.Client:
    client = httpx.Client(base_url=waker.base_url, follow_redirects=False, timeout=60)
    answer = client.post("/console/sign-in", data={"key": waker.key, "next": "/console/"})
    assert answer.status_code == 302, answer.text
    return client


@pytest.fixture(scope="module")
def spiked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Spiked]:
    # Not a guess at speed: a wait for a time of the hour, at most HOUR_MARGIN_S.
    wait_until(lambda: time.time() % 3600 < 3600 - HOUR_MARGIN_S, timeout=HOUR_MARGIN_S + 5, what="an hour's start")
    waker = WakerProcess(
        tmp_path_factory.mktemp("charts"),
        [{"name": "spiky", "mode": "sleepy", "idle_timeout_s": 600, "env": worker_env()}],
        env=ENV,
    ).start()
    try:
        waker.start_persona("spiky")
        with waker.direct("spiky") as api:
            for _ in range(OK_CALLS):
                answer = api.post("/main/plugin/testing/sleep", json={"seconds": 0})
                assert answer.status_code == 200, answer.text
            for _ in range(FAILED_CALLS):
                answer = api.post("/main/plugin/testing/refuse", json={})
                assert answer.status_code == 418, answer.text
            job = api.post("/main/plugin/testing/sleep", json={"seconds": 0}, headers={"X-Result-Ttl": "600"})
            assert job.status_code == 202, job.text
            job_id = job.json()["job_id"]
            wait_until(lambda: api.get(f"/jobs/{job_id}").json()["state"] == "done", what="the job to end")
        console = signed_in(waker)
        try:
            wait_until(
                lambda: 'data-series="memory" data-points="1"' in console.get("/console/p/spiky/?scale=hour").text,
                what="the waker to read the persona's memory",
            )
        finally:
            console.close()
        with waker.client() as api:
            assert api.post("/personas/spiky/stop", json={}).status_code == 200
        waker.wait_for("spiky", lambda body: body["state"] == "stopped")
        # The worker is gone and its log flushed: move the spike into the past.
        with sqlite3.connect(waker.store("spiky") / "penelope.db") as db:
            db.execute("UPDATE activity_requestlogentry SET started_at = started_at - ?", (SHIFT_S,))
        yield Spiked(waker, job_id)
    finally:
        assert waker.stop() == [], "workers outlived their waker"


@pytest.fixture
def page(spiked: Spiked, person) -> Iterator:
    opened = person.new_page()
    opened.goto(spiked.waker.base_url + "/console/sign-in")
    opened.fill("input[name=key]", spiked.waker.key)
    opened.click("button[type=submit]")
    opened.wait_for_selector("#fleet-rows tr[data-persona]")
    yield opened
    opened.close()


def key(page, chart: str, series: str) -> str:
    """The legend's line for a series (main had no line a series: it fails on the legend's words)."""
    legend = page.inner_text(f'[data-chart="{chart}"] .legend')
    label = {"calls_ok": "answered", "calls_failed": "failed", "jobs_ok": "done", "queue": "queued"}.get(series, series)
    lines = [line.strip() for line in legend.splitlines() if line.strip().startswith(f"{label}:")]
    assert len(lines) == 1, legend
    return lines[0]


def test_the_legend_says_the_window_s_totals_and_the_latest_bucket_as_latest(spiked, page):
    page.goto(spiked.waker.base_url + "/console/p/spiky/")
    assert key(page, "Calls", "calls_ok") == f"answered: {OK_CALLS} total in the last hour · latest minute: 0"
    assert key(page, "Calls", "calls_failed") == f"failed: {FAILED_CALLS} total in the last hour · latest minute: 0"
    assert key(page, "Jobs", "jobs_ok").startswith("done: 1 total in the last hour · latest minute: ")
    assert re.fullmatch(r"queued: 0 highest in the last hour · latest minute: 0", key(page, "Queue depth", "queue"))
    page.goto(spiked.waker.base_url + "/console/p/spiky/?scale=hour")
    assert key(page, "Calls", "calls_ok").startswith(f"answered: {OK_CALLS} total in the last day · latest hour: ")
    assert key(page, "Calls", "calls_failed").startswith(
        f"failed: {FAILED_CALLS} total in the last day · latest hour: "
    )


def test_a_series_of_one_reading_draws_a_visible_point(spiked, page):
    page.goto(spiked.waker.base_url + "/console/p/spiky/?scale=hour")
    memory = page.locator('[data-chart="Memory charged (peak)"] [data-series="memory"]')
    assert memory.get_attribute("data-points") == "1"
    dot = memory.locator("circle")
    assert dot.count() == 1
    box = dot.bounding_box()
    assert box is not None and box["width"] > 0 and box["height"] > 0
    assert re.fullmatch(
        r"memory: [\d.]+ MB highest in the last day · latest hour: [\d.]+ MB",
        key(page, "Memory charged (peak)", "memory"),
    )


def test_the_day_axis_carries_dates_and_every_chart_has_y_values_and_gridlines(spiked, page):
    page.goto(spiked.waker.base_url + "/console/p/spiky/?scale=hour")
    labels = page.locator('[data-chart="Calls"] text.x-tick').all_text_contents()
    assert len(labels) >= 3, labels
    dates = {f"{day.day} {day:%b}" for day in (datetime.now(UTC), datetime.now(UTC) - timedelta(days=1))}
    for label in labels:
        match = re.fullmatch(r"(\d{1,2} [A-Z][a-z]{2}) \d\d:00", label)
        assert match and match.group(1) in dates, labels
    page.goto(spiked.waker.base_url + "/console/p/spiky/")
    minutes = page.locator('[data-chart="Calls"] text.x-tick').all_text_contents()
    assert len(minutes) >= 3 and all(re.fullmatch(r"\d\d:(00|15|30|45)", label) for label in minutes), minutes
    for chart in ("Calls", "Jobs", "Queue depth", "Wait for a page (median)", "Memory charged (peak)"):
        ticks = page.locator(f'[data-chart="{chart}"] text.y-tick').all_text_contents()
        values = [float(tick) for tick in ticks]
        assert len(values) >= 2 and values[0] == 0 and values == sorted(values), (chart, ticks)
        assert page.locator(f'[data-chart="{chart}"] line.grid').count() == len(values)
    top = max(float(tick) for tick in page.locator('[data-chart="Calls"] text.y-tick').all_text_contents())
    assert top >= OK_CALLS / 2  # the scale reaches the spike's bucket(s)


def test_hovering_a_bucket_shows_its_values(spiked, page):
    page.goto(spiked.waker.base_url + "/console/p/spiky/")
    buckets = page.locator('[data-chart="Calls"] rect.hit')
    assert buckets.count() == 60
    words = [buckets.nth(index).locator("title").text_content() for index in range(60)]
    failed = [int(re.search(r"failed (\d+)", said).group(1)) for said in words]
    assert sum(failed) == FAILED_CALLS  # each bucket's own values add up to the legend's total
    spike = max(range(60), key=failed.__getitem__)
    readout = page.locator('[data-chart="Calls"] [data-readout]')
    assert "failed" not in readout.inner_text()
    buckets.nth(spike).hover()
    wait_until(lambda: readout.inner_text() == words[spike], what="the readout to show the bucket pointed at")
    assert re.fullmatch(r"\d\d:\d\d UTC: answered \d+, failed [1-9]\d*", readout.inner_text())
    assert page.locator('[data-chart="Calls"] line.cursor').get_attribute("x1") == buckets.nth(spike).get_attribute(
        "data-x"
    )


def test_the_fleet_jobs_page_lists_the_newest_jobs_at_first(spiked, page):
    page.goto(spiked.waker.base_url + "/console/jobs")
    row = page.locator(f'table.jobs tr[data-job="{spiked.job_id}"]')
    assert row.count() == 1 and row.get_attribute("data-persona") == "spiky"
    assert "The newest jobs across the fleet" in page.inner_text("[data-count]")
