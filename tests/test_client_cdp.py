"""The Python client's `Lease.cdp_url()` and its async twin against a real
worker: the URL it answers is the worker's `ws://…/cdp/<token>`, Playwright's
`connect_over_cdp` drives the leased page with it (sync and async, in this
process), and without the lease it raises `Leased` (423). The URL on a
waker's persona path is in tests/test_cdp_waker.py."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator

import pytest
from playwright.async_api import async_playwright
from playwright.sync_api import sync_playwright

from harness.worker import ROOT, WorkerProcess
from tests.conftest import worker_env

# The client is its own package; CI tests it from the checkout, uninstalled.
sys.path.insert(0, str(ROOT / "client"))

from penelope_client import AsyncPenelope, Leased, Penelope  # noqa: E402
from penelope_client import _shared as shared  # noqa: E402


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    running = WorkerProcess(tmp_path_factory.mktemp("store"), env=worker_env()).start()
    yield running
    running.stop()


@pytest.fixture
def client(worker: WorkerProcess) -> Iterator[Penelope]:
    with Penelope(worker.base_url, worker.key, timeout=60) as running:
        yield running


def page_url(client: Penelope, page_id: str = "main") -> str:
    return next(page for page in client.pages()["pages"] if page["page_id"] == page_id)["url"]


def test_cdp_url_drives_the_leased_page_with_playwright(worker, client, site):
    with client.lease("main", ttl=60) as lease:
        url = lease.cdp_url()
        assert url.startswith(f"ws://127.0.0.1:{worker.port}/cdp/") and len(url) > len(f"ws://127.0.0.1:{worker.port}/cdp/")
        with sync_playwright() as playwright:
            browser = playwright.chromium.connect_over_cdp(url)
            (page,) = browser.contexts[0].pages  # the leased page, and no other of the persona's
            assert page.evaluate("1 + 1") == 2
            page.goto(f"{site.url}/second.html")
            assert page.text_content("#where") == "second page"
        # The page the client drove is the worker's page `main`.
        assert page_url(client) == f"{site.url}/second.html"


def test_a_token_works_once(client):
    with client.lease("main", ttl=60) as lease:
        first, second = lease.cdp_url(), lease.cdp_url()
        assert first != second
        with sync_playwright() as playwright:
            assert playwright.chromium.connect_over_cdp(first).contexts[0].pages[0].evaluate("2 * 21") == 42
            with pytest.raises(Exception, match="403"):  # used once already: refused at the handshake
                playwright.chromium.connect_over_cdp(first, timeout=10_000)
            assert playwright.chromium.connect_over_cdp(second).contexts[0].pages[0].evaluate("1 + 1") == 2


def test_without_the_lease_cdp_url_raises_leased(client):
    unheld = client.lease("main", ttl=60)  # never taken: no X-Lease
    with pytest.raises(Leased) as refused:
        unheld.cdp_url()
    assert refused.value.status == 423 and refused.value.page_id == "main"
    with client.lease("main", ttl=60) as lease:
        assert lease.cdp_url().startswith("ws://")
    with pytest.raises(Leased) as released:  # its lease released: its id is no lease any more
        lease.cdp_url()
    assert released.value.status == 423


async def test_the_async_twin_and_its_ttl(worker, site):
    """The token's ttl is passed on: its connection closes when it runs out,
    long before the lease's 60 s."""
    async with AsyncPenelope(worker.base_url, worker.key, timeout=60) as client:
        with pytest.raises(Leased):
            await client.lease("main", ttl=60).cdp_url()
        async with client.lease("main", ttl=60) as lease, async_playwright() as playwright:
            url = await lease.cdp_url(ttl=3)
            assert url.startswith(f"ws://127.0.0.1:{worker.port}/cdp/")
            browser = await playwright.chromium.connect_over_cdp(url)
            disconnected = asyncio.Event()
            browser.on("disconnected", lambda _: disconnected.set())
            page = browser.contexts[0].pages[0]
            assert await page.evaluate("1 + 1") == 2
            await page.goto(f"{site.url}/index.html")
            await asyncio.wait_for(disconnected.wait(), 20)
            pages = (await client.pages())["pages"]
            assert next(page for page in pages if page["page_id"] == "main")["url"] == f"{site.url}/index.html"
        with pytest.raises(Leased):
            await lease.cdp_url()


def test_the_socket_url_keeps_the_base_path_and_secures_https():
    answer = {"url": "/cdp/abc"}
    assert shared.cdp_url("http://127.0.0.1:5100/w/alice", answer) == "ws://127.0.0.1:5100/w/alice/cdp/abc"
    assert shared.cdp_url("https://penelope.example.com/w/alice", answer) == "wss://penelope.example.com/w/alice/cdp/abc"
    assert shared.cdp_url(shared.api_root("http://127.0.0.1:5000/api/v1/"), answer) == "ws://127.0.0.1:5000/cdp/abc"
