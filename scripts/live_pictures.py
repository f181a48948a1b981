"""Takes the pictures of docs/guides/HUMAN_IN_THE_LOOP.md: a real worker,
demo/sign-in asking a person, and the live page as the person sees it.

    .venv/bin/python scripts/live_pictures.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from harness.worker import WorkerProcess, wait_until  # noqa: E402
from tests.support.faults import real_chromium  # noqa: E402
from tests.support.live import fields_of, read_code  # noqa: E402

IMAGES = ROOT / "docs" / "guides" / "images"


def main() -> None:
    executable = real_chromium()
    with tempfile.TemporaryDirectory() as scratch:
        worker = WorkerProcess(Path(scratch) / "store").start()
        try:
            with worker.client() as api, sync_playwright() as playwright:
                person = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"] if os.geteuid() == 0 else [])
                started = api.post("/main/plugin/demo/sign-in", json={"handle": "alice"}, headers={"X-Result-Ttl": "600"})
                job_id = started.json()["job_id"]
                human = wait_until(lambda: api.get(f"/jobs/{job_id}").json().get("human"))
                code = read_code(person, worker.base_url, "alice")
                inbox = person.new_page(viewport={"width": 900, "height": 360})
                inbox.goto(f"{worker.base_url}/demo/mail-inbox/alice/")
                inbox.screenshot(path=IMAGES / "live-inbox.png")
                tab = person.new_page(viewport={"width": 1100, "height": 760})
                tab.goto(worker.base_url + human["live_url"])
                tab.wait_for_function("() => Number(document.body.dataset.frames) > 0")
                tab.wait_for_selector("#human.asked")
                tab.screenshot(path=IMAGES / "live-asked.png")
                at = fields_of(person, tab, f"{worker.base_url}/demo/check-point/alice/")
                box = tab.locator("#frame").bounding_box()
                tab.mouse.click(box["x"] + at["code"]["x"] * box["width"], box["y"] + at["code"]["y"] * box["height"])
                tab.keyboard.type(code)
                tab.wait_for_timeout(1000)  # a picture, not a test: the last keystroke's frame shown
                tab.screenshot(path=IMAGES / "live-typed.png")
                tab.mouse.click(box["x"] + at["confirm"]["x"] * box["width"], box["y"] + at["confirm"]["y"] * box["height"])
                tab.wait_for_function("() => document.getElementById('title').textContent === 'Welcome'")
                tab.click("#done")
                print(api.get(f"/jobs/{job_id}", params={"wait": 30}).json()["result"])
                person.close()
        finally:
            worker.stop()


if __name__ == "__main__":
    main()
