"""Security: the key stays secret, ids are unguessable, the webhook leaves
without any proxy, and the opt-in guard refuses callbacks into the host's
own networks."""

from __future__ import annotations

import re

import httpx
import pytest

from harness.receiver import Receiver
from harness.worker import WorkerProcess, free_port, wait_until
from jobs.webhooks import refused_address
from tests.test_jobs import ended, started


def test_the_key_never_appears_in_an_answer_or_a_log_line(worker, api, site):
    answers = [
        api.get("/pages"),
        api.get("/main/plugin/web/open", params={"url": site.url + "/index.html"}),
        api.get("/main/plugin/testing/crash"),
        api.post("/main/plugin/web/open", content=b"{", headers={"Content-Type": "application/json"}),
        api.get("/nowhere"),
        api.get("/jobs/" + "0" * 16),
        api.get("/activity"),
        httpx.get(worker.base_url + "/api/v1/pages", headers={"Authorization": f"Bearer {worker.key[:-1]}"}),
        api.post("/main/plugin/web/state", headers={"X-Result-Ttl": worker.key}),
        api.post("/main/plugin/web/state", headers={"X-Lease": worker.key}),
    ]
    for answer in answers:
        assert worker.key not in answer.text
        assert "Traceback" not in answer.text
    assert worker.key not in worker.log()


def test_job_ids_and_media_tokens_are_random_and_long(api):
    job_ids = []
    for _ in range(20):
        job_ids.append(started(api, "web/state", ttl=30))
        ended(api, job_ids[-1])
    assert all(re.fullmatch(r"[0-9a-f]{16}", job_id) for job_id in job_ids)
    assert len(set(job_ids)) == 20
    assert len({job_id[:4] for job_id in job_ids}) > 10  # no counter hides in them
    tokens = [api.post("/main/plugin/testing/media", json={"size": 1}).json()["media"]["url"].rsplit("/", 1)[1]
              for _ in range(5)]
    assert len(set(tokens)) == 5
    assert all(len(token) >= 32 and re.fullmatch(r"[A-Za-z0-9_-]+", token) for token in tokens)  # 192 random bits


def test_the_webhook_leaves_from_the_host_not_through_any_proxy(make_worker):
    with Receiver() as proxy, Receiver() as receiver:
        worker = make_worker(env={
            "PENELOPE_PROXY": proxy.url,  # the persona's browser proxy
            "HTTP_PROXY": proxy.url, "HTTPS_PROXY": proxy.url, "ALL_PROXY": proxy.url,
            "http_proxy": proxy.url, "https_proxy": proxy.url,
        })
        with worker.client() as api:
            job_id = started(api, "web/state", callback=receiver.url + "/200/direct")
            wait_until(lambda: receiver.received("/200/direct"), what="the webhook")
            assert receiver.received("/200/direct")[0].headers["X-Penelope-Job"] == job_id
        # The browser itself may use the persona's proxy; the webhook never does.
        assert not [r for r in proxy.requests if "X-Penelope-Job" in r.headers or "/200/direct" in r.path]


@pytest.mark.parametrize(
    "address, refused",
    [
        ("127.0.0.1", True), ("127.8.9.10", True), ("::1", True), ("10.1.2.3", True), ("172.16.0.1", True),
        ("192.168.1.1", True), ("169.254.169.254", True), ("169.254.1.1", True), ("fe80::1", True),
        ("fc00::1", True), ("fd00:ec2::254", True), ("100.64.0.1", True), ("100.100.100.200", True),
        ("0.0.0.0", True), ("::", True), ("::ffff:127.0.0.1", True), ("::ffff:10.0.0.1", True),
        ("224.0.0.1", True), ("255.255.255.255", True),
        # IPv6 that embeds an IPv4 address is judged by it: NAT64, local NAT64, 6to4, IPv4-compatible.
        ("64:ff9b::7f00:1", True), ("64:ff9b::a9fe:a9fe", True), ("64:ff9b::a00:1", True),
        ("64:ff9b:1:7f00:0:100::", True), ("64:ff9b:1:a00:0:100::", True),
        ("2002:7f00:1::1", True), ("2002:c0a8:101::1", True), ("::7f00:1", True), ("::a00:1", True),
        ("93.184.215.14", False), ("8.8.8.8", False), ("2606:4700::1111", False), ("::ffff:8.8.8.8", False),
        ("64:ff9b::808:808", False), ("2002:808:808::1", False), ("::808:808", False),
    ],
)
def test_which_addresses_the_guard_refuses(address, refused):
    assert refused_address(address) is refused


@pytest.mark.parametrize(
    "callback",
    ["http://127.0.0.1:{port}/hook", "http://localhost:{port}/hook", "http://[::1]:{port}/hook",
     "http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/hook", "http://192.168.0.10/hook",
     "http://[::ffff:127.0.0.1]:{port}/hook", "http://0.0.0.0:{port}/", "https://metadata.invalid/"],
)
def test_the_opt_in_guard_refuses_internal_callbacks_before_anything_starts(guarded, callback):
    worker, api = guarded
    response = api.post("/main/plugin/web/state", headers={"X-Callback-Url": callback.format(port=free_port())})
    assert response.status_code == 400
    assert "WEBHOOK_REFUSE_PRIVATE" in response.json()["error"]
    assert not api.get("/main").json()["busy"]
    with __import__("sqlite3").connect(worker.store / "penelope.db") as db:
        assert db.execute("select count(*) from jobs_job").fetchone()[0] == 0


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    from tests.conftest import worker_env

    worker = WorkerProcess(tmp_path_factory.mktemp("store"), env=worker_env(WEBHOOK_REFUSE_PRIVATE="1")).start()
    with worker.client() as api:
        yield worker, api
    worker.stop()


def test_the_opt_in_browser_guard_refuses_private_addresses_for_every_caller(make_worker, site):
    worker = make_worker({"BROWSER_REFUSE_PRIVATE": "1"})
    port = site.url.rsplit(":", 1)[1]
    refused = (
        f"The browser refused http://127.0.0.1:{port}: 127.0.0.1 is a loopback, private, link-local or metadata "
        "address (BROWSER_REFUSE_PRIVATE)."
    )
    with worker.client() as api:
        # A web action, a primitive and another family's plugin: the call answers 403 naming the address.
        for path, body in [
            ("/main/plugin/web/open", {"url": site.url + "/"}),
            ("/main/primitive/goto", {"url": site.url + "/second.html"}),
            ("/main/plugin/demo/open-account", {"handle": "alice"}),
        ]:
            answer = api.post(path, json=body)
            assert answer.status_code == 403, (path, answer.text)
            assert answer.json()["success"] is False and "(BROWSER_REFUSE_PRIVATE)" in answer.json()["error"]
        assert api.post("/main/plugin/web/open", json={"url": site.url + "/"}).json()["error"] == refused
        # A page's own sub-request gets a 403 that says why; the call itself goes on.
        status = api.post("/main/primitive/evaluate", json={
            "expression": f"fetch('{site.url}/index.html').then(async r => [r.status, await r.text()])",
        })
        assert status.status_code == 200 and status.json()["value"] == [403, refused]
        # And a job ends with the same 403.
        job = api.post("/main/plugin/web/open", json={"url": site.url + "/"}, headers={"X-Result-Ttl": "60"}).json()
        ended = api.get(f"/jobs/{job['job_id']}", params={"wait": 30}).json()
        assert (ended["status"], ended["result"]["error"]) == (403, refused)


def test_without_the_browser_guard_the_same_page_opens(api, site):
    assert api.post("/main/plugin/web/open", json={"url": site.url + "/"}).status_code == 200
