"""BROWSER_REFUSE_PRIVATE from outside: every connection the browser makes
passes the egress guard (browser/egress.py), which judges the address it
connects to. A loopback site named by BROWSER_ALLOW redirects to, fetches
from, opens a WebSocket to and runs a service worker against a second
loopback service that is not allowed; that service must never see a byte."""

from __future__ import annotations

import asyncio
import base64
import socket
import sqlite3
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest
import websockets.sync.server

from harness.worker import wait_until
from tests.support.relay import pipe


class Listener:
    """A TCP port that counts every connection made to it, and answers each
    with a small page: the service the browser must not reach."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.connections = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.socket.accept()
            except OSError:
                return
            self.connections += 1
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nsecret")
            conn.close()

    def close(self) -> None:
        self.socket.close()


SW_PAGE = b"""<title>sw</title><script>
async function viaWorker(target) {
  const registration = await navigator.serviceWorker.register('/sw.js');
  await navigator.serviceWorker.ready;
  const answer = new Promise(resolve => navigator.serviceWorker.addEventListener('message', e => resolve(e.data)));
  registration.active.postMessage(target);
  return await answer;
}
</script>"""
SW_SCRIPT = b"""self.addEventListener('message', event => {
  event.waitUntil(fetch(event.data).then(async r => [r.status, await r.text()], e => ['error', String(e)])
    .then(value => event.source.postMessage(value)));
});"""


class AllowedSite(BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.paths.append(self.path)
        url = urlsplit(self.path)
        query = {name: values[0] for name, values in parse_qs(url.query).items()}
        if url.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", query["to"])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body, kind = {
            "/sw.html": (SW_PAGE, "text/html"),
            "/sw.js": (SW_SCRIPT, "text/javascript"),
        }.get(url.path, (b"<title>Allowed</title><p>allowed page</p>", "text/html"))
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def hosts() -> Iterator[dict]:
    """The allowed site, an allowed WebSocket echo, and the forbidden listener."""
    site = ThreadingHTTPServer(("127.0.0.1", 0), AllowedSite)
    site.paths = []
    threading.Thread(target=site.serve_forever, daemon=True).start()

    def echo(connection):
        for message in connection:
            connection.send(f"echo {message}")

    echo_server = websockets.sync.server.serve(echo, "127.0.0.1", 0)
    threading.Thread(target=echo_server.serve_forever, daemon=True).start()
    forbidden = Listener()
    yield {
        "site": site, "site_url": f"http://127.0.0.1:{site.server_address[1]}",
        "echo_port": echo_server.socket.getsockname()[1], "forbidden": forbidden,
    }
    site.shutdown()
    echo_server.shutdown()
    forbidden.close()


@pytest.fixture(scope="module")
def guarded(hosts, tmp_path_factory):
    from harness.worker import WorkerProcess
    from tests.conftest import worker_env

    allow = f"127.0.0.1:{hosts['site'].server_address[1]} 127.0.0.1:{hosts['echo_port']}"
    worker = WorkerProcess(
        tmp_path_factory.mktemp("store"),
        env=worker_env(BROWSER_REFUSE_PRIVATE="1", BROWSER_ALLOW=allow, REQUEST_LOG_FLUSH_S="0.05"),
    ).start()
    with worker.client() as api:
        yield worker, api
    worker.stop()


def refused(scheme: str, host: str, port: int | None, why: str = "") -> str:
    shown = why or f"{host} is a loopback, private, link-local or metadata address"
    return f"The browser refused {scheme}://{host}{f':{port}' if port else ''}: {shown} (BROWSER_REFUSE_PRIVATE)."


def evaluate(api, expression: str):
    answer = api.post("/main/primitive/evaluate", json={"expression": expression})
    assert answer.status_code == 200, answer.text
    return answer.json()["value"]


def test_an_allowed_site_opens_and_its_websocket_tunnel_carries(guarded, hosts):
    worker, api = guarded
    opened = api.post("/main/plugin/web/open", json={"url": hosts["site_url"] + "/page"})
    assert opened.status_code == 200, opened.text
    assert "/page" in hosts["site"].paths
    said = evaluate(api, f"""new Promise(resolve => {{
        const ws = new WebSocket('ws://127.0.0.1:{hosts['echo_port']}/');
        ws.onopen = () => ws.send('hi');
        ws.onmessage = e => {{ resolve(e.data); ws.close(); }};
        ws.onerror = () => resolve('error');
    }})""")
    assert said == "echo hi"


def test_a_redirect_hop_out_of_the_allowed_set_is_refused(guarded, hosts):
    worker, api = guarded
    port = hosts["forbidden"].port
    for target, answer in [
        (f"http://127.0.0.1:{port}/", refused("http", "127.0.0.1", port)),
        (f"https://127.0.0.1:{port}/", refused("https", "127.0.0.1", port)),
        ("http://169.254.169.254/latest/meta-data/", refused("http", "169.254.169.254", None)),
    ]:
        opened = api.post("/main/plugin/web/open", json={"url": f"{hosts['site_url']}/redirect?to={target}"})
        assert opened.status_code == 403, opened.text
        assert opened.json()["error"] == answer
    assert hosts["forbidden"].connections == 0


def test_a_pages_fetch_websocket_and_service_worker_never_reach_a_forbidden_service(guarded, hosts):
    worker, api = guarded
    port = hosts["forbidden"].port
    assert api.post("/main/plugin/web/open", json={"url": hosts["site_url"] + "/sw.html"}).status_code == 200
    fetched = evaluate(api, f"fetch('http://127.0.0.1:{port}/data').then(async r => [r.status, await r.text()])")
    assert fetched == [403, refused("http", "127.0.0.1", port)]
    socket_said = evaluate(api, f"""new Promise(resolve => {{
        const ws = new WebSocket('ws://127.0.0.1:{port}/');
        ws.onopen = () => resolve('open');
        ws.onerror = () => resolve('error');
    }})""")
    assert socket_said == "error"
    beacon = evaluate(api, f"navigator.sendBeacon('http://127.0.0.1:{port}/beacon', 'x')")
    assert beacon is True  # queued; the egress refuses it when it is sent
    from_worker = evaluate(api, f"viaWorker('http://127.0.0.1:{port}/from-sw')")
    assert from_worker == [403, refused("http", "127.0.0.1", port)]
    assert "/sw.js" in hosts["site"].paths  # the service worker ran, from the allowed site
    assert hosts["forbidden"].connections == 0


def test_localhost_names_and_names_that_do_not_resolve_are_refused(guarded, hosts):
    worker, api = guarded
    for url, answer in [
        # Chromium resolves *.localhost to loopback by itself; the egress refuses it either way.
        (f"http://foo.localhost:{worker.port}/api/v1/health", None),
        (f"http://localhost:{worker.port}/api/v1/health", None),
        ("http://penelope-no-such-host.invalid/", refused("http", "penelope-no-such-host.invalid", None,
                                                           "penelope-no-such-host.invalid does not resolve")),
    ]:
        opened = api.post("/main/plugin/web/open", json={"url": url})
        assert opened.status_code == 403, (url, opened.text)
        error = opened.json()["error"]
        host = urlsplit(url).hostname
        assert error.startswith(f"The browser refused http://{host}") and error.endswith("(BROWSER_REFUSE_PRIVATE).")
        if answer is not None:
            assert error == answer
        elif host == "localhost":
            assert "localhost (127.0.0.1)" in error or "localhost (::1)" in error


def test_every_refusal_is_in_the_request_log(guarded, hosts):
    worker, api = guarded
    port = hosts["forbidden"].port
    api.post("/main/plugin/web/open", json={"url": f"{hosts['site_url']}/redirect?to=http://127.0.0.1:{port}/logged?q=secret"})

    def rows():
        with sqlite3.connect(worker.store / "penelope.db") as db:
            return db.execute(
                "select kind, method, path, status from activity_requestlogentry where route = 'browser/refused'"
            ).fetchall()

    wait_until(lambda: ("browser", "GET", f"http://127.0.0.1:{port}/logged", 403) in rows(), what="the refusal's row")
    assert not [row for row in rows() if "secret" in row[2]]  # the query stays out of the log


def test_webrtc_sends_no_udp(guarded, hosts):
    """WebRTC's UDP does not go through a proxy: the guarded browser sends none."""
    worker, api = guarded
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(0.05)
    port = udp.getsockname()[1]
    try:
        gathered = evaluate(api, f"""new Promise(resolve => {{
            const pc = new RTCPeerConnection({{iceServers: [{{urls: 'stun:127.0.0.1:{port}'}}]}});
            pc.createDataChannel('x');
            pc.onicegatheringstatechange = () => {{ if (pc.iceGatheringState === 'complete') resolve('complete'); }};
            pc.createOffer().then(offer => pc.setLocalDescription(offer));
            setTimeout(() => resolve('timeout'), 3000);
        }})""")
        assert gathered in ("complete", "timeout")
        with pytest.raises(TimeoutError):
            udp.recvfrom(2048)
    finally:
        udp.close()


class ChainedProxy:
    """The persona's own proxy: an HTTP CONNECT proxy that records what it is asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.server = asyncio.run_coroutine_threadsafe(asyncio.start_server(self.serve, "127.0.0.1", 0), self.loop).result()
        self.port = self.server.sockets[0].getsockname()[1]

    async def serve(self, reader, writer):
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        target = head.split(" ")[1]
        auth = next((line.split(":", 1)[1].strip() for line in head.split("\r\n") if line.lower().startswith("proxy-authorization")), "")
        self.asked.append((target, auth))
        host, port = target.rsplit(":", 1)
        up_reader, up_writer = await asyncio.open_connection(host.strip("[]"), int(port))
        writer.write(b"HTTP/1.1 200 OK\r\n\r\n")

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer), return_exceptions=True)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.server.close)


def test_the_guard_chains_to_the_personas_proxy_asking_for_the_checked_address(make_worker, hosts):
    chained = ChainedProxy()
    site_port = hosts["site"].server_address[1]
    try:
        worker = make_worker({
            "BROWSER_REFUSE_PRIVATE": "1", "BROWSER_ALLOW": f"127.0.0.1:{site_port}",
            "PENELOPE_PROXY": f"http://persona:p%40ss@127.0.0.1:{chained.port}",
        })
        with worker.client() as api:
            opened = api.post("/main/plugin/web/open", json={"url": f"http://127.0.0.1:{site_port}/chained"})
            assert opened.status_code == 200, opened.text
            forbidden = hosts["forbidden"].port
            assert api.post("/main/plugin/web/open", json={"url": f"http://127.0.0.1:{forbidden}/"}).status_code == 403
        assert "/chained" in hosts["site"].paths
        credentials = "Basic " + base64.b64encode(b"persona:p@ss").decode()
        assert (f"127.0.0.1:{site_port}", credentials) in chained.asked
        assert not [target for target, _ in chained.asked if target.endswith(f":{forbidden}")]
        assert hosts["forbidden"].connections == 0
    finally:
        chained.close()


def test_an_allowed_name_reaches_the_ports_it_names_only(make_worker, hosts):
    """`localhost` allowed bare (80 and 443) and on the site's port: the name
    resolves to loopback, where a second service listens on a port the
    entries do not name, and the worker itself. Neither is reached, not even
    the worker's port named outright, by name or by address."""
    site_port, forbidden = hosts["site"].server_address[1], hosts["forbidden"]
    worker = make_worker({"BROWSER_REFUSE_PRIVATE": "1"}, start=False)
    worker.env["BROWSER_ALLOW"] = f"localhost localhost:{site_port} localhost:{worker.port} 127.0.0.1:{worker.port}"
    worker.start()
    with worker.client() as api:
        opened = api.post("/main/plugin/web/open", json={"url": f"http://localhost:{site_port}/named-port"})
        assert opened.status_code == 200, opened.text
        assert "/named-port" in hosts["site"].paths
        for url, why in [
            (
                f"http://localhost:{forbidden.port}/",
                "localhost (127.0.0.1) is a loopback, private, link-local or metadata address",
            ),
            (
                f"http://localhost:{worker.port}/api/v1/health",
                f"localhost (127.0.0.1) port {worker.port} is the worker's own, which BROWSER_ALLOW never allows",
            ),
            (
                f"http://127.0.0.1:{worker.port}/api/v1/health",
                f"127.0.0.1 port {worker.port} is the worker's own, which BROWSER_ALLOW never allows",
            ),
        ]:
            host, port = urlsplit(url).hostname, urlsplit(url).port
            answer = api.post("/main/plugin/web/open", json={"url": url})
            assert forbidden.connections == 0, url
            assert answer.status_code == 403, (url, answer.text)
            assert answer.json()["error"] == refused("http", host, port, why)
        fetched = evaluate(api, f"fetch('http://localhost:{forbidden.port}/data').then(r => r.status, e => 'error')")
        assert fetched == 403
    assert forbidden.connections == 0
