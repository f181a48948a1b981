"""The egress guard's rules in-process (browser/egress.py): BROWSER_ALLOW's
entries, what is refused and why, and the chain to a socks5 proxy, driven
by a real HTTP client through the real proxy on loopback."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading

import httpx
import pytest

from browser.allowance import Allowance, WorkerPort
from browser.egress import Egress
from browser.upstream import Upstream
from tests.support.relay import pipe


def test_browser_allow_reads_hosts_ports_and_networks():
    allowance = Allowance.parse("intranet.corp  wiki.corp:8443 10.2.0.0/16 127.0.0.1:8001 [::1]:9000 192.168.7.7")
    assert allowance.allows_name("INTRANET.corp.", 443) and allowance.allows_name("intranet.corp", 80)
    assert allowance.allows_name("wiki.corp", 8443) and not allowance.allows_name("wiki.corp", 443)
    assert allowance.allows_address("10.2.255.1", 80) and not allowance.allows_address("10.3.0.1", 80)
    assert allowance.allows_address("127.0.0.1", 8001) and not allowance.allows_address("127.0.0.1", 8002)
    assert allowance.allows_address("::1", 9000) and not allowance.allows_address("::1", 9001)
    assert allowance.allows_address("192.168.7.7", 1) and not allowance.allows_address("192.168.7.8", 1)
    assert Allowance.parse("") == Allowance()


@pytest.mark.parametrize("entry", ["host:", "host:0", "host:99999", "host:８０", "a/b", "[::1]x", "ex ample:80:1"])
def test_a_browser_allow_entry_that_is_none_of_them_is_refused_naming_it(entry):
    with pytest.raises(ValueError, match="BROWSER_ALLOW"):
        Allowance.parse(entry)


def test_what_is_refused_and_why():
    egress = Egress(Allowance.parse("intranet.corp 127.0.0.1:8001"))
    assert egress.refusal("example.com", 443, ["93.184.215.14"]) is None
    assert egress.refusal("intranet.corp", 443, ["10.0.0.8"]) is None  # named: whatever it resolves to, on 443
    assert egress.refusal("127.0.0.1", 8001, ["127.0.0.1"]) is None
    assert egress.refusal("127.0.0.1", 8002, ["127.0.0.1"]) == "127.0.0.1 is a loopback, private, link-local or metadata address"
    # A name with one private address among public ones is refused, naming that address.
    assert egress.refusal("rebind.example", 80, ["93.184.215.14", "169.254.169.254"]) == (
        "rebind.example (169.254.169.254) is a loopback, private, link-local or metadata address"
    )
    assert egress.refusal("nowhere.invalid", 80, []) == "nowhere.invalid does not resolve"


def test_a_name_entry_allows_the_ports_it_names_80_and_443_when_none():
    """A name's answer is its owner's to change: re-pointed at another
    loopback address, the name reaches it on 80 and 443, no other port."""
    egress = Egress(Allowance.parse("intranet.corp"))
    for port in (80, 443):
        assert egress.refusal("intranet.corp", port, ["127.0.0.1"]) is None
        assert egress.refusal("Intranet.Corp.", port, ["127.0.0.2"]) is None  # re-pointed: its ports still
    for port in (1, 22, 5000, 8080, 8443):
        assert egress.refusal("intranet.corp", port, ["127.0.0.2"]) == (
            "intranet.corp (127.0.0.2) is a loopback, private, link-local or metadata address"
        )
    assert egress.refusal("intranet.corp", 8080, ["93.184.215.14"]) is None  # a public answer needs no entry
    assert not egress.allowance.allows_name("other.corp", 443)
    # With ports, those ports only; a bare entry beside them adds 80 and 443.
    egress = Egress(Allowance.parse("wiki.corp:8443 wiki.corp:8080 [::1]:9000"))
    assert egress.refusal("wiki.corp", 8443, ["10.0.0.9"]) is None
    assert egress.refusal("wiki.corp", 8080, ["::1"]) is None
    for port in (80, 443, 9000):
        assert egress.refusal("wiki.corp", port, ["10.0.0.9"]) == (
            "wiki.corp (10.0.0.9) is a loopback, private, link-local or metadata address"
        )
    both = Egress(Allowance.parse("wiki.corp:8443 wiki.corp"))
    assert all(both.refusal("wiki.corp", port, ["10.0.0.9"]) is None for port in (80, 443, 8443))
    assert both.refusal("wiki.corp", 8080, ["10.0.0.9"]) is not None


WORKER = 5000
ALL_OPEN = f"localhost:{WORKER} penelope.internal:{WORKER} 127.0.0.1:{WORKER} [::1]:{WORKER} 0.0.0.0/0 ::/0"


@pytest.mark.parametrize(
    ("host", "addresses"),
    [
        ("localhost", ["127.0.0.1"]),
        ("penelope.internal", ["127.0.0.2"]),  # a name re-pointed at another loopback address
        ("127.0.0.1", ["127.0.0.1"]),
        ("127.9.9.9", ["127.9.9.9"]),
        ("::1", ["::1"]),
        ("::ffff:127.0.0.1", ["::ffff:127.0.0.1"]),
        ("0.0.0.0", ["0.0.0.0"]),
        ("::", ["::"]),
        ("localhost", ["93.184.215.14", "127.0.0.1"]),  # one of its answers is enough
    ],
)
def test_the_workers_own_port_is_refused_through_any_entry(host, addresses):
    egress = Egress(Allowance.parse(ALL_OPEN), worker=WorkerPort.of("127.0.0.1", WORKER))
    why = egress.refusal(host, WORKER, addresses)
    assert why is not None and why.endswith(f"port {WORKER} is the worker's own, which BROWSER_ALLOW never allows")
    assert egress.refusal(host, WORKER + 1, addresses) is None  # the entries' other ports stay open


def test_the_workers_own_port_on_the_addresses_it_listens_on():
    """On one address: that address and loopback. On every address (or a
    name): every address that is not global, the host's own among them."""
    allowance = Allowance.parse("0.0.0.0/0 ::/0")
    one = Egress(allowance, worker=WorkerPort.of("10.0.0.5", WORKER))
    assert (
        one.refusal("10.0.0.5", WORKER, ["10.0.0.5"])
        == "10.0.0.5 port 5000 is the worker's own, which BROWSER_ALLOW never allows"
    )
    assert one.refusal("127.0.0.1", WORKER, ["127.0.0.1"]) is not None
    assert one.refusal("10.0.0.6", WORKER, ["10.0.0.6"]) is None
    for host in ("0.0.0.0", "::", "", "[::]", "penelope-0.penelope"):
        every = Egress(allowance, worker=WorkerPort.of(host, WORKER))
        for address in ("10.0.0.6", "192.168.1.2", "100.64.0.1", "fd12::1", "127.0.0.1", "::ffff:10.1.1.1"):
            assert every.refusal(address, WORKER, [address]) is not None, (host, address)
            assert every.refusal(address, WORKER + 1, [address]) is None
        assert every.refusal("example.com", WORKER, ["93.184.215.14"]) is None  # not the host's: a public address


@pytest.mark.parametrize(
    "address",
    [
        "169.254.169.254",
        "fd00:ec2::254",
        "100.100.100.200",
        "169.254.170.2",
        "169.254.170.23",
        "fd00:ec2::23",
        "::ffff:169.254.169.254",
        "64:ff9b::a9fe:a9fe",
    ],
)
def test_a_metadata_address_is_refused_even_when_an_entry_allows_it(address):
    allowance = Allowance.parse("metadata.corp metadata.corp:8080 169.254.0.0/16 100.64.0.0/10 fd00::/8 0.0.0.0/0 ::/0")
    egress = Egress(allowance, worker=WorkerPort.of("127.0.0.1", WORKER))
    for host, port in [("metadata.corp", 80), ("metadata.corp", 8080), (address, 80)]:
        shown = host if host == address else f"{host} ({address})"
        assert (
            egress.refusal(host, port, [address])
            == f"{shown} is a cloud metadata address, which BROWSER_ALLOW never allows"
        )
    assert egress.refusal("169.254.1.1", 80, ["169.254.1.1"]) is None  # the network's other addresses stay allowed


@pytest.mark.parametrize(
    "entry",
    [
        "169.254.169.254",
        "169.254.169.254/32",
        "169.254.169.254:80",
        "[fd00:ec2::254]:80",
        "100.100.100.200",
        "::ffff:169.254.169.254",
    ],
)
def test_an_entry_naming_a_metadata_address_is_refused_naming_it(entry):
    with pytest.raises(ValueError, match=r"BROWSER_ALLOW: .* is a cloud metadata address"):
        Allowance.parse(entry)


def test_a_personas_proxy_must_be_one_the_egress_can_chain_to():
    assert Upstream.from_url("") is None
    assert Upstream.from_url("socks5://u:p%40ss@proxy.lan") == Upstream("socks5", "proxy.lan", 1080, "u", "p@ss")
    with pytest.raises(ValueError, match="PENELOPE_PROXY"):
        Upstream.from_url("socks4://proxy.lan:1080")


class Socks5:
    """A socks5 proxy with a user name and password, recording what it is asked to reach."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, int]] = []
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.server = asyncio.run_coroutine_threadsafe(asyncio.start_server(self.serve, "127.0.0.1", 0), self.loop).result()
        self.port = self.server.sockets[0].getsockname()[1]

    async def serve(self, reader, writer):
        _version, count = await reader.readexactly(2)
        assert 2 in await reader.readexactly(count)
        writer.write(b"\x05\x02")
        _, size = await reader.readexactly(2)
        user = await reader.readexactly(size)
        size = (await reader.readexactly(1))[0]
        password = await reader.readexactly(size)
        if (user, password) != (b"persona", b"secret"):
            writer.write(b"\x01\x01")
            writer.close()
            return
        writer.write(b"\x01\x00")
        _, _, _, kind = await reader.readexactly(4)
        assert kind == 1  # an IPv4 address: the egress never hands the proxy a name
        address = ".".join(str(b) for b in await reader.readexactly(4))
        (port,) = struct.unpack("!H", await reader.readexactly(2))
        self.asked.append((address, port))
        up_reader, up_writer = await asyncio.open_connection(address, port)
        writer.write(b"\x05\x00\x00\x01" + bytes(4) + b"\x00\x00")

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer), return_exceptions=True)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.server.close)


def test_the_egress_reaches_an_allowed_site_through_a_socks5_proxy_and_refuses_the_rest(site):
    socks = Socks5()
    site_port = int(site.url.rsplit(":", 1)[1])
    refusals = []
    egress = Egress(
        Allowance.parse(f"127.0.0.1:{site_port}"),
        Upstream.from_url(f"socks5://persona:secret@127.0.0.1:{socks.port}"),
        on_refused=lambda *refusal: refusals.append(refusal),
    )
    egress.start()
    try:
        with httpx.Client(proxy=egress.server, timeout=10) as client:
            answer = client.get(f"{site.url}/index.html?q=1")
            assert answer.status_code == 200 and answer.headers["connection"] == "close"
            assert socks.asked == [("127.0.0.1", site_port)]
            refused = client.get(f"http://127.0.0.1:{socks.port}/x?secret=1")
            assert refused.status_code == 403
            assert refused.text == (
                f"The browser refused http://127.0.0.1:{socks.port}: 127.0.0.1 is a loopback, private, "
                "link-local or metadata address (BROWSER_REFUSE_PRIVATE)."
            )
        assert socks.asked == [("127.0.0.1", site_port)]
        assert refusals == [("GET", f"http://127.0.0.1:{socks.port}/x", refused.text.split(": ", 1)[1][:-len(" (BROWSER_REFUSE_PRIVATE).")])]
        assert egress.sentence_for(f"http://127.0.0.1:{socks.port}/other") == refused.text
        assert egress.sentence_for(f"{site.url}/index.html") is None
    finally:
        egress.close()
        socks.close()


class KeepAliveSite:
    """An HTTP/1.1 server that keeps connections alive and counts them; `/chunked` answers in chunks."""

    def __init__(self) -> None:
        self.connections = 0
        self.paths: list[str] = []
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.server = asyncio.run_coroutine_threadsafe(asyncio.start_server(self.serve, "127.0.0.1", 0), self.loop).result()
        self.port = self.server.sockets[0].getsockname()[1]

    async def serve(self, reader, writer):
        self.connections += 1
        while head := (await reader.readuntil(b"\r\n\r\n")).decode():
            path = head.split(" ")[1]
            self.paths.append(path)
            length = next((int(line.split(":")[1]) for line in head.split("\r\n") if line.lower().startswith("content-length")), 0)
            body = await reader.readexactly(length)
            if path == "/chunked":
                writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
            else:
                said = f"{path} {body.decode()}".encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(said), said))
            await writer.drain()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.server.close)


def test_plain_http_keeps_its_connection_per_host_and_checks_every_request():
    first, second = KeepAliveSite(), KeepAliveSite()
    egress = Egress(Allowance.parse(f"127.0.0.1:{first.port} localhost:{second.port}"))
    egress.start()
    try:
        with httpx.Client(proxy=egress.server, timeout=10) as client:
            assert client.post(f"http://127.0.0.1:{first.port}/one", content=b"body").text == "/one body"
            assert client.get(f"http://127.0.0.1:{first.port}/chunked").text == "hello world"
            assert client.get(f"http://127.0.0.1:{first.port}/two").text == "/two "
            assert first.connections == 1  # one connection for the three, kept alive
            # The browser's next request names another host: checked, and sent to that host only.
            assert client.get(f"http://localhost:{second.port}/three").text == "/three "
            refused = client.get(f"http://127.0.0.1:{second.port}/four")  # the address without the name: not allowed
            assert refused.status_code == 403 and "127.0.0.1 is a loopback" in refused.text
        assert first.paths == ["/one", "/chunked", "/two"] and second.paths == ["/three"]
    finally:
        egress.close()
        first.close()
        second.close()


def test_a_site_that_never_answers_is_dropped_after_the_idle_time():
    """The egress does not read the browser's side while it waits for a
    site: a site that stalls is let go after `idle_s`, its socket closed."""
    closed = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))

    def stall():
        connection, _ = listener.accept()
        while connection.recv(65536):  # reads the request, answers nothing, until the egress hangs up
            pass
        closed.set()

    threading.Thread(target=stall, daemon=True).start()
    port = listener.getsockname()[1]
    egress = Egress(Allowance.parse(f"127.0.0.1:{port}"), idle_s=0.3)
    egress.start()
    try:
        with httpx.Client(proxy=egress.server, timeout=10) as client, pytest.raises(httpx.RemoteProtocolError):
            client.get(f"http://127.0.0.1:{port}/never")
        assert closed.wait(5)
    finally:
        egress.close()
        listener.close()
