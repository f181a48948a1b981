"""Takes the pictures of docs/guides/CONSOLE.md from a real run: a waker with
three personas, each left as the guide describes it, and a real Chromium
signed in to the console.

- `alice` (sleepy): woken once to do some work and keep a schedule, then
  stopped: asleep, read from her store;
- `bob` (sleepy): awake and busy, a sign-in waiting for a person on `main`
  and two more jobs queued behind it;
- `carol` (always): a few minutes of calls, some of them failing.

    .venv/bin/python scripts/console_pictures.py [--minutes 3]

It takes as long as `--minutes` says, so the per-minute charts have minutes
to draw.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from harness.waker import WakerProcess  # noqa: E402
from harness.worker import wait_until  # noqa: E402
from tests.support.faults import real_chromium  # noqa: E402

IMAGES = ROOT / "docs" / "guides" / "images"
JOB = {"X-Result-Ttl": "600"}


def leave_alice_asleep(waker: WakerProcess) -> None:
    waker.start_persona("alice")
    with waker.direct("alice") as api:
        for handle in ("alice", "bob", "ghost"):
            job = api.post("/main/plugin/demo/get-following", json={"handle": handle, "limit": 5}, headers=JOB)
            assert job.status_code == 202, job.text
            api.get(f"/jobs/{job.json()['job_id']}", params={"wait": 60})
        schedule = {
            "name": "nightly-following", "cron": "0 3 * * *", "page_id": "main", "plugin": "demo/get-following",
            "params": {"handle": "alice", "limit": 20}, "result_ttl": 600,
        }
        assert api.post("/schedules", json=schedule).status_code == 201
    with waker.client() as api:
        assert api.post("/personas/alice/stop", json={}).status_code == 200


def keep_bob_busy(waker: WakerProcess) -> None:
    waker.start_persona("bob")
    with waker.direct("bob") as api:
        api.post("/main/plugin/demo/sign-in", json={"handle": "bob"}, headers=JOB)
        for handle in ("alice", "carol"):
            queued = {**JOB, "X-Queue-Timeout": "600"}
            api.post("/main/plugin/demo/get-following", json={"handle": handle, "limit": 5}, headers=queued)


def carol_works(waker: WakerProcess, minutes: float) -> None:
    """A call or a job every few seconds for `minutes`, one in three for
    `ghost`, an account that does not exist."""
    waker.wait_for("carol", lambda body: body["state"] == "running", timeout=120)
    deadline = time.monotonic() + minutes * 60
    with waker.direct("carol") as api:
        count = 0
        while time.monotonic() < deadline:
            handle = "ghost" if count % 3 == 2 else ("alice", "bob", "carol")[count % 4 % 3]
            body = {"handle": handle, "limit": 5}
            if count % 2:  # a job, then a plain call
                job = api.post("/main/plugin/demo/get-following", json=body, headers=JOB).json()
                api.get(f"/jobs/{job['job_id']}", params={"wait": 60})
            else:
                api.post("/main/plugin/demo/get-following", json=body)
            count += 1
            time.sleep(4)


def point_at_the_busiest_minute(page) -> None:
    """Hover the Calls chart's busiest minute, so the picture shows a bucket's values."""
    buckets = page.locator('[data-chart="Calls"] rect.hit')
    said = [buckets.nth(index).locator("title").text_content() for index in range(buckets.count())]
    calls = [sum(int(number) for number in re.findall(r" (\d+)(?:,|$)", words)) for words in said]
    busiest = max(range(len(calls)), key=calls.__getitem__)
    buckets.nth(busiest).hover()
    page.wait_for_selector('[data-chart="Calls"] [data-readout].shown')


def pictures(waker: WakerProcess) -> None:
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    executable = real_chromium()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=args)
        page = browser.new_page(viewport={"width": 1400, "height": 420})
        page.goto(waker.base_url + "/console/")
        page.fill("input[name=key]", waker.key)
        page.click("button[type=submit]")
        page.wait_for_selector('tr[data-persona="carol"]')
        page.screenshot(path=IMAGES / "console-fleet.png")
        page.set_viewport_size({"width": 1200, "height": 900})
        page.goto(waker.base_url + "/console/p/carol/")
        point_at_the_busiest_minute(page)
        page.screenshot(path=IMAGES / "console-persona.png", full_page=False)
        # The day view: dated hours, and alice's one reading of memory drawn as a dot.
        page.set_viewport_size({"width": 1200, "height": 700})
        page.goto(waker.base_url + "/console/p/alice/?scale=hour")
        page.locator(".charts").screenshot(path=IMAGES / "console-day.png")
        page.goto(waker.base_url + "/console/p/bob/")
        page.set_viewport_size({"width": 1200, "height": 520})
        page.goto(waker.base_url + "/console/p/bob/act?action=stop")
        page.screenshot(path=IMAGES / "console-confirm.png")
        page.set_viewport_size({"width": 1400, "height": 520})
        page.goto(waker.base_url + "/console/jobs")  # the newest jobs, before any search
        page.screenshot(path=IMAGES / "console-jobs.png")
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=3.0)
    minutes = parser.parse_args().minutes
    with tempfile.TemporaryDirectory() as scratch:
        waker = WakerProcess(
            Path(scratch),
            [
                {"name": "alice", "mode": "sleepy", "idle_timeout_s": 600},
                {"name": "bob", "mode": "sleepy", "idle_timeout_s": 600},
                {"name": "carol", "mode": "always"},
            ],
            env={"WAKER_MEMORY_EVERY_S": "5", "DEMO_PAUSE_MS": "50"},
        ).start()
        try:
            leave_alice_asleep(waker)
            keep_bob_busy(waker)
            carol_works(waker, minutes)
            wait_until(lambda: waker.persona("alice")["state"] == "stopped", what="alice asleep")
            pictures(waker)
        finally:
            waker.stop()
    print(f"pictures in {IMAGES}")


if __name__ == "__main__":
    main()
