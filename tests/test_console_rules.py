"""The console's rules, in-process: a persona's state and its reason, the
fleet's sort and filter, the charts' points, the search's refusals, and
where a sign-in may send you. No waker: each rule is a function of what it
is given (tests/test_console.py drives the whole console)."""

from __future__ import annotations

from pathlib import Path

import pytest

from console import actions, charts, present
from console.auth import safe_next
from console.charts import scaled, sparkline
from console.fleet import Row, memory_by, state_of
from console.search import SearchInvalid, parsed
from waker.persona_worker import RUNNING, STARTING, STOPPED, PersonaWorker
from waker.personas import ALWAYS, SLEEPY, Persona
from waker.policy import Activity


def worker(mode: str = SLEEPY, state: str = STOPPED) -> PersonaWorker:
    persona = Persona(name="ada", store=Path("/nonexistent"), port=1, mode=mode, idle_timeout_s=60, recycle_s=3600)
    made = PersonaWorker(persona, http=None)
    made.state = state
    return made


def activity(browser_state: str = "up") -> Activity:
    return Activity(
        requests_in_flight=0, jobs_in_flight=0, webhooks_pending=0, idle_seconds=1.0, read_at=0.0,
        browser_state=browser_state,
    )


def test_a_persona_s_state_says_why_it_fails():
    assert state_of(worker()) == ("asleep", None)
    assert state_of(worker(state=STARTING)) == ("starting", None)
    running = worker(state=RUNNING)
    assert state_of(running) == ("awake", None)
    running.activity = activity("relaunching")
    assert state_of(running) == ("failing", "its browser is relaunching")
    running.activity_error = "it answered HTTP 500"
    assert state_of(running) == ("failing", "its activity cannot be read: it answered HTTP 500")
    crashed = worker()
    crashed.last_exit = {"at": 1.0, "pid": 7, "returncode": -9, "expected": False}
    assert state_of(crashed) == ("failing", "its worker exited unexpectedly with code -9")
    crashed.last_exit["expected"] = True
    assert state_of(crashed) == ("asleep", None)
    unstartable = worker(ALWAYS)
    unstartable.watch.start_failed(RuntimeError("the port is taken"))
    assert state_of(unstartable) == ("failing", "it did not start: the port is taken")
    unstartable.watch.started()  # a start that succeeds forgets the failure
    unstartable.stay_stopped = True
    assert state_of(unstartable) == ("asleep", "stopped by an operator")


def row(name: str, state: str = "awake", **figures) -> Row:
    base = {"jobs_running": 0, "jobs_queued": 0, "failed_hour": 0, "failed_day": 0, "next_fire_at": None}
    return Row(name=name, mode=SLEEPY, state=state, reason=None, requests_by_hour=[0] * 24, **{**base, **figures})


def test_the_fleet_sorts_by_any_column_and_filters_by_state_and_name():
    rows = [row("bo", jobs_queued=3, next_fire_at=50.0), row("al", "asleep", next_fire_at=10.0), row("cy", "failing")]
    names = lambda chosen: [each.name for each in chosen]  # noqa: E731
    assert names(present.chosen(rows, sort="name", descending=False, state="", name="")) == ["al", "bo", "cy"]
    assert names(present.chosen(rows, sort="queued", descending=True, state="", name="")) == ["bo", "al", "cy"]
    # No fire sorts last, ascending.
    assert names(present.chosen(rows, sort="next_fire", descending=False, state="", name="")) == ["al", "bo", "cy"]
    assert names(present.chosen(rows, sort="state", descending=False, state="", name="")) == ["al", "bo", "cy"]
    assert names(present.chosen(rows, sort="nonsense", descending=False, state="failing", name="")) == ["cy"]
    assert names(present.chosen(rows, sort="name", descending=False, state="", name="B")) == ["bo"]


def test_a_chart_has_a_point_a_bucket_and_breaks_at_a_missing_one():
    assert [len(segment.split()) for segment in scaled([1.0, 2.0, None, 4.0, 0.0], 4.0, 100, 50)] == [2, 2]
    first = scaled([0.0, 4.0], 4.0, 100, 50)[0].split()
    assert first == ["4.0,46.0", "96.0,4.0"]  # 0 at the bottom, the top at the top, inside the padding
    assert len(sparkline([0] * 23 + [5]).split()) == 24
    assert memory_by([(0.0, 10), (30.0, 30), (130.0, 5)], 0.0, 60.0, 3) == [30, None, 5]


def test_a_chart_s_legend_totals_its_counts_and_labels_the_latest_and_its_axes_read_as_values():
    start = 1796544000.0 - 59 * 60  # a minute view ending at 2026-12-06 08:00 UTC
    calls = [0] * 60
    calls[57], calls[58] = 19, 6  # a spike, then an empty minute
    drawn = charts.chart("Calls", "calls", {"calls_ok": ("answered", calls)}, start, 60.0)
    (line,) = drawn.lines
    assert (line.summary, drawn.summary_word, drawn.window) == ("25", "total", "in the last hour")
    assert (line.latest_label, line.latest) == ("latest minute", "0")
    assert [tick.label for tick in drawn.y_ticks] == ["0", "10", "20"] and drawn.top == 20
    assert [tick.label for tick in drawn.x_ticks] == ["07:15", "07:30", "07:45", "08:00"]
    assert drawn.buckets[57].words == "07:58 UTC: answered 19"
    # A level's summary is its highest; a gap at the end dates the latest reading.
    memory = [None] * 22 + [412.5, None]
    day = charts.chart("Memory", "MB", {"memory": ("memory", memory)}, 1796544000.0 - 23 * 3600, 3600.0, charts.LEVEL)
    (alone,) = day.lines
    assert (alone.summary, day.summary_word, alone.latest) == ("412 MB", "highest", "412 MB")
    assert alone.latest_label == "latest at 6 Dec 07:00" and alone.segments == [] and len(alone.dots) == 1
    assert [tick.label for tick in day.x_ticks] == ["5 Dec 12:00", "5 Dec 18:00", "6 Dec 00:00", "6 Dec 06:00"]
    assert charts.nice_top(0.37, whole=False) == 0.5 and charts.nice_top(3, whole=True) == 5
    queue = charts.chart("Queue depth", "jobs", {"queue": ("queued", [0, 1, 0])}, 0.0, 60.0, charts.LEVEL)
    assert [tick.label for tick in queue.y_ticks] == ["0", "1"]  # never half a job queued
    assert queue.lines[0].summary == "1" and queue.summary_word == "highest"


def test_times_and_sizes_read_as_a_person_reads_them():
    assert present.span(59) == "59 s" and present.span(3600 + 120) == "1 h 2 min" and present.span(3 * 86400) == "3 d 0 h"
    assert present.ago(100.0, now=160.0) == "1 min ago" and present.ago(200.0, now=140.0) == "in 1 min"
    assert present.megabytes(412_000_000) == "412 MB" and present.megabytes(None) == ""


class Names:
    """A fleet of known names, all the search's parser asks of one."""

    def names(self) -> list[str]:
        return ["ada", "bo"]


def test_the_search_refuses_what_it_cannot_use_and_reads_times_both_ways():
    search, personas = parsed({"state": "done", "since": "2026-12-06T08:00", "until": "1796600000", "persona": "bo"}, Names())
    assert (search.state, search.since, search.until, personas) == ("done", 1796544000.0, 1796600000.0, ["bo"])
    assert parsed({"plugin": "", "job_id": " "}, Names())[1] == ["ada", "bo"]  # a form's empty fields are no filter
    for query, said in (
        ({"sort": "x"}, "Unknown parameter 'sort'"),
        ({"state": "asleep"}, "Invalid parameter 'state'"),
        ({"plugin": "nofamily"}, "Invalid parameter 'plugin'"),
        ({"since": "soon"}, "Invalid parameter 'since'"),
        ({"limit": "1001"}, "Invalid parameter 'limit'"),
        ({"persona": "ada,cy"}, "no persona cy"),
        ({"job_id": "a/b"}, "Invalid parameter 'job_id'"),
    ):
        with pytest.raises(SearchInvalid, match=said):
            parsed(query, Names())


def test_a_sign_in_sends_you_only_to_the_console():
    assert safe_next("/console/p/ada/?scale=hour") == "/console/p/ada/?scale=hour"
    for elsewhere in ("https://evil.example/", "//evil.example/console/", "/console//evil", "/admin/", "/console/\\evil", None):
        assert safe_next(elsewhere) == "/console/"


def test_the_audit_shown_is_the_newest_of_its_end_whatever_its_length(settings, tmp_path):
    settings.WAKER_PERSONAS = tmp_path / "personas.json"
    assert actions.audit_lines("ada") == []
    for n in range(4000):  # past AUDIT_TAIL_BYTES: only its end is read
        actions.audit(who="session abcd1234", address="127.0.0.1", persona=("ada", "bo")[n % 2], action="cancel",
                      target=f"job{n}", outcome="done", detail="x" * 40)
    assert (tmp_path / actions.AUDIT_FILE).stat().st_size > actions.AUDIT_TAIL_BYTES
    shown = actions.audit_lines("ada", count=3)
    assert [line["target"] for line in shown] == ["job3998", "job3996", "job3994"]
    with (tmp_path / actions.AUDIT_FILE).open("a") as file:
        file.write('{"persona": "ada", "tar')  # a line being written
    assert actions.audit_lines(None, count=1)[0]["target"] == "job3999"
