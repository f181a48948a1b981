"""docs/guides/HUMAN_IN_THE_LOOP.md's blocks run, in order, as written,
after the README's variables, against a real worker started as the README
starts it on a port that is not 5000 (`PENELOPE_PORT`) (tests/support/docs.py), with the
person its flow needs played by a Chromium of the test's own; and what the
guide says of the live page's policy holds for a test that drives it."""

from __future__ import annotations

import os
import re
import threading
import time

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import sync_playwright
from standardwebhooks import WebhookVerificationError

from harness.receiver import Receiver
from harness.worker import ROOT, WorkerProcess
from tests.support.docs import documented_worker, run_document
from tests.support.faults import real_chromium
from tests.support.live import make_link, pass_checkpoint, watch

DOC = ROOT / "docs" / "guides" / "HUMAN_IN_THE_LOOP.md"

INBOX = re.compile(r"/demo/mail-inbox/([a-z0-9_.]+)/")
# A person reads a question before they act on it; the guides' loops, which
# poll each second, see it meanwhile.
REACTION_S = 2


class Person:
    """The person of the guides' flows, in a thread with a Chromium of their
    own: when a running job of the worker asks for the demo checkpoint (its
    list entry has `human`), they read the code in the demo inbox, type it
    into the question's live link, press Confirm, then Done, as the guide
    tells a reader to (tests/support/live.py, pass_checkpoint), a moment
    after it was asked."""

    def __init__(self, worker: WorkerProcess) -> None:
        self.worker = worker
        self.answered: list[str] = []
        self.errors: list[BaseException] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, name="person", daemon=True)

    def __enter__(self) -> Person:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.thread.join(60)
        assert not self.thread.is_alive(), "the person's browser did not close"

    def run(self) -> None:
        try:
            executable = real_chromium()  # its own Playwright first: one per thread at a time
            args = ["--no-sandbox"] if os.geteuid() == 0 else []
            with sync_playwright() as playwright, self.worker.client() as api:
                browser = playwright.chromium.launch(executable_path=executable, args=args)
                try:
                    while not self.stopping.wait(0.2):
                        for job in api.get("/jobs", params={"state": "running"}).json()["jobs"]:
                            self.answer(api, browser, job)
                finally:
                    browser.close()
        except BaseException as error:  # said by the test that uses the person
            self.errors.append(error)

    def answer(self, api, browser, job: dict) -> None:
        human = job.get("human")
        asked_for = INBOX.search(human["reason"]) if human else None
        if asked_for is None or job["job_id"] in self.answered or time.time() < human["asked_at"] + REACTION_S:
            return
        self.answered.append(job["job_id"])
        base = self.worker.base_url
        try:
            pass_checkpoint(browser, base + human["live_url"], base, asked_for[1])
        except Exception as error:  # end the job, so that the block waiting for it fails now, not in 600 s
            self.errors.append(error)
            api.post(f"/jobs/{job['job_id']}/cancel")


def test_every_block_of_the_human_in_the_loop_guide_runs(tmp_path):
    store = tmp_path / "store"
    namespace: dict = {}
    with documented_worker(store) as worker, Person(worker) as person, Receiver() as receiver:
        env = {"PENELOPE_PORT": str(worker.port)}
        done = run_document(DOC, tmp_path, store=store, env=env, after_readme=True, namespace=namespace)
        assert "checkout" in namespace["family"].actions  # the plugin that asks, defined as written
        # The notification handler, with a real job.needs_human of a sign-in started with X-Notify-Url.
        with worker.client() as api:
            started = api.post(
                "/main/plugin/demo/sign-in",
                json={"handle": "bob"},
                headers={"X-Result-Ttl": "60", "X-Notify-Url": receiver.url + "/200/asks"},
            )
            assert started.status_code == 202, started.text
            ended = api.get(f"/jobs/{started.json()['job_id']}", params={"wait": 30}).json()
        assert ended["result"]["signed_in"] is True, ended  # the person passed bob's checkpoint too
        paged: list[tuple[str, str]] = []
        namespace.update(
            WEBHOOK_SECRET=(store / "webhook_secret").read_text().strip(),
            WORKER=worker.base_url,
            page_someone=lambda reason, url: paged.append((reason, url)),
        )
        [message] = receiver.received("/200/asks")
        namespace["on_notification"](message.body, message.headers)
        assert "/demo/mail-inbox/bob/" in paged[0][0] and paged[0][1].startswith(worker.base_url + "/live/")
        with pytest.raises(WebhookVerificationError):
            namespace["on_notification"](message.body + b" ", message.headers)
    assert not person.errors, person.errors
    assert len(person.answered) == 2
    assert (len(done.ran), len(done.not_run), done.compared) == (5, 0, 3)


# Each string run as JavaScript from a task of the page's own (a timer), as
# the page's script would run it, not from within Playwright's call.
LATER = """() => new Promise((answer) => setTimeout(() => {
    const tried = {};
    for (const [name, run] of [["eval", () => eval("1")], ["Function", () => new Function("return 1")()]]) {
        try { run(); tried[name] = "ran"; } catch (error) { tried[name] = error.name; }
    }
    answer(tried);
}, 0))"""


def test_the_live_page_refuses_eval_unless_a_test_bypasses_its_policy(api, worker, person):
    """The guide's "Safety" and "Driving the live page from a test": the
    page's policy refuses a string run as JavaScript and a script without its
    nonce, a test's functions pass, a bare expression fails once it is polled
    again, and a context with `bypass_csp=True` runs them all."""
    link = make_link(api)
    strict = watch(person, worker.base_url, link["url"])
    assert strict.evaluate(LATER) == {"eval": "EvalError", "Function": "EvalError"}
    strict.wait_for_function("() => document.body.dataset.state === 'live'")
    strict.wait_for_function("document.body.dataset.state === 'live'")  # a bare expression true at once
    strict.evaluate("() => setTimeout(() => { window.later = true; }, 300)")
    with pytest.raises(PlaywrightError, match="EvalError: Evaluating a string as JavaScript violates .* 'unsafe-eval'"):
        strict.wait_for_function("window.later === true", timeout=5000)  # polled again, with eval
    with pytest.raises(PlaywrightError, match="Executing inline script violates .* 'script-src 'nonce-"):
        strict.add_script_tag(content="window.added = true")
    strict.close()
    context = person.new_context(bypass_csp=True)
    try:
        loose = context.new_page()
        loose.goto(worker.base_url + link["url"])
        assert loose.evaluate(LATER) == {"eval": "ran", "Function": "ran"}
        loose.evaluate("() => setTimeout(() => { window.later = true; }, 300)")
        loose.wait_for_function("window.later === true", timeout=5000)
        loose.add_script_tag(content="window.added = true")
        assert loose.evaluate("() => window.added") is True
    finally:
        context.close()
    api.delete("/main/live")
