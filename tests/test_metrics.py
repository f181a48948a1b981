"""`GET /api/v1/metrics` on a real worker and on a real waker: the key, the
settings that open or switch them off, each family's values after real calls,
jobs, webhooks (to the loopback receiver), a purge and a file, gauges that
follow live state, and the waker's wakes, stops and recycles. Scrapes are
parsed with prometheus_client's own parser."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.receiver import Receiver
from harness.waker import WakerProcess
from harness.worker import WorkerProcess, wait_until
from tests.conftest import TEST_PLUGINS, worker_env

# A failing webhook is tried twice, 0.3 s apart, then given up.
WEBHOOK_ENV = {"WEBHOOK_ATTEMPTS_S": "0,0.3", "WEBHOOK_TIMEOUT_S": "2"}
FAMILIES = {
    "penelope_requests", "penelope_request_duration_seconds", "penelope_jobs_started", "penelope_jobs_ended",
    "penelope_jobs_held", "penelope_webhook_attempts", "penelope_webhook_attempt_duration_seconds",
    "penelope_webhook_delivery_latency_seconds", "penelope_pages_open", "penelope_pages_busy", "penelope_pages_leased",
    "penelope_media_files", "penelope_media_bytes", "penelope_browser_resident_bytes", "penelope_purges",
}
POLL = "jobs/{job_id}"


class Scraped:
    """One scrape: its families by name, and each sample's value by name and labels."""

    def __init__(self, text: str) -> None:
        self.families = {family.name: family for family in text_string_to_metric_families(text)}
        self.samples = {
            (sample.name, frozenset(sample.labels.items())): sample.value
            for family in self.families.values()
            for sample in family.samples
        }

    def __call__(self, name: str, **labels: str) -> float:
        return self.samples[(name, frozenset(labels.items()))]

    def get(self, name: str, default: float = 0.0, **labels: str) -> float:
        return self.samples.get((name, frozenset(labels.items())), default)

    def labels(self, name: str, label: str) -> set[str]:
        return {dict(labels)[label] for sample, labels in self.samples if sample == name and label in dict(labels)}


def scrape(client: httpx.Client) -> Scraped:
    response = client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    return Scraped(response.text)


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    running = WorkerProcess(tmp_path_factory.mktemp("store"), env=worker_env(**WEBHOOK_ENV)).start()
    yield running
    running.stop()


def page_free(api: httpx.Client) -> None:
    wait_until(lambda: api.get("/main").json()["job_id"] is None, timeout=30, what="page main to be free")


def start_job(api: httpx.Client, *, seconds: float = 0, **headers: str) -> str:
    response = api.get("/main/plugin/testing/sleep", params={"seconds": seconds}, headers=headers)
    assert response.status_code == 202, response.text
    return response.json()["job_id"]


# --- the key and the settings ----------------------------------------------------------------


def test_the_key_is_required(worker: WorkerProcess):
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        refused = httpx.get(worker.base_url + "/api/v1/metrics", headers=headers)
        assert refused.status_code == 401
        assert refused.headers["WWW-Authenticate"] == 'Bearer realm="penelope"'
        assert refused.json()["success"] is False


def test_metrics_public_opens_the_route_without_the_key(make_worker):
    opened = make_worker(env={"METRICS_PUBLIC": "1"})
    response = httpx.get(opened.base_url + "/api/v1/metrics")
    assert response.status_code == 200
    assert Scraped(response.text)("penelope_pages_open") == 1
    # Only that route: every other one still needs the key.
    assert httpx.get(opened.base_url + "/api/v1/pages").status_code == 401


def test_metrics_enabled_off_answers_404(make_worker):
    off = make_worker(env={"METRICS_ENABLED": "0"})
    with off.client() as api:
        assert api.get("/main/plugin/testing/sleep", params={"seconds": 0}).status_code == 200
        response = api.get("/metrics")
    assert response.status_code == 404
    assert response.json() == {
        "success": False, "error": "Metrics are off on this worker (METRICS_ENABLED=0).", "page_id": None,
    }
    assert httpx.get(off.base_url + "/api/v1/metrics").status_code == 401  # the key first, as everywhere


# --- each family after real work -------------------------------------------------------------


def test_each_family_shows_what_happened(worker: WorkerProcess, api: httpx.Client):
    before = scrape(api)
    assert FAMILIES - {"penelope_browser_resident_bytes"} <= set(before.families)

    # A plain call, and a plugin action and a primitive the worker does not have.
    assert api.get("/main/plugin/testing/sleep", params={"seconds": 0}).status_code == 200
    assert api.get("/main/plugin/testing/nope-" + "x" * 20).status_code == 404
    assert api.post("/main/primitive/nope", json={}).status_code == 404
    # A polling job, polled until it is done.
    polled = start_job(api, seconds=0.1, **{"X-Result-Ttl": "60"})
    wait_until(lambda: api.get(f"/jobs/{polled}").json()["state"] == "done", what="the polling job")
    with Receiver() as receiver:
        # A webhook job delivered to the receiver...
        start_job(api, **{"X-Callback-Url": receiver.url + "/200/delivered"})
        wait_until(
            lambda: scrape(api).get("penelope_webhook_attempts_total", outcome="delivered")
            > before("penelope_webhook_attempts_total", outcome="delivered"),
            what="the delivered attempt",
        )
        assert len(receiver.received("/200/delivered")) == 1
        page_free(api)
        # ...and one the receiver refuses twice with 500: a retry, then given up.
        start_job(api, **{"X-Callback-Url": receiver.url + "/500/failing"})
        wait_until(
            lambda: scrape(api).get("penelope_webhook_attempts_total", outcome="gave_up")
            > before("penelope_webhook_attempts_total", outcome="gave_up"),
            what="the failing webhook to be given up",
        )
        assert len(receiver.received("/500/failing")) == 2
    page_free(api)
    assert api.post("/purge").status_code == 200
    media = api.get("/main/plugin/testing/media", params={"size": 1000})
    assert media.status_code == 200, media.text

    after = scrape(api)

    def grew(name: str, **labels: str) -> float:
        return after.get(name, **labels) - before.get(name, **labels)

    # Requests, by route and status; polls too, though the request log leaves them out.
    assert grew("penelope_requests_total", route="plugin/testing/sleep", status="200") == 1
    assert grew("penelope_requests_total", route="plugin/testing/sleep", status="202") == 3
    assert grew("penelope_requests_total", route="plugin/(unknown)", status="404") == 1
    assert grew("penelope_requests_total", route="primitive/(unknown)", status="404") == 1
    assert grew("penelope_requests_total", route="plugin/testing/media", status="200") == 1
    assert grew("penelope_requests_total", route="purge", status="200") == 1
    assert grew("penelope_requests_total", route=POLL, status="200") >= 1
    assert grew("penelope_request_duration_seconds_count", route="plugin/testing/sleep") == 4
    assert after("penelope_request_duration_seconds_bucket", route="plugin/testing/sleep", le="+Inf") == after(
        "penelope_request_duration_seconds_count", route="plugin/testing/sleep"
    )
    assert grew("penelope_request_duration_seconds_sum", route="plugin/testing/sleep") > 0
    # The scrapes themselves are not counted (nor client activity, nor logged).
    routes = after.labels("penelope_requests_total", "route")
    assert "metrics" not in routes
    # Every route is named as the request log names it.
    workload = {load["route"] for load in api.get("/workload").json()["routes"]}
    assert routes - {"plugin/(unknown)", "primitive/(unknown)", POLL} <= workload

    # Jobs: started by mode, ended by state; the polling job is still held, the webhook jobs are gone.
    assert grew("penelope_jobs_started_total", mode="poll") == 1
    assert grew("penelope_jobs_started_total", mode="webhook") == 2
    assert grew("penelope_jobs_ended_total", state="done") == 3
    assert grew("penelope_jobs_held", state="done") == 1
    assert after("penelope_jobs_held", state="running") == 0

    # Webhook attempts by outcome, each POST timed, the delivery's latency from the job's end.
    assert grew("penelope_webhook_attempts_total", outcome="delivered") == 1
    assert grew("penelope_webhook_attempts_total", outcome="retry") == 1
    assert grew("penelope_webhook_attempts_total", outcome="gave_up") == 1
    assert grew("penelope_webhook_attempt_duration_seconds_count") == 3
    assert grew("penelope_webhook_delivery_latency_seconds_count") == 1
    assert 0 < grew("penelope_webhook_delivery_latency_seconds_sum") < 10

    assert grew("penelope_purges_total") == 1
    assert grew("penelope_media_files") == 1
    assert grew("penelope_media_bytes") == 1000
    assert after("penelope_browser_up") == 1
    assert after("penelope_browser_resident_bytes") > 10 * 1024 * 1024
    assert after("penelope_pages_max") == 3

    # The file downloaded (one-shot): the gauges follow at once.
    assert api.get(media.json()["media"]["url"].removeprefix("/api/v1")).status_code == 200
    downloaded = scrape(api)
    assert downloaded("penelope_media_files") == before("penelope_media_files")
    assert downloaded("penelope_media_bytes") == before("penelope_media_bytes")


# --- gauges follow live state ----------------------------------------------------------------


def test_page_gauges_follow_live_state(api: httpx.Client):
    idle = scrape(api)
    assert (idle("penelope_pages_open"), idle("penelope_pages_busy"), idle("penelope_pages_leased")) == (1, 0, 0)

    taken = api.post("/main/lease", json={"ttl": 30})
    assert taken.status_code == 201
    assert scrape(api)("penelope_pages_leased") == 1
    assert api.delete("/main/lease", headers={"X-Lease": taken.json()["lease"]}).status_code == 200
    assert scrape(api)("penelope_pages_leased") == 0

    assert api.post("/pages", json={"page_id": "second"}).status_code == 201
    assert scrape(api)("penelope_pages_open") == 2
    assert api.delete("/second").status_code == 200
    assert scrape(api)("penelope_pages_open") == 1

    # A plain call in flight: a busy page and a request being answered.
    with ThreadPoolExecutor(1) as pool:
        call = pool.submit(api.get, "/main/plugin/testing/sleep", params={"seconds": 1})
        busy = wait_until(
            lambda: (lambda s: s if s("penelope_requests_in_flight") == 1 else None)(scrape(api)), what="the call in flight"
        )
        assert busy("penelope_pages_busy") == 1
        assert call.result().status_code == 200
    assert scrape(api)("penelope_pages_busy") == 0

    # A job running, then cancelled.
    job_id = start_job(api, seconds=30, **{"X-Result-Ttl": "60"})
    running = scrape(api)
    assert running("penelope_pages_busy") == 1 and running("penelope_jobs_held", state="running") == 1
    assert api.post(f"/jobs/{job_id}/cancel").json()["state"] == "cancelled"
    cancelled = scrape(api)
    assert cancelled("penelope_pages_busy") == 0 and cancelled("penelope_jobs_held", state="running") == 0
    assert cancelled("penelope_jobs_ended_total", state="cancelled") == running("penelope_jobs_ended_total", state="cancelled") + 1
    assert cancelled("penelope_jobs_held", state="cancelled") == running("penelope_jobs_held", state="cancelled") + 1


# --- the waker ---------------------------------------------------------------------------------

WAKER_ENV = {"PENELOPE_PLUGINS": TEST_PLUGINS, "PAGE_WAIT_S": "2", "MAX_PAGES": "3", "WAKER_POLL_S": "0.2"}


def test_the_waker_counts_wakes_stops_and_recycles(tmp_path):
    waker = WakerProcess(
        tmp_path,
        [{"name": "nap", "mode": "sleepy", "idle_timeout_s": 1.5}, {"name": "cycle", "mode": "always", "recycle_s": 3}],
        env=WAKER_ENV,
    ).start()
    try:
        refused = httpx.get(waker.base_url + "/api/v1/metrics")
        assert refused.status_code == 401
        assert refused.headers["WWW-Authenticate"] == 'Bearer realm="penelope-waker"'
        with waker.client() as api:
            first = scrape(api)
            assert sum(first("penelope_waker_personas", state=state) for state in ("stopped", "starting", "running", "stopping")) == 2
            assert first("penelope_waker_wakes_total", persona="nap", outcome="started") == 0

            # A request through the waker wakes nap.
            with waker.through("nap") as through:
                assert through.get("/pages").status_code == 200
            woken = scrape(api)
            assert woken("penelope_waker_wakes_total", persona="nap", outcome="started") == 1
            assert woken("penelope_waker_wakes_total", persona="nap", outcome="failed") == 0
            assert woken("penelope_waker_wake_duration_seconds_count", persona="nap") == 1
            assert 0 < woken("penelope_waker_wake_duration_seconds_sum", persona="nap") < 60
            assert woken("penelope_waker_persona_running", persona="nap") == 1

            # Idle 1.5 s: stopped by the policy.
            napping = wait_until(
                lambda: (lambda s: s if s("penelope_waker_stops_total", persona="nap", reason="idle") == 1 else None)(scrape(api)),
                what="nap to be stopped when idle",
            )
            assert napping("penelope_waker_persona_running", persona="nap") == 0
            assert napping("penelope_waker_stops_total", persona="nap", reason="asked") == 0

            # cycle, an `always` persona, is recycled after 3 s: stopped and woken again.
            recycled = wait_until(
                lambda: (lambda s: s if s("penelope_waker_wakes_total", persona="cycle", outcome="started") >= 2 else None)(
                    scrape(api)
                ),
                timeout=60,
                what="cycle to be recycled and started again",
            )
            assert recycled("penelope_waker_recycles_total", persona="cycle") >= 1
            assert recycled("penelope_waker_stops_total", persona="cycle", reason="idle") == 0

            # An operator's stop.
            assert api.post("/personas/cycle/stop", json={"force": True}).status_code == 200
            asked = scrape(api)
            assert asked("penelope_waker_stops_total", persona="cycle", reason="asked") == 1
            assert asked("penelope_waker_personas", state="running") == 0
            assert asked("penelope_waker_personas", state="stopped") == 2
            assert asked("penelope_waker_unexpected_exits_total", persona="cycle") == 0
    finally:
        assert waker.stop() == []


def test_waker_metrics_public_opens_them_without_the_key(tmp_path):
    waker = WakerProcess(
        tmp_path, [{"name": "idle", "mode": "sleepy"}], env={**WAKER_ENV, "WAKER_METRICS_PUBLIC": "1"}
    ).start()
    try:
        response = httpx.get(waker.base_url + "/api/v1/metrics")
        assert response.status_code == 200
        assert Scraped(response.text)("penelope_waker_personas", state="stopped") == 1
        assert httpx.get(waker.base_url + "/api/v1/personas").status_code == 401
    finally:
        assert waker.stop() == []
