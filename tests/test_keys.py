"""Keys with roles on a real worker and through the real waker: read keys
(PENELOPE_READ_KEYS) read and nothing else, and PENELOPE_KEY takes two keys
during a rotation, the first signing X-Penelope-Signature."""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
import sys

import httpx
import pytest
from websockets.sync.client import connect

from harness.receiver import Receiver
from harness.waker import WakerProcess
from harness.worker import ROOT, wait_until

FIRST = "first-full-key-0123456789abcdefghij"
SECOND = "second-full-key-0123456789abcdefghi"
READER = "read-only-key-0123456789abcdefghijklm"
READ_ONLY = "This key may only read (PENELOPE_READ_KEYS): {} needs the worker's key."


def client(worker, key: str) -> httpx.Client:
    return httpx.Client(base_url=worker.base_url + "/api/v1", headers={"Authorization": f"Bearer {key}"}, timeout=60)


@pytest.fixture(scope="module")
def rotating(tmp_path_factory):
    from harness.worker import WorkerProcess
    from tests.conftest import worker_env

    worker = WorkerProcess(
        tmp_path_factory.mktemp("store"), key=f"{FIRST} {SECOND}", env=worker_env(PENELOPE_READ_KEYS=READER)
    ).start()
    yield worker
    worker.stop()


def test_both_keys_of_a_rotation_work_and_the_first_signs(rotating):
    with Receiver() as receiver:
        for key in (FIRST, SECOND):
            with client(rotating, key) as api:
                assert api.post("/main/plugin/web/evaluate", json={"expression": "1"}).status_code == 200
        with client(rotating, SECOND) as api:
            started = api.post(
                "/main/plugin/web/evaluate", json={"expression": "2"}, headers={"X-Callback-Url": receiver.url + "/200/signed"}
            )
            assert started.status_code == 202
        hit = wait_until(lambda: receiver.received("/200/signed"), what="the webhook")[0]
        expected = "sha256=" + hmac.new(FIRST.encode(), hit.body, hashlib.sha256).hexdigest()
        assert hit.headers["X-Penelope-Signature"] == expected
    with client(rotating, f"{FIRST} {SECOND}") as api:  # the setting itself is no key
        assert api.get("/pages").status_code == 401


def test_a_read_key_reads_everything_a_dashboard_needs(rotating):
    with client(rotating, FIRST) as full:
        job_id = full.post("/main/plugin/testing/media", json={"size": 10}, headers={"X-Result-Ttl": "60"}).json()["job_id"]
        media = full.get(f"/jobs/{job_id}", params={"wait": 30}).json()["result"]["media"]
    with client(rotating, READER) as reader:
        for path in ("/pages", "/main", f"/jobs/{job_id}", "/jobs", "/activity", "/metrics", "/workload", "/schema"):
            assert reader.get(path).status_code == 200, path
        assert reader.get(f"/jobs/{job_id}", params={"wait": 1}).json()["state"] == "done"
        assert reader.get(rotating.base_url + media["url"]).content == bytes(range(10))
    with connect(
        f"ws://127.0.0.1:{rotating.port}/api/v1/events", additional_headers={"Authorization": f"Bearer {READER}"}
    ) as events:
        with client(rotating, FIRST) as full:
            full.post("/main/plugin/web/evaluate", json={"expression": "3"})
        assert json.loads(events.recv(timeout=20))["event"] == "page.busy"


def test_a_read_key_acts_on_nothing_and_nothing_changes(rotating):
    with client(rotating, FIRST) as full:
        running = full.post(
            "/main/plugin/testing/browser-wait", json={"ms": 60_000}, headers={"X-Result-Ttl": "60"}
        ).json()["job_id"]
        jobs_before = [(job["job_id"], job["state"]) for job in full.get("/jobs").json()["jobs"]]
        pages_before = full.get("/pages").json()["pages"]
    attempts = [
        ("GET", "/main/plugin/web/evaluate?expression=1", None, "calling plugin web/evaluate"),
        ("POST", "/main/plugin/web/evaluate", {"expression": "1"}, "calling plugin web/evaluate"),
        ("POST", "/main/primitive/evaluate", {"expression": "1"}, "calling primitive evaluate"),
        ("POST", "/pages", {"page_id": "spare"}, "opening a page"),
        ("DELETE", "/main", None, "closing a page"),
        ("POST", "/main/lease", {"ttl": 60}, "taking or renewing a lease"),
        ("POST", f"/jobs/{running}/cancel", None, "cancelling a job"),
        ("DELETE", f"/jobs/{running}", None, "forgetting a job"),
        ("POST", "/purge", None, "freeing the idle pages' memory"),
    ]
    with client(rotating, READER) as reader:
        for method, path, body, refused in attempts:
            answer = reader.request(method, path, json=body)
            assert answer.status_code == 403, (method, path, answer.text)
            assert answer.json()["success"] is False and answer.json()["error"] == READ_ONLY.format(refused)
        # A job start with a read key starts nothing either.
        refused = reader.post("/main/plugin/web/evaluate", json={"expression": "1"}, headers={"X-Result-Ttl": "60"})
        assert refused.status_code == 403
    with client(rotating, FIRST) as full:
        assert [(job["job_id"], job["state"]) for job in full.get("/jobs").json()["jobs"]] == jobs_before
        assert [page["page_id"] for page in full.get("/pages").json()["pages"]] == [p["page_id"] for p in pages_before]
        assert full.get("/main").json()["leased"] is False
        assert full.post(f"/jobs/{running}/cancel").status_code == 200


def test_a_short_read_key_stops_the_start_naming_the_setting(tmp_path):
    env = {"PENELOPE_STORE": str(tmp_path / "store"), "PENELOPE_KEY": FIRST, "PENELOPE_READ_KEYS": f"{READER} short"}
    ran = subprocess.run(
        [sys.executable, "manage.py", "serve", "--port", "1"], cwd=ROOT, env={**__import__("os").environ, **env},
        capture_output=True, text=True, timeout=60,
    )
    assert ran.returncode == 1
    assert "PENELOPE_READ_KEYS: key 2 has 5 characters; each needs at least 32" in ran.stderr


def test_the_waker_lets_every_key_of_a_persona_through_and_reads_with_the_first(tmp_path):
    env = {"PENELOPE_KEY": f"{FIRST} {SECOND}", "PENELOPE_READ_KEYS": READER}
    waker = WakerProcess(tmp_path, [{"name": "p1", "mode": "sleepy", "idle_timeout_s": 60, "env": env}],
                         env={"PENELOPE_PLUGINS": "plugins.web,tests.support.testing_plugins", "WAKER_POLL_S": "0.2"})
    try:
        waker.start()
        for key in (FIRST, SECOND, READER):
            with waker.through("p1", key=key) as via:
                assert via.get("/pages").status_code == 200, key
        with waker.through("p1", key=READER) as via:
            assert via.post("/main/plugin/web/evaluate", json={"expression": "1"}).status_code == 403
        with waker.through("p1", key="not-a-key-of-this-persona-at-all-0123") as via:
            assert via.get("/pages").status_code == 401
        # The policy reads the worker's activity with the first key.
        body = waker.wait_for("p1", lambda b: b["activity_read_at"] is not None, what="an activity read")
        assert body["activity_error"] is None
    finally:
        waker.stop()
