"""The live view: how soon a person sees the page, how soon their input
shows, and what a viewer costs the worker and its browser.

A second Chromium in this process is the person. Each figure is taken in
the person's own page (its clock, its frames), so no round trip of the
benchmark's own is counted:
- first frame: from the link's navigation start to the first frame drawn;
- input to a visible change: a press on a page that turns its colour on each
  press, from the press to the first frame whose pixel there has the new
  colour;
- CPU: the worker's and the browser's CPU seconds over a window while the
  page animates (a frame due every paint), with no viewer and with one.
"""

from __future__ import annotations

import os
import shutil
import time

import httpx

from bench.report import Plan, Report, Row, lat
from bench.stats import Latency
from browser.processes import is_browser
from core.procfs import descendants

TICKS = os.sysconf("SC_CLK_TCK")

# A page that turns red or blue, whole, at each press.
PAD_JS = """() => {
    document.body.innerHTML = '<div id="pad" style="position:fixed;inset:0;background:rgb(0,0,255)"></div>';
    const pad = document.getElementById("pad");
    pad.addEventListener("mousedown", () => {
        pad.style.background = pad.style.background === "rgb(0, 0, 255)" ? "rgb(255, 0, 0)" : "rgb(0, 0, 255)";
    });
}"""

# A page that changes every frame (a running clock), for the CPU a stream costs.
ANIMATED_JS = """() => {
    document.body.innerHTML = '<h1 id="clock" style="font-size:120px"></h1>';
    const clock = document.getElementById("clock");
    const tick = () => { clock.textContent = performance.now().toFixed(0); requestAnimationFrame(tick); };
    tick();
}"""

# In the live page: press the middle of the frame and answer the milliseconds
# until a frame shows `want` (red or blue) there.
PRESS_AND_SEE_JS = """async (want) => {
    const img = document.getElementById("frame");
    const canvas = document.createElement("canvas");
    const paint = canvas.getContext("2d", {willReadFrequently: true});
    const shows = () => {
        canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
        paint.drawImage(img, 0, 0);
        const [r, , b] = paint.getImageData(img.naturalWidth / 2, img.naturalHeight / 2, 1, 1).data;
        return want === "red" ? r > 200 && b < 60 : b > 200 && r < 60;
    };
    const box = img.getBoundingClientRect();
    const at = {clientX: box.left + box.width / 2, clientY: box.top + box.height / 2, button: 0, bubbles: true};
    return await new Promise((resolve) => {
        const started = performance.now();
        img.addEventListener("load", function seen() {
            if (shows()) { img.removeEventListener("load", seen); resolve(performance.now() - started); }
        });
        img.dispatchEvent(new MouseEvent("mousedown", at));
        img.dispatchEvent(new MouseEvent("mouseup", at));
    });
}"""


def person_chromium() -> str:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        own = playwright.chromium.executable_path
    if own and os.access(own, os.X_OK):
        return own
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if found := shutil.which(name):
            return found
    raise RuntimeError("no Chromium for the person's browser")


def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rpartition(")")[2].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except (OSError, ValueError, IndexError):
            pass
    return total / TICKS


def cpu_over(worker_pid: int, seconds: float) -> tuple[float, float]:
    """The worker's and its browser's CPU, in % of one core, over `seconds`."""
    browser = [pid for pid in descendants(worker_pid) if is_browser(pid)]
    before = cpu_seconds([worker_pid]), cpu_seconds(browser)
    time.sleep(seconds)
    after = cpu_seconds([worker_pid]), cpu_seconds(browser)
    return tuple(100 * (b - a) / seconds for a, b in zip(before, after, strict=True))


def link(client: httpx.Client, control: bool) -> str:
    made = client.post("/main/live", json={"control": control, "ttl": 600})
    made.raise_for_status()
    return made.json()["url"]


def evaluate(client: httpx.Client, expression: str) -> None:
    client.post("/main/primitive/evaluate", json={"expression": expression}).raise_for_status()


def live_phase(worker, client: httpx.Client, plan: Plan, report: Report) -> None:
    from playwright.sync_api import sync_playwright

    opens, presses = (20, 60) if plan.name == "full" else (5, 15)
    window_s = 10.0 if plan.name == "full" else 4.0
    executable = person_chromium()
    with sync_playwright() as playwright:
        person = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"] if os.geteuid() == 0 else [])
        try:
            evaluate(client, PAD_JS)
            first_frames = []
            for _ in range(opens):
                tab = person.new_page()
                tab.goto(worker.base_url + link(client, control=False))
                tab.wait_for_function("() => Number(document.body.dataset.frames) > 0")
                # The live page marks its first frame; navigation starts at 0.
                first_frames.append(tab.evaluate('() => performance.getEntriesByName("penelope-first-frame")[0].startTime'))
                tab.close()
            first = Latency.of(first_frames)
            report.add(Row(f"Live view: opening a link → its first frame drawn ({opens} opens)", lat(first), "", "",
                           "p50 ≤ 1 s", first.p50 <= 1000))
            tab = person.new_page()
            tab.goto(worker.base_url + link(client, control=True))
            tab.wait_for_function("() => Number(document.body.dataset.frames) > 0")
            shown = [tab.evaluate(PRESS_AND_SEE_JS, "red" if turn % 2 == 0 else "blue") for turn in range(presses)]
            tab.close()
            seen = Latency.of(shown)
            report.add(Row(f"Live view: a press → the frame that shows it ({presses} presses)", lat(seen), "", "",
                           "p50 ≤ 150 ms", seen.p50 <= 150))
            evaluate(client, ANIMATED_JS)
            alone = cpu_over(worker.process.pid, window_s)
            tab = person.new_page()
            tab.goto(worker.base_url + link(client, control=False))
            tab.wait_for_function("() => Number(document.body.dataset.frames) > 0")
            started = int(tab.evaluate("document.body.dataset.frames"))
            watched = cpu_over(worker.process.pid, window_s)
            rate = (int(tab.evaluate("document.body.dataset.frames")) - started) / window_s
            tab.close()
            for name, none, one in (("worker", alone[0], watched[0]), ("browser", alone[1], watched[1])):
                report.add(Row(
                    f"Live view: the {name}'s CPU on an animated page, one viewer ({rate:.1f} frames/s) against none",
                    f"{one:.1f} % of a core", f"{none:.1f} % with no viewer", f"+{one - none:.1f} points", "", None,
                ))
        finally:
            client.delete("/main/live")
            evaluate(client, "() => { document.body.innerHTML = ''; }")
            person.close()
