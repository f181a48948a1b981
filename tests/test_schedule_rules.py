"""The schedules' rules in-process, against Django's test database (a real
SQLite file): every field checked before anything is stored (through the
API's own view and the rules the admin shares), the overlap decision, a
fire's wait for its page, catch-up and missed fires with a clock the test
gives, and the services' changes. No worker, no browser."""

from __future__ import annotations

import json
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from core.errors import InvalidSchedule, NoSuchSchedule, ScheduleNameTaken
from schedules import rules, services
from schedules.models import Schedule
from tests.support.runtime import RuntimeAsyncClient
from worker.runtime import Runtime

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "rules-test-key-0123456789abcdef"
VALID = {
    "name": "alice-following",
    "cron": "0 9 * * 1-5",
    "timezone": "Europe/Paris",
    "page_id": "main",
    "plugin": "demo/get-following",
    "params": {"handle": "alice"},
    "result_ttl": 600,
}


@pytest.fixture(autouse=True)
def key(settings):
    settings.PENELOPE_KEY = KEY
    settings.PENELOPE_READ_KEYS = []


def utc(wall: str) -> float:
    return datetime.fromisoformat(wall).replace(tzinfo=ZoneInfo("UTC")).timestamp()


# --- every field, before anything is stored -----------------------------------------------------

BAD_FIELDS = [
    ({"name": ""}, "name", "may not be blank"),
    ({"cron": None}, "cron", "may not be null"),
    ({"name": "has space"}, "name", "1 to 100 characters"),
    ({"name": "0123456789abcdef"}, "name", "schedule's id"),
    ({"name": 7}, "name", "must be a string"),
    ({"cron": "0 9 * *"}, "cron", "5 fields"),
    ({"cron": "0 25 * * *"}, "cron", "Bad hour"),
    ({"timezone": "Mars/Olympus"}, "timezone", "not a time zone"),
    ({"page_id": "Main!"}, "page_id", "1 to 32 characters"),
    ({"page_id": "schedules"}, "page_id", "a word the API uses"),
    ({"plugin": "demo/nope"}, "plugin", "no plugin action demo/nope"),
    ({"plugin": "nofamily"}, "plugin", None),
    ({"params": {}}, "params.handle", "required"),
    ({"params": {"handle": "alice", "limit": "many"}}, "params.limit", "valid integer"),
    ({"params": []}, "params", "JSON object"),
    ({"result_ttl": None}, "result_ttl", "exactly one"),
    ({"callback_url": "http://127.0.0.1:9/hook"}, "callback_url", "exactly one"),
    ({"result_ttl": None, "callback_url": "ftp://example.com/"}, "callback_url", "X-Callback-Url must be an absolute"),
    ({"result_ttl": 0}, "result_ttl", "X-Result-Ttl must be a number of seconds"),
    ({"result_ttl": 601}, "result_ttl", "at most 600"),
    ({"result_ttl": "60"}, "result_ttl", "must be a number"),
    ({"queue_timeout": 3601}, "queue_timeout", "X-Queue-Timeout must be"),
    ({"priority": 10}, "priority", "X-Priority must be"),
    ({"priority": True}, "priority", "whole number"),
    ({"retry": 11}, "retry", "X-Retry must be"),
    ({"retry": 2, "retry_backoff": 601}, "retry_backoff", "X-Retry-Backoff must be"),
    ({"overlap": "buffer_one"}, "overlap", "not a valid choice"),
    ({"catchup_s": -1}, "catchup_s", "from 0 to"),
    ({"paused": "yes"}, "paused", "true or false"),
    ({"overlpa": "skip"}, "overlpa", "not a field of a schedule"),
]


async def api(method: str, path: str, body: dict | None = None):
    # AsyncClient sends extra keywords as the ASGI scope's headers; each call
    # is served by a runtime of its own, as a fresh worker's would be.
    data = json.dumps(body) if body is not None else ""
    send = getattr(RuntimeAsyncClient(Runtime()), method)
    return await send(f"/api/v1/{path}", data=data, content_type="application/json", AUTHORIZATION=f"Bearer {KEY}")


@pytest.mark.parametrize(("change", "field", "said"), BAD_FIELDS)
async def test_each_bad_field_answers_400_naming_it_and_stores_nothing(change: dict, field: str, said: str | None):
    response = await api("post", "schedules", {**VALID, **change})
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error.startswith(f"Invalid parameter '{field}'"), error
    assert said is None or said in error, error
    assert await Schedule.objects.acount() == 0


async def test_a_valid_schedule_is_created_with_its_defaults_and_first_fire():
    response = await api("post", "schedules", VALID)
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["success"] is True and body["page_id"] == "main" and len(body["schedule_id"]) == 16
    assert (body["overlap"], body["catchup_s"], body["priority"], body["retry"], body["paused"]) == ("skip", 0.0, 0, 0, False)
    assert body["queue_timeout"] is None and body["callback_url"] is None and body["result_ttl"] == 600
    fire = datetime.fromtimestamp(body["next_fire_at"], ZoneInfo("Europe/Paris"))
    assert (fire.hour, fire.minute, fire.weekday() < 5) == (9, 0, True)
    assert (await api("post", "schedules", VALID)).status_code == 409  # the same name
    assert await Schedule.objects.acount() == 1


async def test_patch_checks_the_merged_schedule_and_changes_nothing_when_refused():
    created = (await api("post", "schedules", VALID)).json()
    path = f"schedules/{created['schedule_id']}"
    refused = await api("patch", path, {"plugin": "web/open"})  # its params have no `url`
    assert refused.status_code == 400 and refused.json()["error"].startswith("Invalid parameter 'params.url'")
    swapped = await api("patch", path, {"result_ttl": None, "callback_url": "https://hooks.example/42", "cron": "*/5 * * * * *"})
    assert swapped.status_code == 200, swapped.content
    assert (swapped.json()["callback_url"], swapped.json()["result_ttl"]) == ("https://hooks.example/42", None)
    stored = await Schedule.objects.aget(id=created["schedule_id"])
    assert stored.cron == "*/5 * * * * *" and stored.next_fire_at < created["next_fire_at"]
    assert (await api("patch", "schedules/0123456789abcdef", {"paused": True})).status_code == 404
    assert (await api("get", "schedules/nope")).status_code == 404
    assert (await api("delete", path)).status_code == 204
    assert (await api("delete", path)).status_code == 404


async def test_webhook_refuse_private_refuses_a_callback_into_loopback(settings):
    settings.WEBHOOK_REFUSE_PRIVATE = True
    body = {**VALID, "result_ttl": None, "callback_url": "http://127.0.0.1:9/hook"}
    response = await api("post", "schedules", body)
    assert response.status_code == 400
    assert response.json()["error"].startswith("Invalid parameter 'callback_url': X-Callback-Url is refused")
    assert await Schedule.objects.acount() == 0


def test_the_rules_complete_a_schedule_and_refuse_with_the_field_named():
    cleaned = rules.clean({**VALID, "retry": 3, "queue_timeout": 30})
    assert cleaned["retry"] == 3 and cleaned["retry_backoff"] == 5.0 and cleaned["queue_timeout"] == 30.0
    assert cleaned["overlap"] == "skip" and cleaned["params"] == {"handle": "alice"}
    with pytest.raises(InvalidSchedule) as refused:
        rules.clean({**VALID, "timezone": "Nowhere/Else"})
    assert refused.value.field == "timezone"


# --- the overlap, a fire's wait, catch-up ---------------------------------------------------------


def test_the_overlap_decision():
    assert rules.overlap_decision("skip", previous_live=False) == rules.START
    assert rules.overlap_decision("skip", previous_live=True) == rules.SKIP
    assert rules.overlap_decision("queue", previous_live=True) == rules.START
    assert rules.overlap_decision("cancel_running", previous_live=True) == rules.CANCEL_THEN_START
    assert rules.overlap_decision("cancel_running", previous_live=False) == rules.START


def test_a_fire_waits_for_its_page_until_the_next_fire_at_most_an_hour():
    assert rules.fire_queue_timeout(12.5, 100.0, 160.0) == 12.5  # the schedule's own
    assert rules.fire_queue_timeout(None, 100.0, 160.0) == 60.0
    assert rules.fire_queue_timeout(None, 100.0, 100.2) == 1.0
    assert rules.fire_queue_timeout(None, 100.0, 100.0 + 86400) == 3600.0
    assert rules.fire_queue_timeout(None, 100.0, None) == 3600.0


def test_missed_fires_are_counted_and_the_latest_fires_when_recent_enough():
    hourly, due = "0 * * * *", utc("2026-05-04T06:00")
    now = utc("2026-05-04T09:20")  # stopped through 06:00, 07:00, 08:00 and 09:00
    none = rules.catch_up(cron=hourly, zone="UTC", due=due, now=now, catchup_s=0)
    assert (none.fire_at, none.missed, none.next_fire_at) == (None, 4, utc("2026-05-04T10:00"))
    recent = rules.catch_up(cron=hourly, zone="UTC", due=due, now=now, catchup_s=1800)
    assert (recent.fire_at, recent.missed) == (utc("2026-05-04T09:00"), 3)
    too_old = rules.catch_up(cron=hourly, zone="UTC", due=due, now=now, catchup_s=1200)  # 09:00 is 20 min old
    assert (too_old.fire_at, too_old.missed) == (None, 4)
    one = rules.catch_up(cron=hourly, zone="UTC", due=due, now=utc("2026-05-04T06:00:30"), catchup_s=60)
    assert (one.fire_at, one.missed, one.next_fire_at) == (due, 0, utc("2026-05-04T07:00"))


def test_a_long_stop_is_counted_to_the_bound_and_still_fires_the_latest(monkeypatch):
    monkeypatch.setattr(rules.timing, "MAX_COUNTED_FIRES", 100)
    due = utc("2026-05-04T06:00")
    plan = rules.catch_up(cron="* * * * * *", zone="UTC", due=due, now=due + 500.5, catchup_s=5)
    assert (plan.fire_at, plan.next_fire_at) == (due + 500, due + 501)


# --- the services ------------------------------------------------------------------------------------


def test_pause_resume_and_a_requested_fire():
    created = services.create_schedule(fields=rules.clean({**VALID, "cron": "0 * * * *", "timezone": "UTC"}), now=utc("2026-05-04T06:30"))
    assert created.next_fire_at == utc("2026-05-04T07:00")
    paused = services.set_paused(name_or_id=created.name, paused=True, now=utc("2026-05-04T06:40"))
    assert paused.paused and Schedule.objects.due(utc("2026-05-04T07:30")).count() == 0
    resumed = services.set_paused(name_or_id=created.id, paused=False, now=utc("2026-05-04T09:10"))
    assert resumed.next_fire_at == utc("2026-05-04T10:00")  # the hours while paused are not missed
    assert Schedule.objects.get(id=created.id).missed == 0
    services.request_fire(name_or_id=created.name, now=utc("2026-05-04T09:11"))
    assert [s.id for s in Schedule.objects.due(utc("2026-05-04T09:12"))] == [created.id]
    with pytest.raises(NoSuchSchedule):
        services.set_paused(name_or_id="nobody", paused=True, now=0)
    with pytest.raises(ScheduleNameTaken):
        services.create_schedule(fields=rules.clean(VALID), now=0)


def test_a_fire_is_claimed_once_and_an_edit_in_between_wins():
    schedule = services.create_schedule(fields=rules.clean({**VALID, "cron": "* * * * * *"}), now=1000.0)
    assert schedule.next_fire_at == 1001.0
    assert schedule.claim_fire(due=1001.0, next_fire_at=1002.0)
    assert not schedule.claim_fire(due=1001.0, next_fire_at=1002.0)  # a second loop, or a stale read
    services.set_paused(name_or_id=schedule.id, paused=True, now=1001.5)
    assert not schedule.claim_fire(due=1002.0, next_fire_at=1003.0)  # paused meanwhile
    assert schedule.record_missed(count=3, next_fire_at=1010.0, expected=1002.0)
    assert Schedule.objects.get(id=schedule.id).missed == 3


def test_an_edit_that_keeps_the_timing_keeps_a_due_fire():
    created = services.create_schedule(fields=rules.clean({**VALID, "cron": "0 * * * *", "timezone": "UTC"}), now=utc("2026-05-04T06:30"))
    due = created.next_fire_at
    # Just after 07:00, before the loop claimed that fire: the edit leaves it due.
    edited = services.update_schedule(
        schedule_id=created.id, fields=rules.clean({**VALID, "cron": "0 * * * *", "timezone": "UTC", "priority": 3}),
        now=due + 0.01,
    )
    assert edited.next_fire_at == due and edited.claim_fire(due=due, next_fire_at=due + 3600)
    # A new cron starts from now.
    moved = services.update_schedule(
        schedule_id=created.id, fields=rules.clean({**VALID, "cron": "30 * * * *", "timezone": "UTC"}), now=due + 60,
    )
    assert moved.next_fire_at == due + 1800


def test_the_next_wake_in_the_store_follows_the_loop_whatever_was_there(settings, tmp_path):
    from core.awake import read_next_wake, write_next_wake
    from core.runtime import Tracker

    settings.STORE_DIR = tmp_path
    write_next_wake(tmp_path, 1000.0)  # left by `manage.py schedules trigger`, or an earlier run
    fresh = Tracker()
    fresh.wake_at(None)  # a worker whose schedules are all paused
    assert read_next_wake(tmp_path) is None and fresh.next_wake_at is None
    fresh.wake_at(2000.25)
    write_next_wake(tmp_path, 1000.0)  # a command beside the running worker
    fresh.wake_at(2000.25)  # the same instant as in memory: the store is put right all the same
    assert read_next_wake(tmp_path) == 2000.25
