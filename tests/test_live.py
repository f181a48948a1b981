"""The live view of a page and plugins that ask a person, against a real
worker, with a second real Chromium in this process acting as the person.

The person opens the live page the way anyone would, watches frames arrive,
clicks and types into it; raw WebSockets check the refusals and the cap.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator

import httpx
import pytest
from standardwebhooks import Webhook
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from harness.receiver import Receiver
from harness.worker import wait_until
from tests.conftest import worker_env
from tests.support.live import click_and_type, evaluate, frames, make_link, metric, put_field, socket_close_code, watch

READ_KEY = "read-only-key-0123456789abcdefghij"


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory):
    from harness.worker import WorkerProcess

    running = WorkerProcess(tmp_path_factory.mktemp("store"), env=worker_env(LIVE_MAX_VIEWERS="2", PENELOPE_READ_KEYS=READ_KEY)).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with Receiver() as running:
        yield running


@pytest.fixture(autouse=True)
def no_links_left(api):
    yield
    api.delete("/main/live")
    wait_until(lambda: metric(api, "penelope_live_viewers") == 0, what="every viewer gone")


# --- links -----------------------------------------------------------------------------


def test_a_link_names_its_page_its_expiry_and_its_mode_never_the_key(api, worker):
    made = make_link(api, ttl=60, control=True)
    assert made["success"] is True and made["page_id"] == "main" and made["control"] is True
    token = made["url"].removeprefix("/live/")
    assert len(token) >= 22 and worker.key not in made["url"]  # at least 128 random bits
    assert make_link(api)["control"] is False  # view-only by default
    page = httpx.get(worker.base_url + made["url"])
    assert page.status_code == 200
    assert page.headers["cache-control"] == "no-store"
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
    assert "http" not in policy.replace("'self'", "")  # no other origin
    assert "<script src" not in page.text and "<link" not in page.text  # nothing from elsewhere


@pytest.mark.parametrize(
    "body", [{"ttl": 0}, {"ttl": 3601}, {"ttl": "soon"}, {"ttl": True}, {"control": "yes"}, {"control": 1}]
)
def test_bad_link_requests_answer_400(api, body):
    refused = api.post("/main/live", json=body)
    assert refused.status_code == 400 and refused.json()["success"] is False


def test_links_need_an_open_page_and_the_lease_to_drive_a_leased_one(api):
    assert api.post("/nowhere/live", json={}).status_code == 404
    lease = api.post("/main/lease", json={"ttl": 30}).json()["lease"]
    try:
        assert api.post("/main/live", json={"control": True}).status_code == 423
        assert api.post("/main/live", json={"control": False}).status_code == 201
        assert api.post("/main/live", json={"control": True}, headers={"X-Lease": lease}).status_code == 201
    finally:
        api.delete("/main/lease", headers={"X-Lease": lease})


def test_wrong_expired_revoked_and_closed_links_answer_404_alike(api, worker):
    wrong = "/live/" + "A" * 43
    expired = make_link(api, ttl=0.2)
    revoked = make_link(api)
    assert api.post("/pages", json={"page_id": "brief"}).status_code == 201
    closed = make_link(api, page="brief")
    assert api.delete("/main/live").json()["revoked"] >= 1
    assert api.delete("/brief").status_code == 200
    wait_until(lambda: httpx.get(worker.base_url + expired["url"]).status_code == 404, what="the link's expiry")
    answers = [httpx.get(worker.base_url + link) for link in (wrong, expired["url"], revoked["url"], closed["url"])]
    assert {answer.status_code for answer in answers} == {404}
    assert len({answer.text for answer in answers}) == 1  # nothing says which
    assert {socket_close_code(worker, link) for link in (wrong, expired["url"], revoked["url"], closed["url"])} == {4404}


# --- watching and driving ----------------------------------------------------------------


def test_frames_arrive_and_follow_the_page_and_the_screencast_stops_with_the_last_viewer(api, worker, person):
    evaluate(api, "() => { document.title = 'Before'; document.body.innerHTML = '<h1>before</h1>'; }")
    tab = watch(person, worker.base_url, make_link(api)["url"])
    assert metric(api, "penelope_live_screencasts") == 1
    tab.wait_for_function("() => document.getElementById('title').textContent === 'Before'")
    seen = frames(tab)
    evaluate(api, "() => { document.title = 'After'; document.body.style.background = '#c33'; }")
    tab.wait_for_function("(seen) => Number(document.body.dataset.frames) > seen", arg=seen)
    tab.wait_for_function("() => document.getElementById('title').textContent === 'After'")
    second = watch(person, worker.base_url, make_link(api)["url"])
    assert metric(api, "penelope_live_screencasts") == 1 and metric(api, "penelope_live_viewers") == 2
    tab.close()
    wait_until(lambda: metric(api, "penelope_live_viewers") == 1, what="one viewer left")
    assert metric(api, "penelope_live_screencasts") == 1
    second.close()
    wait_until(lambda: metric(api, "penelope_live_screencasts") == 0, what="the screencast stopped")


def test_the_last_state_of_a_burst_of_changes_is_shown(api, worker, person):
    """Chromium drops what it draws while frames wait for their acks, which
    pace it: the still page's last state must reach the viewer anyway."""
    evaluate(api, "() => { document.body.innerHTML = ''; document.body.style.background = 'rgb(0, 0, 255)'; }")
    tab = watch(person, worker.base_url, make_link(api)["url"])
    evaluate(api, """() => new Promise((done) => {
        let left = 40;
        const step = () => {
            document.body.style.background = left % 2 ? "rgb(255, 0, 0)" : "rgb(0, 0, 255)";
            if (--left > 0) requestAnimationFrame(step); else { document.body.style.background = "rgb(0, 160, 0)"; done(); }
        };
        step();
    })""")
    tab.wait_for_function("""() => {
        const img = document.getElementById("frame"), canvas = document.createElement("canvas");
        canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
        const paint = canvas.getContext("2d");
        paint.drawImage(img, 0, 0);
        const [r, g, b] = paint.getImageData(img.naturalWidth / 2, img.naturalHeight / 2, 1, 1).data;
        return g > 120 && r < 60 && b < 60;
    }""")
    tab.close()


def test_control_types_into_the_page_and_view_only_changes_nothing(api, worker, person):
    at = put_field(api)
    viewer = watch(person, worker.base_url, make_link(api)["url"])
    click_and_type(viewer, at, "seen")
    viewer.close()
    wait_until(lambda: metric(api, "penelope_live_viewers") == 0, what="the view-only viewer gone")
    # Its messages were read before its socket's end: none reached the page.
    assert evaluate(api, "() => document.getElementById('field').value") == ""
    driver = watch(person, worker.base_url, make_link(api, control=True)["url"])
    click_and_type(driver, at, "typed by a person")
    wait_until(lambda: evaluate(api, "() => document.getElementById('field').value") == "typed by a person")
    driver.close()


def test_a_page_takes_at_most_live_max_viewers(api, worker):
    url = make_link(api)["url"]
    base = worker.base_url.replace("http", "ws") + url + "/ws"
    with connect(base) as first, connect(base) as second:
        for socket in (first, second):
            json.loads(socket.recv(timeout=10))  # its first news: the link's mode
        wait_until(lambda: metric(api, "penelope_live_viewers") == 2)
        assert socket_close_code(worker, url) == 4429


def test_revoking_closes_open_viewers(api, worker):
    url = make_link(api)["url"]
    with connect(worker.base_url.replace("http", "ws") + url + "/ws") as socket:
        socket.recv(timeout=10)
        wait_until(lambda: metric(api, "penelope_live_viewers") == 1)
        api.delete("/main/live")
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                socket.recv(timeout=10)
        assert closed.value.rcvd.code == 4404


def test_a_viewer_counts_as_a_request_in_flight(api, worker):
    with connect(worker.base_url.replace("http", "ws") + make_link(api)["url"] + "/ws") as socket:
        socket.recv(timeout=10)
        # The waker's own reads (activity, health) are not counted: this is the viewer.
        assert api.get("/activity").json()["requests_in_flight"] == 1
    wait_until(lambda: api.get("/activity").json()["requests_in_flight"] == 0)


# --- plugins that ask a person ------------------------------------------------------------


def start_asking(api: httpx.Client, receiver: Receiver | None = None, **params) -> str:
    headers = {"X-Result-Ttl": "60"}
    if receiver is not None:
        headers["X-Notify-Url"] = receiver.url + "/200/asked"
    started = api.post("/main/plugin/testing/ask", json=params, headers=headers)
    assert started.status_code == 202, started.text
    return started.json()["job_id"]


def asked(api: httpx.Client, job_id: str) -> dict:
    wait_until(lambda: "human" in api.get(f"/jobs/{job_id}").json(), what="the question")
    return api.get(f"/jobs/{job_id}").json()


def test_a_person_answers_done_and_the_job_goes_on(api, worker, person, receiver):
    job_id = start_asking(api, receiver, reason="Confirm the page, then press Done.")
    poll = asked(api, job_id)
    human = poll["human"]
    assert poll["state"] == "running" and human["reason"] == "Confirm the page, then press Done."
    assert human["expires_at"] > human["asked_at"]
    listed = next(job for job in api.get("/jobs").json()["jobs"] if job["job_id"] == job_id)
    assert listed["human"] == human
    tab = watch(person, worker.base_url, human["live_url"])
    tab.wait_for_selector("#human.asked")
    assert tab.inner_text("#reason") == "Confirm the page, then press Done."
    tab.click("#done")
    ended = api.get(f"/jobs/{job_id}", params={"wait": 30}).json()
    # Done after the action's own limit (0.5 s) would have passed: it was paused.
    assert ended["status"] == 200 and ended["result"]["answer"] == "done"
    assert "human" not in ended
    tab.wait_for_function("() => document.body.dataset.state === 'ended'")  # its link is revoked
    # The answer is taken: the question's banner, Done and Give up go with it.
    tab.wait_for_selector("#human", state="hidden", timeout=5_000)
    assert not tab.is_visible("#done") and not tab.is_visible("#give-up") and tab.inner_text("#reason") == ""
    assert httpx.get(worker.base_url + human["live_url"]).status_code == 404
    wait_until(lambda: receiver.received("/200/asked"), what="the notification")
    note = receiver.received("/200/asked")[0]
    secret = (worker.store / "webhook_secret").read_text().strip()
    message = Webhook(secret).verify(note.body, note.headers)  # raises unless signed with the secret
    assert message["type"] == "job.needs_human"
    assert message["data"]["job_id"] == job_id and message["data"]["human"] == human


def test_give_up_and_timeout_answer_the_plugin(api, worker, person):
    job_id = start_asking(api)
    tab = watch(person, worker.base_url, asked(api, job_id)["human"]["live_url"])
    tab.click("#give-up")
    assert api.get(f"/jobs/{job_id}", params={"wait": 30}).json()["result"]["answer"] == "gave_up"
    tab.wait_for_selector("#human", state="hidden", timeout=5_000)
    tab.close()
    job_id = start_asking(api, wait_s=1)
    ended = api.get(f"/jobs/{job_id}", params={"wait": 30}).json()
    assert ended["status"] == 200 and ended["result"]["answer"] == "timeout"


def test_a_view_only_viewer_cannot_answer(api, worker, person):
    job_id = start_asking(api)
    asked(api, job_id)
    tab = watch(person, worker.base_url, make_link(api)["url"])
    tab.wait_for_selector("#human.asked")  # it sees the question
    assert tab.locator("#done").count() == 0
    tab.evaluate("() => 0")  # the page cannot send it either: the socket drops what a view-only link says
    with connect(worker.base_url.replace("http", "ws") + make_link(api)["url"] + "/ws") as socket:
        socket.send(json.dumps({"type": "answer", "answer": "done"}))
    wait_until(lambda: metric(api, "penelope_live_viewers") == 1, what="the raw socket gone")
    assert api.get(f"/jobs/{job_id}").json()["state"] == "running"
    tab.close()
    assert api.post(f"/jobs/{job_id}/cancel").status_code == 200


def test_a_cancel_ends_the_question_and_revokes_its_link(api, worker):
    job_id = start_asking(api)
    url = asked(api, job_id)["human"]["live_url"]
    assert httpx.get(worker.base_url + url).status_code == 200
    cancelled = api.post(f"/jobs/{job_id}/cancel")
    assert cancelled.status_code == 200
    ended = api.get(f"/jobs/{job_id}", params={"wait": 30}).json()
    assert ended["state"] == "cancelled" and "human" not in ended
    wait_until(lambda: httpx.get(worker.base_url + url).status_code == 404, what="the question's link revoked")


def test_a_plain_call_cannot_ask_and_notify_urls_are_checked(api):
    plain = api.post("/main/plugin/testing/ask", json={})
    assert plain.status_code == 409 and "start it as a job" in plain.json()["error"]
    for headers in ({"X-Notify-Url": "http://127.0.0.1:9/x"}, {"X-Result-Ttl": "60", "X-Notify-Url": "ftp://x/"}):
        refused = api.post("/main/plugin/testing/ask", json={}, headers=headers)
        assert refused.status_code == 400 and "X-Notify-Url" in refused.json()["error"]
    assert not [job for job in api.get("/jobs").json()["jobs"] if job["state"] == "running"]


def test_the_question_is_an_event(api, worker):
    events_url = worker.base_url.replace("http", "ws") + "/api/v1/events?page=main"
    with connect(events_url, additional_headers={"Authorization": f"Bearer {worker.key}"}) as events:
        job_id = start_asking(api, reason="An event says so.")
        seen = []
        while "job.needs_human" not in seen:
            event = json.loads(events.recv(timeout=10))
            seen.append(event["event"])
        assert event["job_id"] == job_id and event["job"]["human"]["reason"] == "An event says so."
        assert event["job"]["human"]["live_url"].startswith("/live/")
        api.post(f"/jobs/{job_id}/cancel")
        while event["event"] != "job.ended":
            event = json.loads(events.recv(timeout=10))
            if event["event"] == "job.progress":
                assert "human" not in event["job"]  # the question ended with the cancel
    assert event["job"]["state"] == "cancelled"


def test_a_read_key_sees_the_question_but_never_its_link(api, worker):
    reader = {"Authorization": f"Bearer {READ_KEY}"}
    events_url = worker.base_url.replace("http", "ws") + "/api/v1/events?page=main"
    with connect(events_url, additional_headers=reader) as events:
        job_id = start_asking(api, reason="Only full keys act.")
        event = json.loads(events.recv(timeout=10))
        while event["event"] != "job.needs_human":
            event = json.loads(events.recv(timeout=10))
    assert event["job"]["human"]["reason"] == "Only full keys act." and "live_url" not in event["job"]["human"]
    polled = httpx.get(f"{worker.base_url}/api/v1/jobs/{job_id}", headers=reader).json()
    listed = httpx.get(f"{worker.base_url}/api/v1/jobs", headers=reader).json()["jobs"]
    assert polled["human"]["reason"] == "Only full keys act." and "live_url" not in polled["human"]
    assert "live_url" not in next(job for job in listed if job["job_id"] == job_id)["human"]
    assert "live_url" in api.get(f"/jobs/{job_id}").json()["human"]  # a full key's poll has it
    assert httpx.post(f"{worker.base_url}/api/v1/main/live", json={}, headers=reader).status_code == 403
    api.post(f"/jobs/{job_id}/cancel")


def test_a_viewer_comes_back_for_the_pages_next_tab(api, worker):
    url = make_link(api)["url"]
    with connect(worker.base_url.replace("http", "ws") + url + "/ws") as socket:
        socket.recv(timeout=10)
        wait_until(lambda: metric(api, "penelope_live_screencasts") == 1)
        assert api.post("/main/plugin/testing/close-tab", json={}).status_code == 200
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                socket.recv(timeout=10)
        assert closed.value.rcvd.code == 4012
    wait_until(lambda: metric(api, "penelope_live_viewers") == 0 and metric(api, "penelope_live_screencasts") == 0)
    assert api.get("/activity").json()["requests_in_flight"] == 0
    assert socket_close_code(worker, url) == 4013  # no tab until the page's next call opens one
    assert api.get("/activity").json()["requests_in_flight"] == 0
    evaluate(api, "() => { document.body.innerHTML = '<h1>back</h1>'; }")
    with connect(worker.base_url.replace("http", "ws") + url + "/ws") as socket:
        while not isinstance(socket.recv(timeout=10), bytes):
            pass  # its news first, then a frame of the new tab


def test_a_questions_link_outlives_a_delete_of_the_pages_links(api, worker):
    job_id = start_asking(api)
    url = asked(api, job_id)["human"]["live_url"]
    other = make_link(api)["url"]
    assert api.delete("/main/live").json()["revoked"] == 1  # the other link only
    assert httpx.get(worker.base_url + other).status_code == 404
    assert httpx.get(worker.base_url + url).status_code == 200  # the question's ends with its question
    api.post(f"/jobs/{job_id}/cancel")
    wait_until(lambda: httpx.get(worker.base_url + url).status_code == 404, what="the question's link revoked")


def test_a_drag_moves_a_slider(api, worker, person):
    ends = evaluate(api, """() => {
        document.body.innerHTML = '<input id="slider" type="range" min="0" max="100" value="0" '
            + 'style="position:absolute;left:40px;top:60px;width:400px;margin:0">';
        const box = document.getElementById("slider").getBoundingClientRect();
        const y = (box.top + box.height / 2) / innerHeight;
        return {from: {x: (box.left + 4) / innerWidth, y}, to: {x: (box.right - 4) / innerWidth, y}};
    }""")
    tab = watch(person, worker.base_url, make_link(api, control=True)["url"])
    box = tab.locator("#frame").bounding_box()
    place = lambda at: (box["x"] + at["x"] * box["width"], box["y"] + at["y"] * box["height"])  # noqa: E731
    tab.mouse.move(*place(ends["from"]))
    tab.mouse.down()
    tab.mouse.move(*place(ends["to"]), steps=8)
    tab.mouse.up()
    wait_until(lambda: int(evaluate(api, "() => document.getElementById('slider').value")) > 90, what="the slider dragged")
    tab.close()


def test_files_stored_before_a_question_are_held_through_it(api, worker):
    job_id = start_asking(api, wait_s=3000, file=True)
    human = asked(api, job_id)["human"]
    with sqlite3.connect(worker.store / "penelope.db") as db:
        (held_until,) = db.execute("SELECT held_until FROM media_store_mediafile WHERE holder = ?", (job_id,)).fetchone()
    assert held_until >= human["asked_at"] + 3000  # the person's whole time, on top of the run's own
    api.post(f"/jobs/{job_id}/cancel")
