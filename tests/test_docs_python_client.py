"""docs/guides/PYTHON_CLIENT.md's blocks run, in order, as written, in this
process, against a real worker started as the README starts it, and a real
waker for the waker's section, neither on its default port: only
`PENELOPE_PORT` and `WAKER_PORT` say where they are (tests/support/docs.py). The person its "person in the
loop" block waits for is played by a Chromium of the test's own; the
notification that block asks for goes to a recording receiver, and the
guide's two Django views are then called with real messages."""

from __future__ import annotations

import json

from django.test import RequestFactory

from harness.receiver import Receiver
from harness.waker import WAKER_TEST_KEY, WakerProcess
from harness.worker import ROOT, free_port, wait_until
from tests.support.docs import documented_worker, run_document
from tests.support.live import metric
from tests.test_docs_human_in_the_loop import Person

DOC = ROOT / "docs" / "guides" / "PYTHON_CLIENT.md"
ASKS = "/200/asks"  # where the guide's notify_url= goes here
HOOK = "/200/hook"
CONTENT = ("content-type", "content-length")  # RequestFactory's own, from the body it sends


def test_every_block_of_the_python_client_guide_runs(tmp_path, monkeypatch, settings):
    store = tmp_path / "store"
    place = tmp_path / "home" / "checkout"  # the run's folder (run_document)
    for name in ("PENELOPE_KEY", "WEBHOOK_SECRET"):  # the blocks read the store's, as a reader's would
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WAKER_KEY", WAKER_TEST_KEY)
    monkeypatch.syspath_prepend(str(ROOT / "client"))  # in place of the guide's `pip install ./client` (not run)
    alice = {"name": "alice", "store": str(place / "stores" / "alice"), "mode": "sleepy", "idle_timeout_s": 60}
    waker = WakerProcess(tmp_path / "waker", [{**alice, "env": {"DEMO_PAUSE_MS": "50"}}])
    namespace: dict = {}
    with documented_worker(store) as worker, Person(worker) as person, Receiver() as receiver:
        port = free_port()
        addresses = {  # the guide's own webhook receiver, and where it sends a notification
            "127.0.0.1:8099": f"127.0.0.1:{port}",
            '("127.0.0.1", 8099)': f'("127.0.0.1", {port})',
            "https://ops.example.com/penelope/asks": receiver.url + ASKS,
        }
        env = {"PENELOPE_PORT": str(worker.port), "WAKER_PORT": str(waker.port)}
        try:
            waker.start()
            done = run_document(DOC, tmp_path, store=store, env=env, addresses=addresses, namespace=namespace)
        finally:
            if "server" in namespace:  # the guide's webhook receiver, which it leaves serving
                namespace["server"].shutdown()
                namespace["server"].server_close()
            waker.stop()
        with worker.client() as api:
            # The guide's receiver answered 2xx: its verify_webhook passed on the real delivery.
            assert metric(api, "penelope_webhook_delivery_latency_seconds_count") == 1
            started = api.post(
                "/main/plugin/demo/open-account",
                json={"handle": "alice"},
                headers={"X-Callback-Url": receiver.url + HOOK},
            )
            assert started.status_code == 202, started.text
            wait_until(lambda: receiver.received(HOOK), what="the delivery")
        settings.PENELOPE_WEBHOOK_SECRET = (store / "webhook_secret").read_text().strip()
        stored, paged = [], []
        namespace.update(
            store_once=lambda job_id, job: stored.append(job_id),
            page_someone=lambda reason, url: paged.append((reason, url)),
            PENELOPE_ROOT=worker.base_url,
        )
        assert call_view(namespace["penelope_hook"], receiver.received(HOOK)[0]) == 200
        assert stored == [started.json()["job_id"]]
        asked = receiver.received(ASKS)
        assert [json.loads(message.body)["type"] for message in asked] == ["job.needs_human"]
        assert call_view(namespace["penelope_asks"], asked[0]) == 200
        assert "/demo/mail-inbox/alice/" in paged[0][0] and paged[0][1].startswith(worker.base_url + "/live/")
        assert call_view(namespace["penelope_asks"], asked[0], body=asked[0].body + b" ") == 401
    assert not person.errors, person.errors
    assert len(person.answered) == 1  # the person-in-the-loop block's sign-in
    assert (len(done.ran), len(done.not_run), done.compared) == (25, 3, 42)


def call_view(view, message, body: bytes | None = None) -> int:
    """The status a guide's Django view answers a message the worker sent."""
    headers = {name: value for name, value in message.headers.items() if name.lower() not in CONTENT}
    request = RequestFactory().post("/", data=body or message.body, content_type="application/json", headers=headers)
    return view(request).status_code
