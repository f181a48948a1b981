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


def watch(person: Browser, base_url: str, url: str) -> Page:
    """Open a live link in a new tab of the person's browser and wait for its first frame."""
    tab = person.new_page(viewport={"width": 900, "height": 700})  # not the worker's size: positions are fractions
    tab.goto(url if url.startswith("http") else base_url + url)
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


# Where the checkpoint's field and button are, as fractions of the viewport.
FIELDS_JS = """() => Object.fromEntries(["code", "confirm"].map((id) => {
    const box = document.getElementById(id).getBoundingClientRect();
    return [id, {x: (box.left + box.width / 2) / innerWidth, y: (box.top + box.height / 2) / innerHeight}];
}))"""


def read_code(person: Browser, site: str, handle: str) -> str:
    """What a person does first: read the code in the demo inbox, in a browser of their own."""
    inbox = person.new_page()
    inbox.goto(f"{site}/demo/mail-inbox/{handle}/")
    code = inbox.inner_text("#code")
    inbox.close()
    return code


def fields_of(person: Browser, tab: Page, checkpoint_url: str) -> dict:
    """The checkpoint's field and button on the worker's page, which a job
    holds: the same page at the frame's size in the person's own browser
    says where they are."""
    size = tab.evaluate("() => { const img = document.getElementById('frame'); return [img.naturalWidth, img.naturalHeight]; }")
    twin = person.new_page(viewport={"width": size[0], "height": size[1]})
    twin.goto(checkpoint_url)
    at = twin.evaluate(FIELDS_JS)
    twin.close()
    return at


def pass_checkpoint(person: Browser, live_url: str, site: str, handle: str) -> None:
    """Through the question's live link: type the inbox's code, Confirm, see
    the signed-in page, press Done."""
    code = read_code(person, site, handle)
    tab = watch(person, site, live_url)
    at = fields_of(person, tab, f"{site}/demo/check-point/{handle}/")
    tab.bring_to_front()  # the twin took the front: the person looks at the live page again
    click_and_type(tab, at["code"], code)
    box = tab.locator("#frame").bounding_box()
    tab.mouse.click(box["x"] + at["confirm"]["x"] * box["width"], box["y"] + at["confirm"]["y"] * box["height"])
    tab.wait_for_function("() => document.getElementById('title').textContent === 'Welcome'")
    tab.click("#done")
    tab.close()
