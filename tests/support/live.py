"""Helpers of the live-view tests: links, the person's tab, the page's field."""

from __future__ import annotations

import httpx
from playwright.sync_api import Browser, Page
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect


def make_link(api: httpx.Client, page: str = "main", **body) -> dict:
    made = api.post(f"/{page}/live", json=body)
    assert made.status_code == 201, made.text
    return made.json()


def metric(api: httpx.Client, name: str) -> float:
    for line in api.get("/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no metric {name}")


def evaluate(api: httpx.Client, expression: str, page: str = "main"):
    answer = api.post(f"/{page}/primitive/evaluate", json={"expression": expression})
    assert answer.status_code == 200, answer.text
    return answer.json()["value"]


def watch(person: Browser, worker, url: str) -> Page:
    """Open a live link in a new tab of the person's browser and wait for its first frame."""
    tab = person.new_page(viewport={"width": 900, "height": 700})  # not the worker's size: positions are fractions
    tab.goto(worker.base_url + url)
    tab.wait_for_function("() => Number(document.body.dataset.frames) > 0")
    return tab


def frames(tab: Page) -> int:
    return int(tab.evaluate("document.body.dataset.frames"))


def socket_close_code(worker, url: str) -> int:
    """The close code a raw WebSocket on the link gets, reading until it closes."""
    with connect(worker.base_url.replace("http", "ws") + url + "/ws", open_timeout=10) as socket:
        try:
            while True:
                socket.recv(timeout=10)
        except ConnectionClosed as closed:
            return closed.rcvd.code


def put_field(api: httpx.Client) -> dict:
    """A page with one text field; where it is, as fractions of the viewport."""
    return evaluate(api, """() => {
        document.title = "A field";
        document.body.innerHTML = '<input id="field" style="position:absolute;left:40px;top:60px;width:300px;height:40px">';
        const box = document.getElementById("field").getBoundingClientRect();
        return {x: (box.left + box.width / 2) / innerWidth, y: (box.top + box.height / 2) / innerHeight};
    }""")


def click_and_type(tab: Page, at: dict, text: str) -> None:
    box = tab.locator("#frame").bounding_box()
    tab.mouse.click(box["x"] + at["x"] * box["width"], box["y"] + at["y"] * box["height"])
    tab.keyboard.type(text)
