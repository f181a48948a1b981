"""The waker against real processes: a `manage.py waker` with a personas file
of the test's own, starting and stopping real workers (real Chromium), with
the durations scaled down (idle timeout 1.5 s, recycle 3 s, a policy step
every 0.2 s)."""

from __future__ import annotations

import datetime
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from core.procfs import command_name, descendants
from harness.receiver import Receiver
from harness.waker import WakerProcess
from harness.worker import ROOT, free_port, start_manage, wait_healthy, wait_until
from tests.conftest import TEST_PLUGINS
from tests.test_layout import STORE_READS

IDLE_TIMEOUT_S = 1.5
# The waker's clock and the worker's are the same machine's, read a few ms apart.
CLOCK_SLACK_S = 0.1
WAKER_ENV = {"PENELOPE_PLUGINS": TEST_PLUGINS, "PAGE_WAIT_S": "2", "MAX_PAGES": "3", "WAKER_POLL_S": "0.2"}
PERSONA_KEYS = {
    "success",
    "page_id",
    "name",
    "mode",
    "state",
    "pid",
    "base_url",
    "store",
    "idle_timeout_s",
    "recycle_s",
    "started_at",
    "idle_seconds",
    "requests_in_flight",
    "jobs_in_flight",
    "webhooks_pending",
    "activity_read_at",
    "activity_error",
    "forwards_in_flight",
    "last_exit",
    "unexpected_exits",
}


@pytest.fixture(scope="module")
def waker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WakerProcess]:
    """`nap` sleeps after 1.5 s idle and retries webhooks at 0, 1 and 3 s;
    `doze` stays up (10 minutes) unless stopped."""
    running = WakerProcess(
        tmp_path_factory.mktemp("waker"),
        [
            {
                "name": "nap",
                "mode": "sleepy",
                "idle_timeout_s": IDLE_TIMEOUT_S,
                "env": {"WEBHOOK_ATTEMPTS_S": "0,1,3,30", "WEBHOOK_TIMEOUT_S": "1"},
            },
            {"name": "doze", "mode": "sleepy", "idle_timeout_s": 600},
        ],
        env=WAKER_ENV,
    ).start()
    yield running
    assert running.stop() == [], "workers outlived their waker"


def stop(waker: WakerProcess, name: str, **body) -> httpx.Response:
    with waker.client() as api:
        return api.post(f"/personas/{name}/stop", json=body)


def stopped(waker: WakerProcess, name: str) -> dict:
    return waker.wait_for(name, lambda body: body["state"] == "stopped", what=f"{name}'s worker to stop")


# --- the waker's own API ----------------------------------------------------------------

# The worker's apps and the browser: none is the waker's.
WORKER_MODULES = ("playwright", "browser", "plugins", "jobs", "activity", "media_store", "worker", "demo_site", "core.db_thread",
                  "drf_spectacular", "penelope_site.settings", "penelope_site.urls", "django.contrib.admin")
# Loaded into the waker through PYTHONPATH: at its exit, it writes the
# modules it holds.
MODULE_DUMP = """
import atexit, os, sys

def _dump():
    with open(os.path.join(os.environ["MODULE_DUMP_DIR"], f"{os.getpid()}.txt"), "w") as out:
        out.write("\\n".join(sorted(sys.modules)))

atexit.register(_dump)
"""


def test_the_waker_runs_on_its_own_settings_and_imports_no_worker_app(tmp_path):
    """The running waker's own `sys.modules`, written at its exit after its
    start, its API, the proxy and its stop. Its persona never starts, so only
    the waker is there."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(MODULE_DUMP)
    env = {**WAKER_ENV, "PYTHONPATH": str(hook), "MODULE_DUMP_DIR": str(hook)}
    waker = WakerProcess(tmp_path / "waker", [{"name": "idle", "mode": "sleepy"}], env=env).start()
    try:
        with waker.client() as api:
            assert api.get("/personas").status_code == 200
            assert api.get("/personas/nobody").status_code == 404
        assert httpx.get(waker.base_url + "/w/nobody/api/v1/health").status_code == 404
        pid = waker.process.pid
    finally:
        assert waker.stop() == []
    modules = set((hook / f"{pid}.txt").read_text().split())
    assert {"waker.views", "waker.proxy", "waker.supervisor", "penelope_site.waker_settings", "daphne.server"} <= modules
    # The apps' reads of a store file are the one exception: the console reads
    # a sleeping persona's store with them, and they import nothing of their
    # app (tests/test_layout.py), so only their empty packages come along.
    store_reads = STORE_READS | {name.split(".")[0] for name in STORE_READS}
    loaded = sorted(
        name
        for name in modules - store_reads
        if any(name == top or name.startswith(top + ".") for top in WORKER_MODULES)
    )
    assert loaded == []



def test_the_api_needs_the_waker_key_and_answers_with_the_envelope(waker):
    with httpx.Client(base_url=waker.base_url + "/api/v1") as stranger:
        refused = stranger.get("/personas")
        assert refused.status_code == 401
        assert refused.headers["WWW-Authenticate"] == 'Bearer realm="penelope-waker"'
        assert refused.json() == {
            "success": False,
            "error": "A valid key is required: send Authorization: Bearer <WAKER_KEY>.",
            "page_id": None,
        }
        # A persona's key opens its worker, not the waker.
        worker_key = {"Authorization": f"Bearer {waker.worker_key('doze')}"}
        assert stranger.post("/personas/doze/start", headers=worker_key).status_code == 401
        assert stranger.get("/health").json() == {"success": True, "page_id": None, "status": "ok", "personas": 2}
    with waker.client() as api:
        listed = api.get("/personas").json()
        assert [p["name"] for p in listed["personas"]] == ["nap", "doze"]
        assert all(set(p) == PERSONA_KEYS - {"success", "page_id"} for p in listed["personas"])
        nap = api.get("/personas/nap").json()
        assert set(nap) == PERSONA_KEYS
        assert (nap["mode"], nap["idle_timeout_s"], nap["recycle_s"]) == ("sleepy", IDLE_TIMEOUT_S, 21600.0)
        assert nap["base_url"] == f"http://127.0.0.1:{waker.personas['nap']['port']}/api/v1"
        assert api.get("/personas/ghost").json() == {"success": False, "error": "No persona ghost.", "page_id": None}
        wrong_method = api.get("/personas/doze/start")
        assert (wrong_method.status_code, wrong_method.headers["Allow"]) == (405, "POST")
        assert api.get("/nowhere").status_code == 404
        assert api.post("/personas/doze/stop", content=b"{").status_code == 422
        bad = api.post("/personas/doze/stop", json={"force": "perhaps"})
        assert (bad.status_code, bad.json()["error"]) == (400, "Invalid parameter 'force': Must be a valid boolean.")


def test_start_is_idempotent_under_concurrent_calls(waker):
    assert stop(waker, "doze", force=True).status_code == 200
    with waker.client() as api, ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(lambda _: api.post("/personas/doze/start"), range(6)))
    assert [a.status_code for a in answers] == [200] * 6, [a.text for a in answers]
    assert {a.json()["state"] for a in answers} == {"running"}
    pids = {a.json()["pid"] for a in answers}
    assert len(pids) == 1
    assert waker.workers("doze") == list(pids)  # one process, not two
    assert waker.start_persona("doze")["pid"] in pids  # started again: the same worker
    with waker.direct("doze") as direct:
        assert direct.get("/health").json()["status"] == "ok"


def test_a_request_through_the_waker_wakes_a_stopped_worker_and_gets_its_answer(waker):
    assert stop(waker, "doze", force=True).json()["state"] == "stopped"
    with waker.through("doze", key="not-the-key") as stranger:
        refused = stranger.get("/pages")
        health = stranger.get("/health")
    assert refused.status_code == 401 and refused.headers["WWW-Authenticate"] == 'Bearer realm="penelope"'
    assert refused.json()["error"] == "A valid key is required: send Authorization: Bearer <PENELOPE_KEY>."
    assert health.status_code == 503  # health needs no key, so it wakes nothing
    assert waker.persona("doze")["state"] == "stopped"  # a client without the key woke nothing
    with httpx.Client(base_url=waker.base_url) as client:
        assert client.get("/w/ghost/api/v1/pages").json() == {
            "success": False,
            "error": "No persona ghost.",
            "page_id": None,
        }
        assert client.get("/w/doze/demo/").status_code == 404  # only the API, live views and the admin are forwarded
        assert client.get("/w/doze/admin/").status_code == 503  # the admin needs no key, so it wakes nothing
    assert waker.persona("doze")["state"] == "stopped"

    with waker.through("doze") as via:
        # Requests that arrive while it starts wait for it; one worker serves them all.
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda _: via.get("/pages"), range(4)))
        assert [a.status_code for a in answers] == [200] * 4
        assert answers[0].json()["max_pages"] == 3  # the worker's own answer, with the settings it was given
        assert len(waker.workers("doze")) == 1
        # The worker's own stay_awake counts with the persona's idle timeout:
        # its environment, as its Playwright driver was started with it (a
        # worker forked from the template shows the template's in /proc).
        [pid] = waker.workers("doze")
        [driver] = [child for child in descendants(pid) if command_name(child).startswith("node")]
        environ = (Path("/proc") / str(driver) / "environ").read_bytes().decode().split("\0")
        assert "IDLE_TIMEOUT_S=600" in environ
        # Methods, bodies, query strings, statuses and headers pass both ways.
        opened = via.post("/pages", json={"page_id": "extra"})
        assert (opened.status_code, opened.json()["page_id"]) == (201, "extra")
        assert via.delete("/extra").json() == {"success": True, "page_id": "extra", "closed": True}
        missing = via.get("/nope")
        assert missing.status_code == 404
        assert missing.json() == {"success": False, "error": "Page nope is not open.", "page_id": "nope"}
        slept = via.get("/main/plugin/testing/sleep", params={"seconds": 0.1, "tag": "via the waker"})
        assert slept.json()["tag"] == "via the waker"
        assert via.get("/health").json()["status"] == "ok"
        # A download streams through, headers and all.
        link = via.get("/main/plugin/testing/media", params={"size": 3_000_000}).json()["media"]
        with via.stream("GET", f"{waker.base_url}/w/doze{link['url']}") as download:
            assert download.status_code == 200
            assert download.headers["Content-Type"] == "application/octet-stream"
            assert download.headers["Content-Length"] == "3000000"
            assert download.headers["Content-Disposition"] == 'attachment; filename="blob.bin"'
            data = b"".join(download.iter_raw())
        assert data == bytes(i % 251 for i in range(3_000_000))
    with waker.client() as api:
        workload = api.get("/personas/doze/workload", params={"window_s": 600}).json()
    assert workload["persona"] == "doze" and workload["success"] is True
    assert {"route": "pages", "kind": "http"}.items() <= next(
        r for r in workload["routes"] if r["route"] == "pages"
    ).items()


def test_stop_refuses_while_work_is_in_flight_unless_forced(waker):
    waker.start_persona("doze")

    def long_call() -> int:
        with waker.direct("doze") as direct:
            try:
                return direct.get("/main/plugin/testing/sleep", params={"seconds": 60}).status_code
            except httpx.HTTPError:
                return 0

    with ThreadPoolExecutor(1) as pool:
        call = pool.submit(long_call)
        with waker.direct("doze") as direct:
            wait_until(lambda: direct.get("/activity").json()["requests_in_flight"] == 1, what="the call in flight")
        refused = stop(waker, "doze")
        assert refused.status_code == 409
        assert refused.json() == {
            "success": False,
            "error": "Persona doze has work in flight (requests: 1, jobs running: 0, webhook jobs waiting for "
            'delivery: 0); send {"force": true} to stop it anyway.',
            "page_id": None,
        }
        assert waker.persona("doze")["state"] == "running"
        forced = stop(waker, "doze", force=True).json()
        assert forced["state"] == "stopped" and forced["last_exit"]["expected"] is True
        assert call.result(timeout=30) != 200  # cut short by the forced stop


# --- the policy for sleepy workers ------------------------------------------------------


def test_a_sleepy_worker_sleeps_after_its_idle_timeout_and_not_under_a_plain_call(waker):
    first = waker.start_persona("nap")
    with waker.direct("nap") as direct:
        # Twice the idle timeout, with a policy step every 0.2 s throughout.
        answer = direct.get("/main/plugin/testing/sleep", params={"seconds": 2 * IDLE_TIMEOUT_S})
    ended = time.time()
    assert answer.status_code == 200
    exit_ = stopped(waker, "nap")["last_exit"]
    assert (exit_["pid"], exit_["returncode"], exit_["expected"]) == (first["pid"], 0, True)
    assert exit_["at"] >= ended + IDLE_TIMEOUT_S - CLOCK_SLACK_S  # the idle timeout ran from the call's end
    assert waker.workers("nap") == []


def test_a_running_polling_job_keeps_it_awake_and_its_result_is_read_after_stop_and_start(waker):
    waker.start_persona("nap")
    with waker.direct("nap") as direct:
        started = direct.get(
            "/main/plugin/testing/sleep",
            params={"seconds": 2 * IDLE_TIMEOUT_S, "tag": "held"},
            headers={"X-Result-Ttl": "120"},
        )
    assert started.status_code == 202, started.text
    job_id = started.json()["job_id"]
    # Nobody polls: only the running job keeps the worker up.
    exit_ = stopped(waker, "nap")["last_exit"]
    assert exit_["expected"] is True
    waker.start_persona("nap")
    with waker.direct("nap") as direct:
        job = direct.get(f"/jobs/{job_id}").json()
    assert (job["state"], job["status"], job["result"]["tag"]) == (
        "done",
        200,
        "held",
    )  # ran to its end, not interrupted
    assert exit_["at"] >= job["finished_at"] + IDLE_TIMEOUT_S - CLOCK_SLACK_S


def test_a_queued_job_keeps_it_awake_until_it_has_run(waker):
    waker.start_persona("nap")
    with waker.direct("nap") as direct:
        holder = direct.get(
            "/main/plugin/testing/sleep", params={"seconds": IDLE_TIMEOUT_S, "tag": "first"},
            headers={"X-Result-Ttl": "120"},
        )
        queued = direct.get(
            "/main/plugin/testing/sleep", params={"seconds": IDLE_TIMEOUT_S, "tag": "second"},
            headers={"X-Result-Ttl": "120", "X-Queue-Timeout": "60"},
        )
    assert holder.status_code == queued.status_code == 202 and queued.json()["state"] == "queued"
    # Nobody polls: the running job, then the queued one, keep the worker up.
    exit_ = stopped(waker, "nap")["last_exit"]
    assert exit_["expected"] is True
    waker.start_persona("nap")
    with waker.direct("nap") as direct:
        job = direct.get(f"/jobs/{queued.json()['job_id']}").json()
    assert (job["state"], job["status"], job["result"]["tag"]) == ("done", 200, "second")  # it ran, after the first
    assert exit_["at"] >= job["finished_at"] + IDLE_TIMEOUT_S - CLOCK_SLACK_S


def test_an_undelivered_webhook_job_keeps_it_awake_until_delivered(waker):
    hook = "/500,500,200/nap"  # delivered at the third attempt, 3 s after the job ended
    with Receiver() as receiver:
        waker.start_persona("nap")
        with waker.direct("nap") as direct:
            started = direct.get(
                "/main/plugin/testing/sleep", params={"seconds": 0.1}, headers={"X-Callback-Url": receiver.url + hook}
            )
        assert started.status_code == 202, started.text
        exit_ = stopped(waker, "nap")["last_exit"]
        posts = receiver.received(hook)
    assert len(posts) == 3  # up for every attempt, though each was more than the idle timeout apart
    assert exit_["at"] >= posts[2].at + IDLE_TIMEOUT_S - CLOCK_SLACK_S


def test_a_killed_sleepy_worker_is_marked_stopped_and_the_next_request_wakes_it(waker):
    pid = waker.start_persona("nap")["pid"]
    os.kill(pid, signal.SIGKILL)
    body = waker.wait_for("nap", lambda b: b["state"] == "stopped" and b["unexpected_exits"] == 1)
    assert {k: body["last_exit"][k] for k in ("pid", "returncode", "expected")} == {
        "pid": pid,
        "returncode": -signal.SIGKILL,
        "expected": False,
    }
    assert f"persona nap: worker {pid} exited unexpectedly with code -9; it is marked stopped" in waker.log()
    with waker.through("nap") as via:
        assert via.get("/pages").status_code == 200
    assert waker.persona("nap")["pid"] not in (None, pid)


# --- always workers ---------------------------------------------------------------------


def test_an_always_worker_is_recycled_only_when_idle_restarted_after_a_kill_and_stopped_with_the_waker(tmp_path):
    recycle_s = 3.0
    waker = WakerProcess(tmp_path, [{"name": "steady", "mode": "always", "recycle_s": recycle_s}], env=WAKER_ENV)
    try:
        waker.start()
        first = waker.wait_for("steady", lambda b: b["state"] == "running", what="the always worker to start by itself")
        with waker.direct("steady") as direct:
            # Runs past the recycle interval: the recycle waits for it.
            answer = direct.get("/main/plugin/testing/sleep", params={"seconds": recycle_s + 1.5})
        ended = time.time()
        assert answer.status_code == 200
        second = waker.wait_for("steady", lambda b: b["state"] == "running" and b["pid"] != first["pid"])
        assert (second["last_exit"]["pid"], second["last_exit"]["expected"]) == (first["pid"], True)
        assert second["last_exit"]["at"] >= ended - CLOCK_SLACK_S
        assert "persona steady: recycling worker" in waker.log()

        # Killed well before its next recycle: started again.
        os.kill(second["pid"], signal.SIGKILL)
        third = waker.wait_for("steady", lambda b: b["unexpected_exits"] == 1 and b["state"] == "running")
        assert third["pid"] != second["pid"]
        assert (
            f"persona steady: worker {second['pid']} exited unexpectedly with code -9; it is started again"
            in waker.log()
        )
        assert len(waker.workers("steady")) == 1
    finally:
        left = waker.stop()
    assert left == [] and waker.process.returncode == 0
    assert "persona steady: stopping worker" in waker.log() and "waker stopped" in waker.log()


# --- the personas file ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("personas", "sentence"),
    [
        (
            [{"name": "a", "store": "a", "port": 5001}, {"name": "a", "store": "b", "port": 5002}],
            "Two personas have the name a; each needs its own.",
        ),
        ([{"name": "a", "store": "a", "port": "x"}], "personas[0].port: A valid integer is required."),
        (
            [{"name": "a", "store": "a", "port": 5001, "env": {"PENELOPE_PORT": "6000"}}],
            "personas[0].env: PENELOPE_PORT come from the persona's store and port fields.",
        ),
    ],
)
def test_an_invalid_personas_file_is_refused_with_a_sentence(tmp_path, personas, sentence):
    personas_file = tmp_path / "personas.json"
    personas_file.write_text(json.dumps({"personas": personas}))
    env = {**os.environ, "WAKER_PERSONAS": str(personas_file), "WAKER_KEY": "k"}
    ran = subprocess.run(
        [sys.executable, "manage.py", "waker"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 1
    (error,) = [line for line in ran.stderr.splitlines() if line.startswith("CommandError: ")]
    assert error.endswith(sentence), ran.stderr


def test_a_generated_waker_key_is_kept_and_said_where_never_printed(tmp_path):
    personas_file = tmp_path / "personas.json"
    personas_file.write_text(json.dumps({"personas": [{"name": "a", "store": "a", "port": free_port(), "mode": "sleepy"}]}))
    env = {key: value for key, value in os.environ.items() if key != "WAKER_KEY"}
    port = free_port()
    env.update({"WAKER_PERSONAS": str(personas_file), "WAKER_PORT": str(port), "PYTHONUNBUFFERED": "1"})
    log_path = tmp_path / "waker.log"
    process = start_manage("waker", env, log_path)
    try:
        assert wait_healthy(process, f"http://127.0.0.1:{port}/api/v1/health", 30, log_path.read_text)
        # Health through the waker never wakes a worker, even with its key, and says what does.
        persona_key = (tmp_path / "a" / "key").read_text().strip()
        health = httpx.get(f"http://127.0.0.1:{port}/w/a/api/v1/health", headers={"Authorization": f"Bearer {persona_key}"})
        assert health.status_code == 503
        assert health.json()["error"] == (
            "Persona a's worker is stopped. Health never wakes a worker: any other request through /w/a/ with its "
            "key does, as does POST /api/v1/personas/a/start."
        )
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
    key_file = tmp_path / "waker.key"
    key = key_file.read_text().strip()
    # Its log lines are stamped in UTC, as the worker's (Django's own default is America/Chicago).
    stamped = next(line for line in log_path.read_text().splitlines() if re.match(r"\d{4}-\d\d-\d\d \d\d:", line))
    at = datetime.datetime.strptime(stamped[:19], "%Y-%m-%d %H:%M:%S").replace(tzinfo=datetime.UTC)
    assert abs((datetime.datetime.now(datetime.UTC) - at).total_seconds()) < 600, stamped
    assert len(key) >= 32 and oct(key_file.stat().st_mode & 0o777) == "0o600"
    log = log_path.read_text()
    assert f"Generated WAKER_KEY: it is kept in {key_file} (readable by its owner only); read it with: cat {key_file}" in log
    assert key not in log


@pytest.mark.serial  # the job under 1 s after its fire, through a worker's start: a time bound (pytest.ini)
def test_a_sleeping_worker_is_woken_for_its_schedules_fire_and_the_job_starts_on_time(tmp_path):
    lead_s = 4.0
    waker = WakerProcess(
        tmp_path, [{"name": "cron", "mode": "sleepy", "idle_timeout_s": IDLE_TIMEOUT_S}],
        env={**WAKER_ENV, "WAKE_LEAD_S": str(lead_s), "SCHEDULE_CHECK_S": "0.5"},
    ).start()
    try:
        waker.start_persona("cron")
        fire_at = float(int(time.time()) + 9)  # past the lead, so it may sleep first
        at = datetime.datetime.fromtimestamp(fire_at, datetime.UTC)
        with waker.direct("cron") as direct:
            created = direct.post("/schedules", json={
                "name": "morning", "cron": f"{at.second} {at.minute} {at.hour} * * *", "timezone": "UTC",
                "page_id": "main", "plugin": "testing/sleep", "params": {"seconds": 0, "tag": "fired"}, "result_ttl": 600,
            })
            assert created.status_code == 201, created.text
            assert created.json()["next_fire_at"] == fire_at
            # The schedules' loop, woken by the change, tells it.
            wait_until(lambda: direct.get("/activity").json()["next_wake_at"] == fire_at, what="the next wake")
        # Idle, and its fire is further than the lead: it sleeps.
        asleep = stopped(waker, "cron")
        assert asleep["last_exit"]["expected"] is True and time.time() < fire_at - lead_s
        # Nobody calls it: the waker starts it for the fire, from the instant its store records.
        woken = waker.wait_for("cron", lambda body: body["state"] == "running", timeout=20, what="the wake for the fire")
        assert woken["started_at"] >= fire_at - lead_s - CLOCK_SLACK_S and woken["started_at"] < fire_at
        with waker.direct("cron") as direct:
            job = wait_until(
                lambda: (jobs := direct.get("/jobs", params={"schedule": created.json()["schedule_id"]}).json()["jobs"])
                and jobs[0]["state"] == "done" and jobs[0],
                timeout=20, what="the fired job",
            )
            assert 0 <= job["started_at"] - fire_at < 1
            assert direct.get(f"/jobs/{job['job_id']}").json()["result"]["tag"] == "fired"
            assert direct.get(f"/schedules/{created.json()['schedule_id']}").json()["missed"] == 0
        assert "starting the worker for its schedule's fire" in waker.log()
    finally:
        assert waker.stop() == [], "workers outlived their waker"
