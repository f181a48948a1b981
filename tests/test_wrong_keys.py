"""A wrong key waits its turn on every route that takes a key, the worker's
and the waker's alike (core/wrong_keys.py).

The routes come from the URL configurations (the waker's read in a process
of its own, under its settings), so a new route is covered as it is added.
On each, N wrong keys sent at once from one address are answered one turn
apart: the k-th answer comes no sooner than k turns after they were sent.
Only lower bounds are asserted: a loaded machine makes answers later, never
sooner. A right key is not held behind wrong ones, and a flood of wrong keys
from one address is answered 429 without its keys being compared."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest
from django.urls import get_resolver
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from core import wrong_keys
from core.api import status_of
from core.errors import Refusal
from core.rest import envelope_handler
from core.wrong_keys import KeyFlood, WrongKeys, scope_address
from harness.waker import WakerProcess
from harness.worker import ROOT, TEST_KEY, WorkerProcess

TURN_S = 0.25
QUEUE = 4
AT_ONCE = 3  # wrong keys sent together on each route: fewer than QUEUE, so all are compared
SAMPLE = {
    "page_id": "main",
    "family": "web",
    "action": "state",
    "name": "nap",
    "token": "abc",
    "job_id": "0123456789abcdef",
    "schedule_id": "0123456789abcdef",
}
WRONG = {"Authorization": "Bearer not-the-key"}
SETTINGS = {"KEY_REFUSAL_S": str(TURN_S), "KEY_REFUSAL_QUEUE": str(QUEUE)}


def concrete(route: str) -> str:
    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda m: SAMPLE[m.group(1)], route)


def worker_routes() -> list[str]:
    """Every route of the worker's API that takes its key: all but health."""
    routes = []
    for pattern in get_resolver().url_patterns:
        route = str(getattr(pattern, "pattern", ""))
        if route.startswith("api/v1/") and route != "api/v1/health":
            routes.append(concrete(route))
    return routes


# Printed by a process with the waker's settings: its URL configuration, the console's included.
WAKER_ROUTES = """
import json, os
os.environ["DJANGO_SETTINGS_MODULE"] = "penelope_site.waker_settings"
import django
django.setup()
from django.urls import URLResolver, get_resolver
def walk(patterns, prefix=""):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
        else:
            yield prefix + str(pattern.pattern)
print(json.dumps(list(walk(get_resolver().url_patterns))))
"""
# The waker's routes that take no key: health, the console's sign-in page
# (whose form takes it: tested on its own) and its static files.
WAKER_KEYLESS = {"api/v1/health", "console/sign-in", "console/static/<str:name>"}


def waker_routes() -> list[str]:
    printed = subprocess.run([sys.executable, "-c", WAKER_ROUTES], cwd=ROOT, capture_output=True, text=True, check=True)
    routes = [concrete(route) for route in json.loads(printed.stdout) if route not in WAKER_KEYLESS]
    # And the proxy in front of Django, which checks the persona's keys before it wakes anyone.
    return [*routes, "/w/nap/api/v1/pages"]


async def answered(
    client: httpx.AsyncClient, path: str, headers: dict[str, str], began: float, method: str = "GET"
) -> tuple[httpx.Response, float]:
    # A POST carries a small body (an upload's: a file's bytes).
    content = b"x" * 1000 if method == "POST" else None
    response = await client.request(method, path, headers=headers, content=content)
    return response, time.monotonic() - began


async def wrong_at_once(base_url: str, path: str, count: int = AT_ONCE, source: str = "127.0.0.1", method: str = "GET"):
    """`count` wrong keys sent together from `source`: their answers, and
    when each came, in seconds since they were sent, in the order they came."""
    transport = httpx.AsyncHTTPTransport(local_address=source)
    async with httpx.AsyncClient(base_url=base_url, transport=transport, timeout=60) as client:
        began = time.monotonic()
        results = await asyncio.gather(*(answered(client, path, WRONG, began, method) for _ in range(count)))
    return sorted(results, key=lambda result: result[1])


def assert_one_turn_apart(results: list[tuple[httpx.Response, float]], what: str) -> None:
    for turn, (_, seconds) in enumerate(results, start=1):
        assert seconds >= turn * TURN_S - 0.01, f"{what}: wrong key {turn} answered after {seconds:.3f} s"


async def socket_refused_after(url: str, began: float) -> float:
    with pytest.raises(InvalidStatus):
        async with connect(url, additional_headers=WRONG, open_timeout=60):
            pass
    return time.monotonic() - began


async def sockets_at_once(url: str) -> list[float]:
    began = time.monotonic()
    return sorted(await asyncio.gather(*(socket_refused_after(url, began) for _ in range(AT_ONCE))))


# --- the rule itself -----------------------------------------------------------------------


@pytest.fixture
def turns(settings) -> WrongKeys:
    settings.KEY_REFUSAL_S = TURN_S
    settings.KEY_REFUSAL_QUEUE = QUEUE
    return WrongKeys()


def never(*_: object) -> bool:
    raise AssertionError("a flood's key was compared")


def test_the_wrong_keys_of_one_address_take_turns_and_a_right_key_none(turns):
    now = time.monotonic()
    dues = [turns.judge("192.0.2.1", lambda: False) for _ in range(3)]
    assert dues[0] >= now + TURN_S
    assert [round(later - earlier, 6) for earlier, later in zip(dues, dues[1:], strict=False)] == [TURN_S, TURN_S]
    # Another address has its own turns; a right key, from either, has none.
    assert turns.judge("192.0.2.2", lambda: False) < dues[1]
    assert turns.judge("192.0.2.1", lambda: True) is None
    assert turns.judge("192.0.2.3", lambda: True) is None
    assert turns.remembered() == 2


def test_a_flood_is_refused_without_its_key_compared_and_says_when_to_come_back(turns):
    for _ in range(QUEUE):
        assert turns.judge("192.0.2.1", lambda: False) is not None
    with pytest.raises(KeyFlood) as flood:
        turns.judge("192.0.2.1", never)
    assert flood.value.retry_after_s >= 1 and "KEY_REFUSAL_QUEUE" in flood.value.message
    assert turns.judge("192.0.2.2", lambda: True) is None  # others are not held up


def test_a_flood_is_a_refusal_of_the_one_table_answered_with_its_retry_after():
    """KeyFlood is a refusal (core/errors.py) whose status is the table's, and
    the API's handler gives any refusal that knows when to come back its
    Retry-After: a flood's as a full queue's."""
    flood = KeyFlood(3)
    assert isinstance(flood, Refusal) and status_of(flood) == 429
    response = envelope_handler(flood, {})
    assert response.status_code == 429 and response["Retry-After"] == "3"
    assert json.loads(response.content) == {"success": False, "error": flood.message, "page_id": None}
    assert flood.message == (
        "Too many wrong keys from this address are waiting for their refusal; try again in 3 s (KEY_REFUSAL_QUEUE)."
    )
    assert scope_address({"client": ["192.0.2.9", 5000]}) == "192.0.2.9" and scope_address({}) == "unknown"


async def test_hanging_up_keeps_the_turn_and_passed_turns_are_forgotten(turns):
    due = turns.judge("192.0.2.1", lambda: False)
    waiting = asyncio.ensure_future(turns.refusal("192.0.2.1", due))
    await asyncio.sleep(0)
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    assert turns.judge("192.0.2.1", lambda: False) >= due + TURN_S  # the turn hung up on still counts
    assert not await turns.check("192.0.2.2", lambda: False)
    assert turns.remembered() == 1  # .2's last turn came and went; .1's has not come yet


def test_the_addresses_remembered_are_bounded(turns, monkeypatch):
    monkeypatch.setattr(wrong_keys, "MAX_ADDRESSES", 3)
    for address in ("192.0.2.1", "192.0.2.2", "192.0.2.3"):
        turns.judge(address, lambda: False)
    with pytest.raises(KeyFlood):
        turns.judge("192.0.2.4", never)
    assert turns.remembered() == 3


def test_without_a_wait_nothing_is_remembered(turns, settings):
    settings.KEY_REFUSAL_S = 0
    for _ in range(100):
        assert turns.judge("192.0.2.1", lambda: False) <= time.monotonic()
    assert turns.remembered() == 0


# --- the worker's routes -------------------------------------------------------------------


@pytest.fixture(scope="module")
def slow_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    running = WorkerProcess(tmp_path_factory.mktemp("store"), env={**SETTINGS, "MAX_PAGES": "2"}).start()
    yield running
    running.stop()


def test_the_route_lists_cover_both_servers():
    worker, waker = worker_routes(), waker_routes()
    assert "/api/v1/main/plugin/web/state" in worker and "/api/v1/jobs" in worker and len(worker) >= 25
    assert {"/api/v1/personas", "/api/v1/fleet/jobs", "/console/", "/w/nap/api/v1/pages"} <= set(waker)


# And an upload: the server decides it on its headers, before any view (media_store/uploads.py).
WORKER_REQUESTS = [*(("GET", path) for path in worker_routes()), ("POST", "/api/v1/media")]


@pytest.mark.parametrize(("method", "path"), WORKER_REQUESTS)
async def test_each_worker_route_answers_wrong_keys_one_turn_apart(slow_worker, method, path):
    results = await wrong_at_once(slow_worker.base_url, path, method=method)
    for response, _ in results:
        assert response.status_code == 401, (method, path, response.text)
        assert response.json() == {"success": False, "error": response.json()["error"], "page_id": None}
        assert response.headers["WWW-Authenticate"] == 'Bearer realm="penelope"'
    assert_one_turn_apart(results, f"{method} {path}")


async def test_an_upload_s_key_is_not_compared_in_a_flood_and_a_wrong_one_stores_nothing(slow_worker):
    """The server compares an upload's key before any view, so it keeps the
    rule itself: from an address whose wrong keys fill its queue, a right
    key's upload that would be refused at once (a bad Content-Type: 400) is
    refused 429 instead, its key not compared; once the turns run out it
    gets its 400. No wrong key's body is kept. (The flood lasts one turn
    after the queue fills: on a machine slow enough to miss it, a round
    answers 400 and another is tried.)"""
    right = {"Authorization": f"Bearer {TEST_KEY}", "Content-Type": "not a type"}
    source = httpx.AsyncHTTPTransport(local_address="127.0.0.3")
    async with httpx.AsyncClient(base_url=slow_worker.base_url, transport=source, timeout=60) as guesser:
        for _ in range(5):
            began = time.monotonic()
            wrong = [
                asyncio.ensure_future(answered(guesser, "/api/v1/media", WRONG, began, "POST"))
                for _ in range(QUEUE + 1)
            ]
            await asyncio.sleep(0)
            while not any(task.done() for task in wrong):  # the first answer, a 429, says the turns are taken
                await asyncio.wait(wrong, return_when=asyncio.FIRST_COMPLETED)
            flooded = await guesser.post("/api/v1/media", headers=right, content=b"x")
            statuses = [response.status_code for response, _ in await asyncio.gather(*wrong)]
            assert set(statuses) <= {401, 429} and statuses.count(401) >= QUEUE - 1, statuses
            if flooded.status_code == 429:
                break
            assert flooded.status_code == 400, flooded.text  # the queue was no longer full: again
        assert flooded.status_code == 429 and int(flooded.headers["Retry-After"]) >= 1, flooded.text
        assert "KEY_REFUSAL_QUEUE" in flooded.json()["error"]
        after = await guesser.post("/api/v1/media", headers=right, content=b"x")
        assert after.status_code == 400 and "Content-Type must be a media type" in after.json()["error"]
    media = slow_worker.store / "media"
    assert not media.exists() or not [path for path in media.rglob("*") if path.is_file()]


# --- the waker's routes --------------------------------------------------------------------


@pytest.fixture(scope="module")
def slow_waker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WakerProcess]:
    running = WakerProcess(
        tmp_path_factory.mktemp("waker"),
        [{"name": "nap", "mode": "sleepy", "idle_timeout_s": 600}],
        env={**SETTINGS, "WAKER_FORK_WORKERS": "0"},
    ).start()
    yield running
    assert running.stop() == []


@pytest.mark.parametrize("path", waker_routes())
async def test_each_waker_route_answers_wrong_keys_one_turn_apart(slow_waker, path):
    results = await wrong_at_once(slow_waker.base_url, path)
    for response, _ in results:
        assert response.status_code == 401, (path, response.text)
        if path.startswith(("/api/", "/w/")):
            assert response.json() == {"success": False, "error": response.json()["error"], "page_id": None}
    assert_one_turn_apart(results, path)
    assert slow_waker.persona("nap")["state"] == "stopped"  # a wrong key wakes nobody


async def test_the_console_sign_in_form_refuses_wrong_keys_one_turn_apart(slow_waker):
    async with httpx.AsyncClient(base_url=slow_waker.base_url, timeout=60) as client:
        began = time.monotonic()

        async def sign_in() -> tuple[httpx.Response, float]:
            response = await client.post("/console/sign-in", data={"key": "not-the-key"})
            return response, time.monotonic() - began

        results = sorted(await asyncio.gather(*(sign_in() for _ in range(AT_ONCE))), key=lambda result: result[1])
    assert [response.status_code for response, _ in results] == [403] * AT_ONCE
    assert_one_turn_apart(results, "/console/sign-in")


async def test_the_wakers_event_socket_refuses_wrong_keys_one_turn_apart(slow_waker):
    refused = await sockets_at_once(f"ws://127.0.0.1:{slow_waker.port}/w/nap/api/v1/events")
    assert_one_turn_apart([(None, seconds) for seconds in refused], "/w/nap/api/v1/events")
    assert slow_waker.persona("nap")["state"] == "stopped"
