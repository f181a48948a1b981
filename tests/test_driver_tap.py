"""The worker's end of the driver tap (browser/tap.py) reads NUL-ended
messages whatever the reads cut them into, and the mux (cdp/mux.py) hears
every answer to what it sent, on a real Chromium; tests/test_cdp.py drives
real clients through it, and checks who may connect."""

from __future__ import annotations

import asyncio
import json
import os
import socket

from playwright.async_api import async_playwright

from browser.flags import clear_driver_tap, set_driver_options
from browser.tap import HIGH_WATER, PART, DriverTap, Link
from cdp.mux import Mux, json_pieces
from tests.support.faults import real_chromium

ROOT_ARGS = ["--no-sandbox"] if os.geteuid() == 0 else []


def test_a_link_hears_each_message_whole_however_the_reads_cut_them():
    link, heard = Link(), []
    link.on_message = heard.append
    link.data_received(b'{"id":1}\0{"id":2}\0{"id"')
    link.data_received(b':3,"x":"')
    link.data_received(("é" * 5).encode()[:3])
    link.data_received(("é" * 5).encode()[3:] + b'"}\0')
    link.data_received(b'{"id":4}\0')
    assert heard == ['{"id":1}', '{"id":2}', '{"id":3,"x":"ééééé"}', '{"id":4}']


class Recorder:
    """A bridge's place at the mux (cdp/mux.py's `Owner`): what it is told."""

    def __init__(self) -> None:
        self.heard: list[str] = []
        self.ended: list[str] = []

    def from_target(self, session_id: str, message: str) -> None:
        self.heard.append(message)

    def detached(self, session_id: str) -> None:
        self.ended.append(session_id)

    def target_news(self, method: str, params: dict) -> None:
        pass

    def browser_gone(self) -> None:
        pass


def test_a_message_to_a_session_chromium_ended_is_answered_to_its_sender_and_playwright_is_untouched():
    """Chromium answers a message for a session it no longer has at the
    root, without the session's id. The mux's own negative ids bring that
    answer back to the worker, and the client gets it with its own id; it
    never reaches Playwright, whose calls in flight have ids of their own."""

    executable = real_chromium()

    async def run() -> tuple[Recorder, str, int]:
        tap = DriverTap()
        set_driver_options(await tap.open())
        try:
            async with async_playwright() as playwright:
                clear_driver_tap()
                browser = await playwright.chromium.launch(executable_path=executable, args=ROOT_ARGS)
                page = await browser.new_page()
                session = await page.context.new_cdp_session(page)
                target = (await session.send("Target.getTargetInfo"))["targetInfo"]["targetId"]
                mux = await Mux.open(browser.contexts[0], await tap.link(10))
                owner = Recorder()
                attached = await mux.attach(target, owner)
                answered = asyncio.Event()
                owner.from_target = lambda session_id, message: (owner.heard.append(message), answered.set())
                # Chromium ends the session; the mux sends into it before it hears so.
                await mux.call("Target.detachFromTarget", {"sessionId": attached})
                mux.owners[attached] = owner  # as when the end is still on its way
                assert mux.post(attached, 7, "Runtime.evaluate", {"expression": "1+1"})
                await asyncio.wait_for(answered.wait(), 10)
                value = await page.evaluate("6 * 7")
                await browser.close()
                return owner, attached, value
        finally:
            await tap.close()

    owner, attached, value = asyncio.run(run())
    answer = json.loads(owner.heard[-1])
    assert answer["id"] == 7 and answer["sessionId"] == attached and answer["error"]["code"] == -32001, answer
    assert value == 42


def test_a_large_message_goes_to_the_tap_in_parts_as_it_takes_them_and_the_loop_runs_between():
    """The worker's end of the tap writes a large message in parts, each once
    the tap took enough of the one before: while the tap reads nothing, the
    link holds about HIGH_WATER bytes of it, not the whole message, and the
    event loop runs other work between the parts. It wrote the whole
    message at once, in one step, and held all of it."""

    async def run() -> None:
        worker_end, tap_end = socket.socketpair()
        tap_end.setblocking(False)
        link = Link()
        await asyncio.get_running_loop().create_unix_connection(lambda: link, sock=worker_end)
        turns = 0

        async def count_turns() -> None:
            nonlocal turns
            while True:
                turns += 1
                await asyncio.sleep(0)

        counting = asyncio.ensure_future(count_turns())
        message = {"id": -10_000, "method": "Runtime.evaluate", "params": {"expression": "é" + "y" * (24 * PART)}}
        text = json.dumps(message, separators=(",", ":"))
        link.send(json_pieces(message))
        link.send('{"id":-10001}')  # after it, in order
        assert not link.drained
        while turns < 64:  # the tap takes nothing meanwhile
            await asyncio.sleep(0)
        assert not link.drained and link.transport.get_write_buffer_size() <= HIGH_WATER + 2 * PART
        received = bytearray()
        while not (link.drained and received.endswith(b"\0")):
            try:
                received += tap_end.recv(1024 * 1024)
            except BlockingIOError:
                await asyncio.sleep(0)
        counting.cancel()
        await link.wait_drained()
        assert bytes(received) == text.encode() + b'\0{"id":-10001}\0'
        link.close()
        tap_end.close()

    asyncio.run(run())


def test_json_pieces_make_what_json_dumps_makes():
    values = [
        {"id": 1, "params": {"a": "é" * (PART + 3) + "\ud800" + "\U0001f600" * 5, "b": [1, 2.5, None, True, {"c": "d"}], "e": {}}},
        [], {}, "x", 1e300, float("nan"), ["\\\"\n" * PART],
    ]
    for value in values:
        assert "".join(json_pieces(value)) == json.dumps(value, separators=(",", ":"))
