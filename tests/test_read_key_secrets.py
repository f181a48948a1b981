"""A read key (PENELOPE_READ_KEYS) sees nothing that lets it act or pass for
the persona: against a real worker, secrets are planted (a cookie's value
through web/cookies, a callback URL's user-info and query string), a job
carries them, and every answer a read key gets about it (poll, long-poll,
job list, event socket) is searched for them, while the full key still
sees them all. A read key's requests do not keep a sleepy worker awake:
in-process on the API's gate, and on the real worker's activity. What a
read key may not do is refused naming it, in-process."""

from __future__ import annotations

import json
import secrets

import httpx
import pytest
from django.http import JsonResponse
from websockets.sync.client import connect

from activity.middleware import ApiAccountingMiddleware
from core.auth import HIDDEN, hide_paths, secret_path
from harness.receiver import Receiver
from harness.waker import WakerProcess
from harness.worker import TEST_KEY, wait_until
from plugins.framework import Family

READER = "read-only-key-0123456789abcdefghijklm"
COOKIE_SECRET = "cookie-" + secrets.token_hex(8)
PASSWORD_SECRET = "password-" + secrets.token_hex(8)
TOKEN_SECRET = "token-" + secrets.token_hex(8)
PLANTED = (COOKIE_SECRET, PASSWORD_SECRET, TOKEN_SECRET)


def leaked(text: str) -> list[str]:
    return [secret for secret in PLANTED if secret in text]


def events_socket(worker, key: str):
    return connect(f"ws://127.0.0.1:{worker.port}/api/v1/events", additional_headers={"Authorization": f"Bearer {key}"})


def until_ended(socket, job_id: str) -> list[str]:
    """Every event the socket sends up to and with the job's `job.ended`, as sent."""
    texts = []
    while True:
        text = socket.recv(timeout=30)
        texts.append(text)
        event = json.loads(text)
        if event["event"] == "job.ended" and event["job_id"] == job_id:
            return texts


@pytest.fixture(scope="module")
def reading(tmp_path_factory):
    from harness.worker import WorkerProcess
    from tests.conftest import worker_env

    worker = WorkerProcess(tmp_path_factory.mktemp("store"), env=worker_env(PENELOPE_READ_KEYS=READER)).start()
    yield worker
    worker.stop()


def test_a_read_key_sees_no_cookie_value_nor_callback_credentials(reading, site):
    full = reading.client()
    reader = httpx.Client(base_url=reading.base_url + "/api/v1", headers={"Authorization": f"Bearer {READER}"}, timeout=60)
    with Receiver() as receiver, full, reader:
        planted = full.post(
            "/main/plugin/web/cookies",
            json={"op": "set", "cookies": [{"name": "session", "value": COOKIE_SECRET, "url": site.url}]},
        )
        assert planted.status_code == 200, planted.text
        # The receiver refuses each delivery (500), so the webhook job stays held and can be read.
        host_and_port = receiver.url.removeprefix("http://")
        callback = f"http://hook:{PASSWORD_SECRET}@{host_and_port}/500/cookies?token={TOKEN_SECRET}"
        with events_socket(reading, READER) as read_socket, events_socket(reading, TEST_KEY) as full_socket:
            started = full.post(
                "/main/plugin/web/cookies", json={"op": "list", "url": site.url}, headers={"X-Callback-Url": callback}
            )
            assert started.status_code == 202, started.text
            job_id = started.json()["job_id"]
            read_events = until_ended(read_socket, job_id)
            full_events = until_ended(full_socket, job_id)

        for text in read_events:
            assert leaked(text) == [], text
        answers = {
            "poll": reader.get(f"/jobs/{job_id}"),
            "long-poll": reader.get(f"/jobs/{job_id}", params={"wait": 1}),
            "list": reader.get("/jobs"),
            "list of the page": reader.get("/jobs", params={"page_id": "main"}),
        }
        for name, answer in answers.items():
            assert answer.status_code == 200, (name, answer.text)
            assert leaked(answer.text) == [], (name, answer.text)

        # What a read key is shown instead: the callback as the logs show it, the cookie's value as "…".
        poll = answers["poll"].json()
        assert poll["callback"] == f"http://{host_and_port}/500/cookies?{HIDDEN}"
        assert poll["result"]["cookies"] == [
            {**cookie, "value": HIDDEN} for cookie in full.get(f"/jobs/{job_id}").json()["result"]["cookies"]
        ]
        assert [cookie["name"] for cookie in poll["result"]["cookies"]] == ["session"]
        ended = json.loads(read_events[-1])["job"]
        assert ended["callback"] == poll["callback"] and ended["result"]["cookies"][0]["value"] == HIDDEN

        # The full key's answers are as they were: every secret, whole.
        assert full.get(f"/jobs/{job_id}").json()["callback"] == callback
        assert leaked(full.get(f"/jobs/{job_id}").text) == list(PLANTED)
        assert leaked(full.get("/jobs").text) == [PASSWORD_SECRET, TOKEN_SECRET]
        assert leaked(full_events[-1]) == list(PLANTED)
        # And the webhook, the receiver's own, carries the result whole.
        hit = wait_until(lambda: receiver.received(f"/500/cookies?token={TOKEN_SECRET}"), what="a delivery")[0]
        assert COOKIE_SECRET in hit.body.decode()


def test_a_read_key_sees_a_schedules_callback_as_the_logs_show_it(reading):
    reader = httpx.Client(base_url=reading.base_url + "/api/v1", headers={"Authorization": f"Bearer {READER}"}, timeout=60)
    callback = f"http://hook:{PASSWORD_SECRET}@hooks.example/in?token={TOKEN_SECRET}"
    with reading.client() as full, reader:
        made = full.post("/schedules", json={
            "name": "nightly", "cron": "0 3 * * *", "page_id": "main", "plugin": "web/state", "callback_url": callback,
        })
        assert made.status_code == 201, made.text
        listed, one = reader.get("/schedules"), reader.get(f"/schedules/{made.json()['schedule_id']}")
        for answer in (listed, one):
            assert answer.status_code == 200 and leaked(answer.text) == [], answer.text
        assert one.json()["callback_url"] == f"http://hooks.example/in?{HIDDEN}"
        assert full.get(f"/schedules/{made.json()['schedule_id']}").json()["callback_url"] == callback
        full.delete(f"/schedules/{made.json()['schedule_id']}")


def test_a_read_keys_polls_leave_the_idle_clock_alone(reading):
    with reading.client() as full:
        job_id = full.post(
            "/main/plugin/testing/browser-wait", json={"ms": 100}, headers={"X-Result-Ttl": "60"}
        ).json()["job_id"]
        assert full.get(f"/jobs/{job_id}", params={"wait": 30}).json()["state"] == "done"
        before = full.get("/activity").json()
        with httpx.Client(
            base_url=reading.base_url + "/api/v1", headers={"Authorization": f"Bearer {READER}"}, timeout=60
        ) as reader:
            for path, params in ((f"/jobs/{job_id}", {}), (f"/jobs/{job_id}", {"wait": 1}), ("/jobs", {}), ("/pages", {})):
                assert reader.get(path, params=params).status_code == 200, path
        after = full.get("/activity").json()
        assert after["last_activity_at"] == before["last_activity_at"]
        assert after["idle_seconds"] >= before["idle_seconds"]
        # The full key's poll is client activity, as before.
        full.get(f"/jobs/{job_id}")
        assert full.get("/activity").json()["last_activity_at"] > before["last_activity_at"]


def test_the_openapi_document_says_what_a_read_key_is_not_shown(reading):
    with httpx.Client(headers={"Authorization": f"Bearer {READER}"}) as reader:
        document = reader.get(reading.base_url + "/api/v1/schema").json()
    scheme = document["components"]["securitySchemes"]["bearerAuth"]["description"]
    assert "PENELOPE_READ_KEYS" in scheme and "sleepy worker awake" in scheme
    poll = document["components"]["schemas"]["JobPoll"]["properties"]
    assert f"shows as `{HIDDEN}`" in poll["result"]["description"]
    assert "without its user-info" in poll["callback"]["description"]


def test_through_the_waker_a_read_key_neither_keeps_a_sleepy_worker_awake_nor_wakes_it(tmp_path):
    env = {"PENELOPE_KEY": TEST_KEY, "PENELOPE_READ_KEYS": READER}
    waker = WakerProcess(tmp_path, [{"name": "p1", "mode": "sleepy", "idle_timeout_s": 2, "env": env}],
                         env={"PENELOPE_PLUGINS": "plugins.web", "WAKER_POLL_S": "0.2"})
    try:
        waker.start()
        with waker.through("p1", key=TEST_KEY) as full:
            assert full.get("/pages").status_code == 200  # wakes it
        with waker.through("p1", key=READER) as reader:

            def stopped_while_read():
                # A dashboard that never stops reading: a list, then a poll.
                assert reader.get("/jobs").status_code in (200, 503)
                reader.get("/jobs/0123456789abcdef")
                return waker.persona("p1")["state"] == "stopped"

            wait_until(stopped_while_read, timeout=60, interval=0, what="the idle worker to stop under a read key's polls")
            refused = reader.get("/pages")
            assert refused.status_code == 503 and "A read key never wakes a worker" in refused.json()["error"]
            assert waker.persona("p1")["state"] == "stopped"
    finally:
        waker.stop()


# --- in-process: the gate and the secret paths -------------------------------------------


@pytest.fixture
def keys(settings):
    settings.PENELOPE_KEY = TEST_KEY
    settings.PENELOPE_READ_KEYS = [READER]


@pytest.mark.parametrize(("key", "counts"), [(READER, False), (TEST_KEY, True)])
async def test_only_the_full_keys_requests_are_client_activity(keys, key, counts, runtime, request_factory):
    in_flight_during = []
    tracker = runtime.tracker

    async def view(request):
        in_flight_during.append(tracker.requests_in_flight)
        return JsonResponse({"success": True})

    gate = ApiAccountingMiddleware(view)
    tracker.last_activity_at = 1.0
    request = request_factory.get("/api/v1/jobs", headers={"Authorization": f"Bearer {key}"})
    await gate(request)
    assert in_flight_during == [1 if counts else 0]
    assert tracker.requests_in_flight == 0
    assert (tracker.last_activity_at > 1.0) is counts


@pytest.mark.parametrize(
    ("method", "path", "headers", "refused"),
    [
        ("post", "/api/v1/schedules", {}, "creating a schedule"),
        ("patch", "/api/v1/schedules/3c0ffee0d15ea5e1", {}, "changing a schedule"),
        ("delete", "/api/v1/schedules/3c0ffee0d15ea5e1", {}, "deleting a schedule"),
        ("post", "/api/v1/schedules/3c0ffee0d15ea5e1/trigger", {}, "firing a schedule"),
        ("post", "/api/v1/main/plugin/demo/flaky", {"X-Result-Ttl": "60"}, "starting a job of demo/flaky"),
        ("get", "/api/v1/main/plugin/demo/flaky", {}, "calling plugin demo/flaky"),
        ("post", "/api/v1/main/primitive/evaluate", {}, "calling primitive evaluate"),
        ("post", "/api/v1/pages", {}, "opening a page"),
        ("delete", "/api/v1/main", {}, "closing a page"),
        ("post", "/api/v1/main/lease", {}, "taking or renewing a lease"),
        ("post", "/api/v1/jobs/0123456789abcdef/rerun", {}, "re-running a job"),
    ],
)
async def test_a_read_keys_refusal_names_what_it_tried(keys, async_client, method, path, headers, refused):
    body = {} if method == "get" else {"data": "{}", "content_type": "application/json"}
    response = await getattr(async_client, method)(path, **body, headers={"Authorization": f"Bearer {READER}", **headers})
    assert response.status_code == 403, response.content
    assert response.json()["error"] == f"This key may only read (PENELOPE_READ_KEYS): {refused} needs the worker's key."


def test_secret_paths_hide_what_they_name_and_nothing_else():
    result = {
        "success": True,
        "cookies": [{"name": "a", "value": "s1"}, {"name": "b"}, "not-an-object"],
        "session": {"token": "s2", "user": "ann"},
        "tokens": {"x": "s3", "y": "s4"},
    }
    paths = tuple(secret_path(path) for path in ("cookies.*.value", "session.token", "tokens.*", "absent.deep"))
    hidden = hide_paths(result, paths)
    assert hidden == {
        "success": True,
        "cookies": [{"name": "a", "value": HIDDEN}, {"name": "b"}, "not-an-object"],
        "session": {"token": HIDDEN, "user": "ann"},
        "tokens": {"x": HIDDEN, "y": HIDDEN},
    }
    assert result["cookies"][0]["value"] == "s1" and result["session"]["token"] == "s2"  # the original is untouched
    # An error's envelope has none of the paths: it is shown as it is.
    envelope = {"success": False, "error": "Timed out.", "page_id": "main"}
    assert hide_paths(envelope, paths) == envelope


@pytest.mark.parametrize("bad", ["", "cookies..value", ".value", 7])
def test_a_bad_secret_path_is_refused_when_the_family_loads(bad):
    with pytest.raises(TypeError, match="dotted path"):
        Family("sample").action("get", secret=[bad])


def test_events_replayed_to_a_read_key_are_redacted_exactly_as_live_ones(reading, site):
    """A read key's socket that catches up (`?since=<id>`) is sent each event
    as a read key's live socket was: the same text, no secret in it."""
    with Receiver() as receiver, reading.client() as full:
        host_and_port = receiver.url.removeprefix("http://")
        callback = f"http://hook:{PASSWORD_SECRET}@{host_and_port}/500/replayed?token={TOKEN_SECRET}"
        planted = full.post(
            "/main/plugin/web/cookies",
            json={"op": "set", "cookies": [{"name": "session", "value": COOKIE_SECRET, "url": site.url}]},
        )
        assert planted.status_code == 200, planted.text
        with events_socket(reading, READER) as live_socket:
            started = full.post(
                "/main/plugin/web/cookies", json={"op": "list", "url": site.url}, headers={"X-Callback-Url": callback}
            )
            assert started.status_code == 202, started.text
            job_id = started.json()["job_id"]
            live = [text for text in until_ended(live_socket, job_id) if json.loads(text)["job_id"] == job_id]
        since = json.loads(live[0])["id"] - 1
        replay = connect(
            f"ws://127.0.0.1:{reading.port}/api/v1/events?since={since}&job={job_id}",
            additional_headers={"Authorization": f"Bearer {READER}"},
        )
        with replay:
            replayed = until_ended(replay, job_id)
    assert replayed == live  # the same texts, redacted alike
    assert all(leaked(text) == [] for text in replayed)
    assert json.loads(replayed[-1])["job"]["result"]["cookies"][0]["value"] == HIDDEN
