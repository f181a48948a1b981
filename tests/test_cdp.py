"""CDP clients under a lease (cdp/), against a real worker: Playwright's
`connect_over_cdp` from a process of its own and Puppeteer over Node drive
the leased page; a raw WebSocket checks the worker's own rules: the tokens,
what a client sees and may not do, the lease's end, two clients at once,
tabs against MAX_PAGES, the live view, the request log and the metrics,
and that no port of the browser's is there to reach without a token."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import stat
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from browser.tap import SOCKET_ENV
from core.procfs import command_name, descendants
from harness.worker import ROOT, WorkerProcess, wait_until
from tests.conftest import worker_env
from tests.support.cdp_client import RawCdp
from tests.support.faults import kill_browser
from tests.support.live import metric

READ_KEY = "read-only-key-0123456789abcdefghij"
NODE_MODULES = ROOT / "requirements" / "node" / "node_modules"


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory):
    running = WorkerProcess(
        tmp_path_factory.mktemp("store"),
        env=worker_env(PENELOPE_READ_KEYS=READ_KEY, REQUEST_LOG_FLUSH_S="0.05", MAX_PAGES="3"),
    ).start()
    yield running
    running.stop()


@pytest.fixture
def lease(api):
    """A lease on main for one test, released after it (its tokens end with it)."""
    taken = api.post("/main/lease", json={"ttl": 120}).json()["lease"]
    yield taken
    api.delete("/main/lease", headers={"X-Lease": taken})


def token_url(worker: WorkerProcess, api: httpx.Client, lease: str, page: str = "main", **body) -> str:
    made = api.post(f"/{page}/cdp", json=body, headers={"X-Lease": lease})
    assert made.status_code == 201, made.text
    return worker.base_url.replace("http://", "ws://") + made.json()["url"]


def log_rows(worker: WorkerProcess, route_prefix: str) -> list[tuple[str, str, int]]:
    with sqlite3.connect(worker.store / "penelope.db") as db:
        rows = db.execute(
            "select route, path, status from activity_requestlogentry where route like ? order by id", (route_prefix + "%",)
        ).fetchall()
    db.close()
    return rows


def closed_with(socket) -> tuple[int, str]:
    try:
        while True:
            socket.recv(timeout=15)
    except ConnectionClosed as closed:
        return (closed.rcvd.code, closed.rcvd.reason) if closed.rcvd else (None, "")


# --- the token ---------------------------------------------------------------------------


def test_a_token_needs_the_full_key_and_the_lease_and_is_a_credential_never_logged(worker, api, lease):
    assert api.post("/main/cdp", json={}).status_code == 423  # leased, and no X-Lease
    assert api.post("/main/cdp", json={}, headers={"X-Lease": "0" * 32}).status_code == 423
    assert httpx.post(worker.base_url + "/api/v1/main/cdp", json={}, headers={"X-Lease": lease}).status_code == 401
    read = httpx.post(worker.base_url + "/api/v1/main/cdp", json={}, headers={"X-Lease": lease, "Authorization": f"Bearer {READ_KEY}"})
    assert read.status_code == 403 and "CDP token" in read.json()["error"]
    for ttl in (0, -1, "soon", True, 121):
        bad = api.post("/main/cdp", json={"ttl": ttl}, headers={"X-Lease": lease})
        assert bad.status_code == 400 and "ttl" in bad.json()["error"], (ttl, bad.text)
    made = api.post("/main/cdp", json={"ttl": 30}, headers={"X-Lease": lease})
    assert made.status_code == 201
    body = made.json()
    assert set(body) == {"success", "page_id", "url", "expires_at"} and body["page_id"] == "main"
    token = body["url"].removeprefix("/cdp/")
    assert len(token) >= 43  # 32 random bytes
    with RawCdp(worker.base_url.replace("http", "ws") + body["url"]) as client:
        assert client.result("Runtime.evaluate", {"expression": "6 * 7"}, client.page_session())["result"]["value"] == 42
    wait_until(lambda: log_rows(worker, "cdp/closed"), what="the closed row")
    logged = json.dumps(log_rows(worker, "")) + worker.log()
    assert token not in logged and token[:12] not in logged


def test_an_unleased_page_makes_no_token(api):
    refused = api.post("/main/cdp", json={})
    assert refused.status_code == 423 and "take a lease" in refused.json()["error"]
    assert api.post("/nowhere/cdp", json={}).status_code == 404


def test_a_made_up_used_or_expired_token_is_refused_at_the_handshake(worker, api, lease):
    base = worker.base_url.replace("http", "ws")
    for url in (base + "/cdp/made-up", base + "/cdp/" + "A" * 43):
        with pytest.raises(InvalidStatus) as refused:
            connect(url, open_timeout=10)
        assert refused.value.response.status_code == 403
    once = token_url(worker, api, lease)
    with RawCdp(once):
        with pytest.raises(InvalidStatus) as second:
            connect(once, open_timeout=10)  # one connection per token, even while the first is open
        assert second.value.response.status_code == 403
    made = api.post("/main/cdp", json={"ttl": 0.2}, headers={"X-Lease": lease}).json()
    wait_until(lambda: time.time() > made["expires_at"], what="the token's ttl to pass")
    with pytest.raises(InvalidStatus):
        connect(base + made["url"], open_timeout=10)


# --- clients --------------------------------------------------------------------------------


def test_playwright_from_another_process_drives_the_leased_page_and_the_api_sees_what_it_left(worker, api, lease, site):
    url = token_url(worker, api, lease)
    ran = subprocess.run(
        [sys.executable, "-m", "tests.support.cdp_client", url, site.url],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout.splitlines()[-1])
    assert seen["contexts"] == 1 and seen["pages"] == 1  # its page, nothing else of the persona's
    assert seen["sum"] == 2 and seen["title"] == "typed by a script"
    assert seen["screenshot_bytes"] > 1000
    assert seen["routed"] == {"items": "answered by the script"}
    assert "said by the page" in seen["console"]
    assert f"{site.url}/list?page=1&pages=2" in seen["requests"]
    assert seen["own_tab_pages"] == 2
    assert seen["url"] == f"{site.url}/list?page=1&pages=3"
    page = api.get("/main").json()
    assert page["url"] == f"{site.url}/list?page=1&pages=3" and page["leased"] is True and page["tab"] == "open"
    # Its own tab closed when it disconnected: MAX_PAGES has room for two more pages again.
    wait_until(lambda: api.post("/pages", json={"page_id": "scratch-a"}).status_code == 201, what="room for a page")
    assert api.post("/pages", json={"page_id": "scratch-b"}).status_code == 201
    for name in ("scratch-a", "scratch-b"):
        api.delete(f"/{name}")


def test_playwright_s_own_cdp_sessions_work_and_closing_the_leased_page_lets_go_of_it(worker, api, lease):
    ran = subprocess.run(
        [sys.executable, "-m", "tests.support.cdp_client", token_url(worker, api, lease)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout.splitlines()[-1]) == {"evaluated": 42, "targets": ["page"], "closed": True}
    assert api.get("/main").json()["tab"] == "open"  # the worker's page stayed


@pytest.mark.skipif(not (NODE_MODULES / "puppeteer-core").is_dir(), reason="scripts/setup.sh dev installs puppeteer-core")
def test_puppeteer_over_node_drives_the_leased_page(worker, api, lease, site, tmp_path):
    script = tmp_path / "drive.js"
    script.write_text("""
const puppeteer = require('puppeteer-core');
(async () => {
  const browser = await puppeteer.connect({browserWSEndpoint: process.argv[2]});
  const pages = await browser.pages();
  const page = pages[0];
  await page.goto(process.argv[3]);
  await page.setContent('<input id="name">');
  await page.type('#name', 'typed by puppeteer');
  const value = await page.$eval('#name', (input) => input.value);
  const shot = await page.screenshot();
  await page.goto(process.argv[4]);
  console.log(JSON.stringify({pages: pages.length, value, shot: shot.length, url: page.url()}));
  await browser.disconnect();
})().catch((error) => { console.error(error); process.exit(1); });
""")
    url = token_url(worker, api, lease)
    ran = subprocess.run(
        ["node", str(script), url, f"{site.url}/list?page=1&pages=2", f"{site.url}/list?page=2&pages=2"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "NODE_PATH": str(NODE_MODULES)},
    )
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout.splitlines()[-1])
    assert seen == {"pages": 1, "value": "typed by puppeteer", "shot": seen["shot"], "url": f"{site.url}/list?page=2&pages=2"}
    assert seen["shot"] > 1000
    assert api.get("/main").json()["url"] == f"{site.url}/list?page=2&pages=2"


# --- what a client may not do -----------------------------------------------------------------


def error_of(answer: dict) -> str:
    assert "error" in answer, answer
    return answer["error"]["message"]


def test_what_a_client_must_not_do_is_refused_in_the_worker(worker, api, lease, tmp_path):
    url = token_url(worker, api, lease)
    with RawCdp(url) as client:
        session = client.page_session()
        assert "refused" in error_of(client.call("Browser.close"))
        assert "refused" in error_of(client.call("Browser.crash"))
        assert "refused" in error_of(client.call("Browser.close", session=session))  # in a page's session too
        assert "file URLs" in error_of(client.call("Page.navigate", {"url": "file:///etc/passwd"}, session))
        assert "chrome URLs" in error_of(client.call("Page.navigate", {"url": "chrome://settings"}, session))
        assert "file URLs" in error_of(client.call("Target.createTarget", {"url": "file:///etc/hostname"}))
        assert "proxy" in error_of(client.call("Target.createBrowserContext", {"proxyServer": "http://10.0.0.1:3128"}))
        assert "refused" in error_of(client.call("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(tmp_path)}, session))
        assert "refused" in error_of(client.call("DOM.setFileInputFiles", {"files": ["/etc/passwd"], "nodeId": 1}, session))
        assert "refused" in error_of(client.call("Security.setIgnoreCertificateErrors", {"ignore": True}))
        assert "browser level" in error_of(client.call("Fetch.enable"))  # would catch every tab's requests
        assert "about: pages" in error_of(client.call("Page.navigate", {"url": "about:flags"}, session))
        assert "about: pages" in error_of(client.call("Target.createTarget", {"url": "ABOUT:settings"}))
        drop = {"type": "drop", "x": 5, "y": 5, "data": {"items": [], "files": ["/etc/passwd"], "dragOperationsMask": 1}}
        assert "host" in error_of(client.call("Input.dispatchDragEvent", drop, session))
        assert "service workers" in error_of(client.call("ServiceWorker.stopAllWorkers", {}, session))
        for beyond in ("Memory.simulatePressureNotification", "PWA.launchFilesInApp", "Browser.setWindowBounds", "Page.crash"):
            message = error_of(client.call(beyond, {}, session))
            assert "refused" in message or "not offered" in message, (beyond, message)
        # Answered, not applied, wherever it is sent: downloads stay in the worker's own folder.
        assert client.result("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(tmp_path)}) == {}
        assert client.result("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(tmp_path)}, session) == {}
        # Malformed messages are answered, and the connection stays.
        assert client.call("Runtime.evaluate", {"expression": "1"}, session=[])["error"]["code"] == -32602
        assert client.call("Target.setDiscoverTargets", {"discover": True, "filter": 1})["error"]["code"] == -32602
        assert client.call("Target.getTargetInfo", {"targetId": []})["error"]["code"] == -32602
        # A page cannot send itself to a file either: Chromium refuses the renderer's navigation.
        client.result("Runtime.evaluate", {"expression": "location.href = 'file:///etc/passwd'"}, session)
        href = client.result("Runtime.evaluate", {"expression": "location.href"}, session)["result"]["value"]
        assert not href.startswith("file:")
        # The persona's page is the worker's to close: the client is only let go of it.
        target = client.result("Target.getTargetInfo", {}, session)["targetInfo"]["targetId"]
        assert client.result("Target.closeTarget", {"targetId": target}) == {"success": True}
        assert any(event.get("method") == "Target.detachedFromTarget" and event["params"]["sessionId"] == session
                   for event in client.events)
        assert client.result("Target.getTargets")["targetInfos"] == []
        assert "not found" in error_of(client.call("Runtime.evaluate", {"expression": "1"}, session))
    assert api.get("/main").json()["tab"] == "open"
    assert list(tmp_path.iterdir()) == []
    expected = {"/api/v1/main/cdp from 127.0.0.1: Browser.close", "/api/v1/main/cdp from 127.0.0.1: DOM.setFileInputFiles"}
    # The log is written in batches: wait for the rows asked about, not the first batch.
    wait_until(lambda: expected <= {path for _, path, _ in log_rows(worker, "cdp/refused")}, what="the refusals' rows")
    assert metric(api, 'penelope_cdp_refused_total{method="Browser.close"}') >= 2


def test_private_addresses_stay_refused_to_a_client_under_browser_refuse_private(make_worker, site):
    guarded = make_worker({"BROWSER_REFUSE_PRIVATE": "1", "REQUEST_LOG_FLUSH_S": "0.05"})
    with guarded.client() as api:
        taken = api.post("/main/lease", json={"ttl": 60}).json()["lease"]
        with RawCdp(token_url(guarded, api, taken)) as client:
            session = client.page_session()
            client.result("Page.navigate", {"url": f"{site.url}/list?page=1&pages=2"}, session)
            shown = client.result("Runtime.evaluate", {"expression": "document.body.innerText"}, session)
            assert "Item" not in shown["result"].get("value", ""), shown  # the egress refused it: not the site's page
            fetched = client.result("Runtime.evaluate", {
                "expression": f"fetch('{site.url}/api/items').then(r => r.text(), () => 'refused')", "awaitPromise": True,
            }, session)
            assert "Result" not in fetched["result"]["value"]  # the site's answer never came
        host = site.url.removeprefix("http://")
        rows = wait_until(lambda: [path for route, path, _ in log_rows(guarded, "browser/refused") if host in path], what="refused")
        assert rows


def test_a_client_sees_and_touches_no_other_page(worker, api, lease):
    assert api.post("/pages", json={"page_id": "other"}).status_code == 201
    other_lease = api.post("/other/lease", json={"ttl": 60}).json()["lease"]
    try:
        with RawCdp(token_url(worker, api, other_lease, page="other")) as other:
            other_target = other.result("Target.getTargetInfo", {}, other.page_session())["targetInfo"]["targetId"]
        with RawCdp(token_url(worker, api, lease)) as client:
            targets = client.result("Target.getTargets")["targetInfos"]
            assert [t["type"] for t in targets] == ["page"] and other_target not in {t["targetId"] for t in targets}
            for method in ("Target.attachToTarget", "Target.closeTarget", "Target.activateTarget"):
                answer = client.call(method, {"targetId": other_target, "flatten": True})
                assert "is the client's" in error_of(answer), method
            assert "not found" in error_of(client.call("Runtime.evaluate", {"expression": "1"}, session="0" * 32))
        assert api.get("/other").json()["tab"] == "open"
    finally:
        api.delete("/other/lease", headers={"X-Lease": other_lease})
        api.delete("/other")


# --- the lease's end, and two clients ------------------------------------------------------------


def test_the_lease_end_closes_the_socket_and_the_page_goes_back_to_the_worker(worker, api, site):
    taken = api.post("/main/lease", json={"ttl": 60}).json()["lease"]
    with connect(token_url(worker, api, taken), open_timeout=10) as socket:
        assert api.delete("/main/lease", headers={"X-Lease": taken}).status_code == 200
        assert closed_with(socket) == (4001, "The lease ended.")
    # The page is the worker's again: a plain call runs on it.
    assert api.post("/main/primitive/evaluate", json={"expression": "1 + 1"}).json()["value"] == 2
    taken = api.post("/main/lease", json={"ttl": 60}).json()["lease"]
    try:
        with connect(token_url(worker, api, taken), open_timeout=10) as socket:
            ended = api.delete("/main/cdp", headers={"X-Lease": taken})
            assert ended.json() == {"success": True, "page_id": "main", "ended": 1}
            assert closed_with(socket)[0] == 4001
        with connect(token_url(worker, api, taken, ttl=0.5), open_timeout=10) as socket:
            assert closed_with(socket) == (4001, "The token expired.")
    finally:
        api.delete("/main/lease", headers={"X-Lease": taken})
    closed = wait_until(lambda: len(log_rows(worker, "cdp/closed")) >= 3 and log_rows(worker, "cdp/closed"), what="closed rows")
    assert any(path.endswith(": The lease ended.") for _, path, _ in closed)


def test_two_clients_drive_two_pages_at_once(worker, api):
    assert api.post("/pages", json={"page_id": "second"}).status_code == 201
    leases = {name: api.post(f"/{name}/lease", json={"ttl": 60}).json()["lease"] for name in ("main", "second")}
    try:
        with RawCdp(token_url(worker, api, leases["main"])) as one, RawCdp(token_url(worker, api, leases["second"], page="second")) as two:
            sessions = {one: one.page_session(), two: two.page_session()}
            for client, title in ((one, "first client"), (two, "second client")):
                client.result("Runtime.evaluate", {"expression": f"document.title = '{title}'"}, sessions[client])
            for client, title in ((one, "first client"), (two, "second client")):
                assert client.result("Runtime.evaluate", {"expression": "document.title"}, sessions[client])["result"]["value"] == title
        titles = {name: api.post(f"/{name}/primitive/evaluate", json={"expression": "document.title"}, headers={"X-Lease": leases[name]}).json()["value"] for name in leases}
        assert titles == {"main": "first client", "second": "second client"}
    finally:
        for name, taken in leases.items():
            api.delete(f"/{name}/lease", headers={"X-Lease": taken})
        api.delete("/second")


def test_a_call_under_the_lease_while_a_client_drives_answers_409_and_runs_once_it_disconnects(worker, api, lease):
    """A driver hold (browser/broker.py): the client and a plugin call under
    the same lease never drive the tab at once; the call is refused at once."""
    under = {"X-Lease": lease}
    with RawCdp(token_url(worker, api, lease)) as client:
        client.result("Runtime.evaluate", {"expression": "document.title = 'set by the client'"}, client.page_session())
        began = time.monotonic()
        refused = api.post("/main/plugin/web/state", json={}, headers=under)
        assert refused.status_code == 409 and time.monotonic() - began < 10
        assert refused.json() == {
            "success": False,
            "error": "Page main is driven by a CDP client under its lease; a call under the lease runs once it detaches.",
            "page_id": "main",
        }
        assert api.get("/main").json()["busy"] is False  # no call or job runs on it
    ran = api.post("/main/primitive/evaluate", json={"expression": "document.title"}, headers=under)
    assert ran.status_code == 200 and ran.json()["value"] == "set by the client"
    assert api.post("/main/plugin/web/state", json={}, headers=under).status_code == 200


def test_a_client_that_connects_while_a_call_runs_waits_past_daphne_s_five_seconds(make_worker):
    """Its handshake waits for the call's end (up to PAGE_WAIT_S), longer than
    daphne's default handshake timeout of 5 s, which dropped it without an answer."""
    slow = make_worker({"PAGE_WAIT_S": "15"})
    with slow.client() as client:
        lease = client.post("/main/lease", json={"ttl": 60}).json()["lease"]
        url = token_url(slow, client, lease)
        with ThreadPoolExecutor(1) as pool:
            call = pool.submit(lambda: client.post("/main/plugin/testing/sleep", json={"seconds": 7}, headers={"X-Lease": lease}))
            wait_until(lambda: client.get("/main").json()["busy"], what="the call to hold the page")
            with connect(url, max_size=None, open_timeout=30) as cdp:
                assert call.done() and call.result().status_code == 200  # the call ended first: its turn came first
                cdp.send(json.dumps({"id": 1, "method": "Browser.getVersion"}))
                assert json.loads(cdp.recv(timeout=10))["id"] == 1


def test_tabs_a_client_opens_count_against_max_pages_and_close_with_it(worker, api, lease):
    with RawCdp(token_url(worker, api, lease)) as client:
        assert "targetId" in client.result("Target.createTarget", {"url": "about:blank"})
        assert "targetId" in client.result("Target.createTarget", {"url": "about:blank"})  # main and two tabs: 3
        assert "MAX_PAGES" in error_of(client.call("Target.createTarget", {"url": "about:blank"}))
        full = api.post("/pages", json={"page_id": "squeezed"})
        assert full.status_code == 409 and "MAX_PAGES" in full.json()["error"]
        assert len(client.result("Target.getTargets")["targetInfos"]) == 3
    wait_until(lambda: api.post("/pages", json={"page_id": "squeezed"}).status_code == 201, what="the tabs closed")
    api.delete("/squeezed")


# --- where a user looks -----------------------------------------------------------------------------


def test_the_live_view_shows_the_page_a_script_drives(worker, api, lease, site):
    link = api.post("/main/live", json={"ttl": 60}).json()["url"]
    with connect(worker.base_url.replace("http", "ws") + link + "/ws", open_timeout=10) as viewer:
        with RawCdp(token_url(worker, api, lease)) as client:
            client.result("Page.navigate", {"url": f"{site.url}/list?page=2&pages=4"}, client.page_session())
            seen = []
            while not any(meta.get("url") == f"{site.url}/list?page=2&pages=4" for meta in seen):
                message = viewer.recv(timeout=15)
                if isinstance(message, str):
                    seen.append(json.loads(message))
    api.delete("/main/live")


def test_an_open_connection_is_work_and_is_logged_and_counted(worker, api, lease):
    opened_before = metric(api, 'penelope_cdp_connections_total{event="opened"}')
    with RawCdp(token_url(worker, api, lease)) as client:
        client.page_session()
        activity = api.get("/activity").json()
        assert activity["requests_in_flight"] >= 1 and activity["cdp_connections"] == 1
        assert metric(api, 'penelope_cdp_connections_total{event="opened"}') == opened_before + 1
    wait_until(lambda: api.get("/activity").json()["requests_in_flight"] == 0, what="the connection uncounted")
    opened = wait_until(lambda: log_rows(worker, "cdp/opened"), what="the opened row")
    assert opened[-1] == ("cdp/opened", "/api/v1/main/cdp from 127.0.0.1", 101)
    closed = wait_until(lambda: len(log_rows(worker, "cdp/closed")) >= len(opened) and log_rows(worker, "cdp/closed"))
    assert closed[-1] == ("cdp/closed", "/api/v1/main/cdp from 127.0.0.1: The client disconnected.", 200)


def test_a_message_of_many_megabytes_passes_both_ways(worker, api, lease):
    size = 20 * 1024 * 1024
    with RawCdp(token_url(worker, api, lease)) as client:
        session = client.page_session()
        back = client.result("Runtime.evaluate", {"expression": f"'x'.repeat({size})", "returnByValue": True}, session)
        assert len(back["result"]["value"]) == size
        sent = client.result("Runtime.evaluate", {"expression": f"'{'y' * size}'.length"}, session)
        assert sent["result"]["value"] == size


def test_every_other_socket_keeps_daphne_s_one_mebibyte(worker):
    headers = {"Authorization": f"Bearer {worker.key}"}
    with connect(worker.base_url.replace("http", "ws") + "/api/v1/events", additional_headers=headers, open_timeout=10) as events:
        try:
            events.send("x" * (2 * 1024 * 1024))
            code = closed_with(events)[0]
        except (ConnectionClosed, OSError):  # ended while it was still being sent
            code = None
        assert code in (1009, None)  # too big: the server ends the connection


# --- no way in but the token -------------------------------------------------------------------------


def listening_inodes() -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                inodes.add(fields[9])
    return inodes


def test_the_browser_opens_no_port_a_local_process_could_reach(worker):
    browsers = [pid for pid in os.listdir("/proc") if pid.isdigit() and _is_browser_of(pid, worker.store)]
    assert browsers, "the worker's Chromium processes"
    listening = listening_inodes()
    for pid in browsers:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        assert not any(arg.startswith("--remote-debugging-port") for arg in command)
        try:
            sockets = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
        except (FileNotFoundError, PermissionError):
            continue  # a process that ended meanwhile
        held = {link.removeprefix("socket:[").removesuffix("]") for link in sockets if link.startswith("socket:[")}
        assert not held & listening, f"Chromium process {pid} listens on TCP"
    main = next(pid for pid in browsers if "--type=" not in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"))
    assert "--remote-debugging-pipe" in Path(f"/proc/{main}/cmdline").read_text(errors="replace")


def test_the_driver_tap_takes_no_process_but_the_worker_s_own_driver(worker, api, lease):
    """The CDP clients' way onto Chromium's pipe (browser/tap.py) is a Unix
    socket in a folder only its user enters, taken only from the worker's
    own child. A process that finds the socket and connects is cut off at
    once: it is never taken for the driver, so it neither hears a client's
    messages nor answers them, and the real driver's link holds."""
    driver = next(pid for pid in descendants(worker.process.pid) if command_name(pid).startswith("node"))
    environ = Path(f"/proc/{driver}/environ").read_bytes().split(b"\0")
    path = next(pair.partition(b"=")[2].decode() for pair in environ if pair.startswith(SOCKET_ENV.encode() + b"="))
    assert stat.S_IMODE(os.stat(Path(path).parent).st_mode) == 0o700
    stranger = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stranger.settimeout(10)
    stranger.connect(path)
    try:
        stranger.sendall(b'{"id":-1,"method":"Target.attachToBrowserTarget","params":{}}\0'
                         b'{"id":-2,"method":"Browser.close","params":{}}\0')
        assert stranger.recv(1024) == b""  # closed, nothing answered
    except (BrokenPipeError, ConnectionResetError):
        pass  # closed before it could even send
    finally:
        stranger.close()
    client = RawCdp(token_url(worker, api, lease))
    try:
        session = client.page_session()
        assert client.result("Runtime.evaluate", {"expression": "6 * 7"}, session)["result"]["value"] == 42
    finally:
        client.close()


def test_a_relaunched_browser_closes_its_clients_and_takes_new_ones(make_worker):
    """Each launch has a driver of its own, and so a tap of its own: a
    client of the browser that stopped is told why, and a new token (the
    lease outlives the relaunch) drives the page in the browser launched
    after it."""
    relaunching = make_worker({"BROWSER_RELAUNCH_S": "0.05", "MAX_PAGES": "2"})
    with relaunching.client() as api:
        taken = api.post("/main/lease", json={"ttl": 120}).json()["lease"]
        before = RawCdp(token_url(relaunching, api, taken))
        before.page_session()
        kill_browser(relaunching.store)
        assert closed_with(before.socket)[0] in (4001, 4002)
        wait_until(lambda: api.get("/health").json().get("browser_state") == "up", timeout=60)
        after = RawCdp(token_url(relaunching, api, taken))
        try:
            session = after.page_session()
            assert after.result("Runtime.evaluate", {"expression": "1 + 2"}, session)["result"]["value"] == 3
        finally:
            after.close()


def _is_browser_of(pid: str, store: Path) -> bool:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
    except (FileNotFoundError, PermissionError):
        return False
    return "chrom" in command.split("\0")[0] and str(store) in command
