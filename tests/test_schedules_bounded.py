"""Schedules are bounded (issue 39): SCHEDULES_MAX holds under concurrent
creates, and a schedule whose fires keep being refused is counted on its
row and in the metrics but logged once a window (SCHEDULE_REFUSAL_LOG_S,
scaled down here), with the count since its last line.

The bounds run against real workers (a real browser, real SQLite); the
log's window logic also runs in-process with a clock the test moves."""

from __future__ import annotations

import logging
import re
import threading
import time
from datetime import datetime

import httpx

from harness.worker import wait_until
from schedules.refusals import RefusalLog
from tests.test_metrics import scrape

EVERY_SECOND = "* * * * * *"
NEVER_SOON = "0 0 1 1 *"


def body(name: str, **fields) -> dict:
    return {
        "name": name, "cron": NEVER_SOON, "page_id": "main", "plugin": "testing/sleep",
        "params": {"seconds": 0}, "result_ttl": 600, **fields,
    }


# --- SCHEDULES_MAX ---------------------------------------------------------------------------


def test_schedules_max_holds_when_40_creates_arrive_at_once(make_worker):
    cap, racers = 5, 40
    worker = make_worker(env={"SCHEDULES_MAX": str(cap)})
    barrier = threading.Barrier(racers)
    answers: list[httpx.Response] = [None] * racers  # type: ignore[list-item]

    def create(index: int) -> None:
        with worker.client() as api:
            api.get("/health")  # connected before the race, so the barrier releases requests, not handshakes
            barrier.wait()
            answers[index] = api.post("/schedules", json=body(f"racer-{index}"))

    threads = [threading.Thread(target=create, args=(index,)) for index in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    created = [answer for answer in answers if answer.status_code == 201]
    refused = [answer for answer in answers if answer.status_code != 201]
    assert len(created) == cap, [answer.status_code for answer in answers]
    assert {answer.status_code for answer in refused} == {409}
    assert all(
        answer.json() == {
            "success": False, "error": f"All {cap} schedules exist (SCHEDULES_MAX); delete one first.", "page_id": None,
        }
        for answer in refused
    ), refused[0].text
    with worker.client() as api:
        stored = api.get("/schedules").json()["schedules"]
        assert sorted(s["name"] for s in stored) == sorted(answer.json()["name"] for answer in created)
        # The bound is on what is stored: a delete makes room for one more, and only one.
        assert api.delete(f"/schedules/{stored[0]['schedule_id']}").status_code == 204
        assert api.post("/schedules", json=body("after-a-delete")).status_code == 201
        assert api.post("/schedules", json=body("one-too-many")).status_code == 409
        assert len(api.get("/schedules").json()["schedules"]) == cap
        # The OpenAPI document says it, on the create's 409.
        create = api.get("/schema").json()["paths"]["/api/v1/schedules"]["post"]
        assert "SCHEDULES_MAX" in create["responses"]["409"]["description"]


# --- refused fires -----------------------------------------------------------------------------

LINE = re.compile(
    r"^(?P<at>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) WARNING penelope\.schedules: schedule (?P<name>[\w.-]+): "
    r"(?:a fire was refused|(?P<count>\d+) fires? refused in the last \d+ s; the last): "
)


def refusal_lines(log_text: str) -> dict[str, list[tuple[float, int]]]:
    """Each schedule's refusal lines: (when, how many refusals it tells of)."""
    lines: dict[str, list[tuple[float, int]]] = {}
    for line in log_text.splitlines():
        found = LINE.match(line)
        if found:
            at = datetime.strptime(found["at"], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            lines.setdefault(found["name"], []).append((at, int(found["count"] or 1)))
    return lines


def test_refused_fires_are_counted_on_the_row_and_in_metrics_and_logged_once_a_window(make_worker):
    """The issue's flood in small: every-second schedules against a full
    MAX_JOBS. Each refusal is on the row and in the metrics; the log has one
    line per schedule per window, whose counts add up to the row's."""
    window_s = 2.0
    worker = make_worker(env={"MAX_JOBS": "2", "SCHEDULE_REFUSAL_LOG_S": str(window_s), "SCHEDULE_CHECK_S": "0.3"})
    names = ["flood-a", "flood-b", "flood-c"]
    with worker.client() as api:
        before = scrape(api)("penelope_schedule_refusals_total", status="503")
        ids = [api.post("/schedules", json=body(name, cron=EVERY_SECOND)).json()["schedule_id"] for name in names]
        assert len(ids) == 3
        started = time.time()
        wait_until(
            lambda: all(api.get(f"/schedules/{sid}").json()["refused"] >= 7 for sid in ids),
            timeout=30, what="seven refused fires of each schedule",
        )
        for sid in ids:
            assert api.patch(f"/schedules/{sid}", json={"paused": True}).status_code == 200

        def settled() -> dict | None:
            """The rows, once the metric counts every refusal they count (a fire
            in hand when the pause came may still be refused)."""
            rows = {sid: api.get(f"/schedules/{sid}").json() for sid in ids}
            counted = scrape(api)("penelope_schedule_refusals_total", status="503") - before
            return rows if counted == sum(row["refused"] for row in rows.values()) else None

        rows = wait_until(settled, what="the metric to count every refused fire")
        refused = {row["name"]: row["refused"] for row in rows.values()}
        assert sum(row["fired"] for row in rows.values()) == 2  # MAX_JOBS: the first two fires' jobs are held
        for row in rows.values():
            assert row["last_error"].endswith("(MAX_JOBS); try again when some have ended and been read or delivered.")
            assert started < row["last_refused_at"] <= time.time()
        # The counts left in the window are logged once it has passed (the loop's flush).
        lines = wait_until(
            lambda: (found := refusal_lines(worker.log_path.read_text()))
            and all(sum(count for _, count in found.get(name, [])) == refused[name] for name in names)
            and found,
            timeout=window_s + 10, what="the log's counts to add up to the rows'",
        )
    for name in names:
        times = [at for at, _ in lines[name]]
        assert len(times) < refused[name], (name, lines[name])
        gaps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
        assert all(gap >= window_s - 0.01 for gap in gaps), (name, gaps)  # asctime is wall-clock, to the ms


def test_the_refusal_log_writes_one_line_a_window_with_the_count_since_the_last(caplog):
    now = [0.0]
    refusals = RefusalLog(every_s=60, clock=lambda: now[0])
    caplog.set_level(logging.WARNING, logger="penelope.schedules")
    for second in range(100):  # refused every second for 100 s, the loop waking between fires
        now[0] = float(second)
        refusals.refused(schedule_id="s1", name="every-second", error=f"full at {second}")
        refusals.flush()
    assert [record.getMessage() for record in caplog.records] == [
        "schedule every-second: a fire was refused: full at 0",
        "schedule every-second: 60 fires refused in the last 60 s; the last: full at 60",
    ]
    now[0] = 119.0
    refusals.flush()
    assert len(caplog.records) == 2  # still inside the window of the line at 60
    now[0] = 120.0
    refusals.flush()
    assert caplog.records[-1].getMessage() == "schedule every-second: 39 fires refused in the last 60 s; the last: full at 99"
    now[0] = 180.0
    refusals.flush()
    assert len(caplog.records) == 3 and refusals.tallies == {}  # a quiet window: forgotten
    refusals.refused(schedule_id="s1", name="every-second", error="full again")
    assert caplog.records[-1].getMessage() == "schedule every-second: a fire was refused: full again"
