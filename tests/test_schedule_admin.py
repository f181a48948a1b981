"""The schedules' admin, the one that edits: its form refuses what the API
refuses (the same rules), its saves work out the next fire, and its actions
pause and resume."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from schedules import rules, services
from schedules.models import Schedule


@pytest.fixture
def operator(client, db):
    User.objects.create_superuser("operator", "op@example.com", "pw")
    client.login(username="operator", password="pw")
    return client


FORM = {
    "name": "admin-made", "cron": "*/10 * * * *", "timezone": "America/New_York", "page_id": "any",
    "plugin": "web/state", "params": "{}", "callback_url": "", "result_ttl": "60", "queue_timeout": "",
    "priority": "2", "retry": "0", "retry_backoff": "5", "overlap": "queue", "catchup_s": "0",
}


def test_the_admin_adds_a_schedule_through_the_same_rules(operator):
    refused = operator.post("/admin/schedules/schedule/add/", {**FORM, "cron": "0 25 * * *"})
    assert refused.status_code == 200 and b"Bad hour" in refused.content
    refused = operator.post("/admin/schedules/schedule/add/", {**FORM, "plugin": "web/nope"})
    assert b"no plugin action web/nope" in refused.content
    refused = operator.post("/admin/schedules/schedule/add/", {**FORM, "callback_url": "https://hooks.example/1"})
    assert b"exactly one" in refused.content
    assert Schedule.objects.count() == 0
    added = operator.post("/admin/schedules/schedule/add/", FORM)
    assert added.status_code == 302, added.content.decode()[-3000:]
    schedule = Schedule.objects.get(name="admin-made")
    assert len(schedule.id) == 16 and schedule.next_fire_at is not None and schedule.overlap == "queue"
    listing = operator.get("/admin/schedules/schedule/").content
    assert b"admin-made" in listing and b"*/10 * * * *" in listing and b"America/New_York" in listing
    refused = operator.post(f"/admin/schedules/schedule/{schedule.id}/change/", {**FORM, "params": '{"x": 1}'})
    assert b"Unknown parameter" in refused.content and b"&#x27;x&#x27;" in refused.content  # web/state declares none
    changed = operator.post(f"/admin/schedules/schedule/{schedule.id}/change/", {**FORM, "priority": "3"})
    assert changed.status_code == 302 and Schedule.objects.get(id=schedule.id).priority == 3
    refused = operator.post(f"/admin/schedules/schedule/{schedule.id}/change/", {**FORM, "timezone": "Mars/Olympus"})
    assert b"not a time zone" in refused.content
    assert Schedule.objects.get(id=schedule.id).timezone == "America/New_York"


def test_pause_and_resume_actions(operator):
    fields = {**FORM, "params": {}, "result_ttl": 60, "callback_url": None, "queue_timeout": None, "priority": 2, "retry": 0,
              "retry_backoff": 5, "catchup_s": 0}
    schedule = services.create_schedule(fields=rules.clean(fields), now=1000.0)
    operator.post("/admin/schedules/schedule/", {"action": "pause", "_selected_action": [schedule.id]})
    assert Schedule.objects.get(id=schedule.id).paused
    assert b"paused" in operator.get("/admin/schedules/schedule/").content
    operator.post("/admin/schedules/schedule/", {"action": "resume", "_selected_action": [schedule.id]})
    resumed = Schedule.objects.get(id=schedule.id)
    assert not resumed.paused and resumed.next_fire_at > schedule.next_fire_at  # from now, not from before


def test_the_admin_adds_no_schedule_past_schedules_max(operator, settings):
    settings.SCHEDULES_MAX = 1
    assert operator.post("/admin/schedules/schedule/add/", FORM).status_code == 302
    refused = operator.post("/admin/schedules/schedule/add/", {**FORM, "name": "one-too-many"})
    assert refused.status_code == 200 and b"All 1 schedules exist (SCHEDULES_MAX); delete one first." in refused.content
    assert list(Schedule.objects.values_list("name", flat=True)) == ["admin-made"]
    kept = Schedule.objects.get(name="admin-made")
    changed = operator.post(f"/admin/schedules/schedule/{kept.id}/change/", {**FORM, "priority": "3"})
    assert changed.status_code == 302 and Schedule.objects.get(id=kept.id).priority == 3  # a change is no new schedule
