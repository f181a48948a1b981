"""What a failed run leaves behind (`X-Debug`), and family versions on jobs,
against a real worker, a real Chromium and a loopback site whose page logs,
throws and fetches what the artifacts must show."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import httpx
import pytest
from PIL import Image

from harness.worker import WorkerProcess
from tests.conftest import TEST_PLUGINS, worker_env

ARTIFACTS = {"screenshot", "html", "console", "network", "trace"}
READ_KEY = "read-only-key-0123456789abcdef-0123"


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory):
    env = worker_env(PENELOPE_PLUGINS=TEST_PLUGINS + ",tests.support.versioned_plugins", PENELOPE_READ_KEYS=READ_KEY)
    running = WorkerProcess(tmp_path_factory.mktemp("store"), env=env).start()
    yield running
    running.stop()


def media_count(api: httpx.Client) -> int:
    """The files the worker's store holds, from its metrics."""
    metrics = api.get("/metrics").text
    line = next(line for line in metrics.splitlines() if line.startswith("penelope_media_files "))
    return int(float(line.split()[1]))


def job_end(api: httpx.Client, response: httpx.Response) -> dict:
    assert response.status_code == 202, response.text
    job_id = response.json()["job_id"]
    for _ in range(20):
        body = api.get(f"/jobs/{job_id}", params={"wait": 30}).json()
        if body["state"] not in ("queued", "running"):
            return body
    raise AssertionError(f"job {job_id} did not end: {body}")


def fetch(api: httpx.Client, worker: WorkerProcess, link: dict) -> bytes:
    response = api.get(worker.base_url + link["url"])
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == link["content_type"] and len(response.content) == link["size"]
    return response.content


def check_artifacts(api: httpx.Client, worker: WorkerProcess, artifacts: dict, site_url: str) -> None:
    """Every file, downloaded, shows what the noisy page did."""
    assert set(artifacts) == ARTIFACTS, artifacts  # no `notes`: nothing was missed
    shot = Image.open(io.BytesIO(fetch(api, worker, artifacts["screenshot"])))
    assert shot.format == "PNG"
    width = api.post("/main/primitive/evaluate", json={"expression": "window.innerWidth"}).json()["value"]
    assert shot.size[0] == width  # the viewport of the page, as the action left it
    html = fetch(api, worker, artifacts["html"]).decode()
    assert "A page that complains" in html and 'data-done="1"' in html and "gave up" in html  # the DOM at the end
    console = json.loads(fetch(api, worker, artifacts["console"]))
    lines = {(entry["type"], entry["text"]) for entry in console["console"]}
    assert ("log", "noisy page ready") in lines and ("error", "noisy page: something broke") in lines
    assert [error["message"] for error in console["page_errors"]] == ["noisy page error"]
    requests = json.loads(fetch(api, worker, artifacts["network"]))["requests"]
    answered = [r for r in requests if r["url"] == f"{site_url}/missing?from=noisy"]
    assert any(r["status"] == 404 and r["method"] == "GET" and r["resource_type"] == "fetch" for r in answered), requests
    refused = [r for r in requests if r["url"] == "http://127.0.0.1:9/refused?from=noisy"]
    assert refused and refused[0]["status"] is None and refused[0]["failure"].startswith("net::ERR_")
    trace = zipfile.ZipFile(io.BytesIO(fetch(api, worker, artifacts["trace"])))
    names = set(trace.namelist())
    assert {"trace.trace", "trace.network"} <= names
    events = [json.loads(line) for line in trace.read("trace.trace").decode().splitlines() if line]
    assert events[0]["type"] == "context-options"
    assert any(event.get("method") == "goto" and site_url in json.dumps(event.get("params")) for event in events)
    # The trace ends with the action: the screenshot taken for the artifacts is not in it.
    assert not any(event.get("method") == "screenshot" for event in events)


def test_a_failed_plain_call_leaves_a_screenshot_html_logs_and_a_trace(api, worker, site):
    url = f"{site.url}/noisy.html"
    before = media_count(api)
    response = api.post("/main/plugin/testing/visit", json={"url": url}, headers={"X-Debug": "on-failure"})
    assert response.status_code == 502
    body = response.json()
    assert body["success"] is False and body["error"] == "The page Noisy did not show what the flow expected."
    assert media_count(api) == before + 5
    check_artifacts(api, worker, body["artifacts"], site.url)
    assert media_count(api) == before  # a plain call's links are one-shot: each download used its file up


def test_on_failure_keeps_nothing_from_a_success_and_always_does(api, worker, site):
    url = f"{site.url}/noisy.html"
    before = media_count(api)
    plain = api.post("/main/plugin/testing/visit", json={"url": url, "fail": False}, headers={"X-Debug": "on-failure"})
    assert plain.status_code == 200 and plain.json() == {"success": True, "page_id": "main", "title": "Noisy"}
    assert media_count(api) == before
    kept = api.post("/main/plugin/testing/visit", json={"url": url, "fail": False}, headers={"X-Debug": "always"})
    assert kept.status_code == 200 and kept.json()["title"] == "Noisy"
    assert set(kept.json()["artifacts"]) == ARTIFACTS
    check_artifacts(api, worker, kept.json()["artifacts"], site.url)


def test_without_the_header_nothing_is_recorded_or_stored(api, site):
    before = media_count(api)
    response = api.post("/main/plugin/testing/visit", json={"url": f"{site.url}/noisy.html"})
    assert response.status_code == 502 and "artifacts" not in response.json()
    assert api.post("/main/plugin/testing/visit", json={"url": f"{site.url}/noisy.html"}, headers={"X-Debug": "off"}
                    ).json().keys() == {"success", "error", "page_id"}
    assert media_count(api) == before


def test_a_failed_job_holds_its_artifacts_for_as_long_as_its_result(api, worker, site):
    url = f"{site.url}/noisy.html"
    started = api.post(
        "/main/plugin/testing/visit", json={"url": url}, headers={"X-Result-Ttl": "60", "X-Debug": "on-failure"}
    )
    job = job_end(api, started)
    assert job["status"] == 502 and job["result"]["error"] == "The page Noisy did not show what the flow expected."
    artifacts = job["result"]["artifacts"]
    check_artifacts(api, worker, artifacts, site.url)
    fetch(api, worker, artifacts["screenshot"])  # held for the job: a second download works too
    assert api.get(f"/jobs/{job['job_id']}").json()["result"]["artifacts"] == artifacts
    # A read key sees the result without them: a trace holds the persona's cookies and what was typed.
    read = httpx.get(f"{worker.base_url}/api/v1/jobs/{job['job_id']}", headers={"Authorization": f"Bearer {READ_KEY}"})
    assert read.status_code == 200 and read.json()["result"] == {k: v for k, v in job["result"].items() if k != "artifacts"}
    listed = httpx.get(f"{worker.base_url}/api/v1/jobs", headers={"Authorization": f"Bearer {READ_KEY}"}).json()["jobs"]
    assert "artifacts" not in json.dumps(next(entry for entry in listed if entry["job_id"] == job["job_id"]))
    assert api.delete(f"/jobs/{job['job_id']}").status_code == 204
    assert api.get(worker.base_url + artifacts["trace"]["url"]).status_code == 404  # gone with the job


def test_the_trace_opens_in_playwrights_trace_viewer(api, worker, site, person, tmp_path):
    """`playwright show-trace` serves the call's trace; a browser on it lists the action's navigation."""
    url = f"{site.url}/noisy.html"
    body = api.post("/main/plugin/testing/visit", json={"url": url}, headers={"X-Debug": "on-failure"}).json()
    trace = tmp_path / "trace.zip"
    trace.write_bytes(fetch(api, worker, body["artifacts"]["trace"]))
    viewer = subprocess.Popen(
        [str(Path(sys.executable).with_name("playwright")), "show-trace", "--host", "127.0.0.1", "--port", "0", str(trace)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    try:
        address = next(found[1] for line in viewer.stdout if (found := re.search(r"Listening on (http\S+)", line)))
        tab = person.new_page()
        try:
            tab.goto(address)
            tab.get_by_text("Navigate", exact=True).first.wait_for(timeout=20_000)  # the action list, loaded
            shown = tab.locator("body").inner_text()
            assert "Wait for function" in shown and "/noisy.html" in shown, shown[:2000]
        finally:
            tab.close()
    finally:
        os.killpg(viewer.pid, signal.SIGTERM)  # the wrapper and the node process it runs
        viewer.wait(10)


def test_bad_debug_headers_are_refused_and_change_nothing(api):
    before = media_count(api)
    refused = api.post("/main/plugin/testing/refuse", headers={"X-Debug": "sometimes"})
    assert refused.status_code == 400 and refused.json()["error"] == "X-Debug must be one of off, on-failure, always."
    job = api.post("/main/plugin/testing/refuse", headers={"X-Debug": "yes", "X-Result-Ttl": "60"})
    assert job.status_code == 400 and "X-Debug" in job.json()["error"]
    primitive = api.post("/main/primitive/content", json={}, headers={"X-Debug": "always"})
    assert primitive.status_code == 400 and "plugin calls" in primitive.json()["error"]
    assert api.post("/main/primitive/content", json={}, headers={"X-Debug": "off"}).status_code == 200  # as before
    assert api.get("/jobs").json()["jobs"] == [] or all(j["plugin"] != "testing/refuse" for j in api.get("/jobs").json()["jobs"])
    assert media_count(api) == before


def test_a_job_records_the_version_of_the_family_that_ran_it(api):
    job = job_end(api, api.post("/main/plugin/versioned/title", headers={"X-Result-Ttl": "60"}))
    assert job["family_version"] == "2.1.0" and job["status"] == 200
    listed = next(entry for entry in api.get("/jobs").json()["jobs"] if entry["job_id"] == job["job_id"])
    assert listed["family_version"] == "2.1.0"
    unversioned = job_end(api, api.post("/main/plugin/testing/refuse", headers={"X-Result-Ttl": "60"}))
    assert "family_version" not in unversioned  # a family without a version answers as before


def test_debug_artifacts_sets_the_default_and_a_header_overrides_it(make_worker, tmp_path):
    from tests.test_serve import serve_until_exit

    refused = serve_until_exit(tmp_path, DEBUG_ARTIFACTS="sometimes")
    assert refused.returncode != 0 and "DEBUG_ARTIFACTS must be off, on-failure or always, not 'sometimes'." in refused.stderr
    worker = make_worker({"DEBUG_ARTIFACTS": "on-failure"})
    with worker.client() as api:
        job = job_end(api, api.post("/main/plugin/testing/refuse", headers={"X-Result-Ttl": "60"}))
        assert job["status"] == 418 and set(job["result"]["artifacts"]) == ARTIFACTS
        assert Image.open(io.BytesIO(fetch(api, worker, job["result"]["artifacts"]["screenshot"]))).format == "PNG"
        quiet = api.post("/main/plugin/testing/refuse", headers={"X-Debug": "off"})
        assert quiet.status_code == 418 and "artifacts" not in quiet.json()
        assert job_end(api, api.post("/main/plugin/testing/sleep", json={"seconds": 0}, headers={"X-Result-Ttl": "60"})
                       )["result"].keys() == {"success", "page_id", "tag", "started", "ended"}


def test_one_trace_at_a_time_and_a_cancel_gives_the_trace_up(api, site):
    """Playwright records one trace per browser: a call beside another's
    recording keeps the rest and says why it has no trace; a cancelled
    job's recording stops with it, so the next call gets its trace."""
    assert api.post("/pages", json={"page_id": "second"}).status_code in (200, 201)
    try:
        started = api.post(
            "/main/plugin/testing/sleep", json={"seconds": 60}, headers={"X-Result-Ttl": "60", "X-Debug": "always"}
        )
        assert started.status_code == 202
        job_id = started.json()["job_id"]
        beside = api.post("/second/plugin/testing/refuse", headers={"X-Debug": "on-failure"}).json()["artifacts"]
        assert beside["trace"] is None and beside["screenshot"] is not None
        assert beside["notes"] == ["No trace: another call on this browser was recording one (one at a time)."]
        assert api.post(f"/jobs/{job_id}/cancel").status_code == 200
        cancelled = api.get(f"/jobs/{job_id}").json()
        assert cancelled["state"] == "cancelled" and "artifacts" not in cancelled["result"]
        after = api.post("/second/plugin/testing/refuse", headers={"X-Debug": "on-failure"}).json()["artifacts"]
        assert after["trace"] is not None and "notes" not in after
    finally:
        api.delete("/second")


def test_a_full_store_keeps_the_answer_and_says_which_files_it_left_out(make_worker, site):
    worker = make_worker({"MEDIA_MAX_MB": "0.001"})  # 1 KiB: less than any PNG or trace
    with worker.client() as api:
        response = api.post("/main/plugin/testing/visit", json={"url": f"{site.url}/noisy.html"},
                            headers={"X-Debug": "on-failure"})
        assert response.status_code == 502
        body = response.json()
        assert body["error"] == "The page Noisy did not show what the flow expected."
        artifacts = body["artifacts"]
        left_out = [name for name in ("screenshot", "html", "console", "network", "trace") if artifacts[name] is None]
        assert {"screenshot", "trace"} <= set(left_out) and len(artifacts["notes"]) == len(left_out)
        assert all(note.startswith(f"No {name}: The media store is full") and "MEDIA_MAX_MB" in note
                   for name, note in zip(left_out, artifacts["notes"], strict=True)), artifacts["notes"]


def test_event_sockets_of_read_keys_carry_no_artifacts(api, worker):
    from websockets.sync.client import connect

    def ended_event(key: str, job_id_box: list) -> dict:
        url = worker.base_url.replace("http", "ws") + "/api/v1/events?page=main"
        with connect(url, additional_headers={"Authorization": f"Bearer {key}"}) as events:
            started = api.post("/main/plugin/testing/refuse", headers={"X-Result-Ttl": "60", "X-Debug": "on-failure"})
            job_id_box.append(started.json()["job_id"])
            event = json.loads(events.recv(timeout=20))
            while not (event["event"] == "job.ended" and event["job_id"] == job_id_box[-1]):
                event = json.loads(events.recv(timeout=20))
        return event

    ids: list = []
    assert set(ended_event(worker.key, ids)["job"]["result"]["artifacts"]) == ARTIFACTS
    read = ended_event(READ_KEY, ids)["job"]["result"]
    assert read["error"] == "The testing plugin refuses." and "artifacts" not in read
