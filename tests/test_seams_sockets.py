"""The upstream behaviour pieces 16 and 18 of core/seams rely on (17 and
19 went back to Playwright's and daphne's public API: docs/design/SEAMS.md), one test
each beside tests/test_seams.py's (here, in a module of their own: a test
there leaves an event loop running in its thread, where Playwright's sync
API and asyncio.run refuse to start)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import playwright

from core import seams

# --- 16. a socket's message size by path, and a close's reason ----------------------------------


def test_autobahn_reads_the_limits_per_connection_and_daphne_drops_a_close_s_reason():
    """autobahn copies the factory's `maxMessagePayloadSize` and
    `maxFramePayloadSize` onto a protocol once, when its connection is made
    (only those the protocol does not have yet), so `size_socket_messages`
    can set them in `onConnect` for one connection; and daphne's close takes
    the code alone. If this fails: autobahn reads the factory's limits
    itself now (adapt the seam), or daphne sends the reason (drop that half).
    tests/test_cdp.py checks both on a real worker."""
    from autobahn.websocket.protocol import WebSocketProtocol, WebSocketServerProtocol
    from daphne import ws_protocol

    assert {"maxMessagePayloadSize", "maxFramePayloadSize"} <= set(WebSocketServerProtocol.CONFIG_ATTRS), (
        "seam 16 size_socket_messages: autobahn's WebSocketServerProtocol no longer copies the payload limits per connection"
    )
    # And reads `failByDrop` (True on daphne's factory: a message past the limit
    # drops the connection) and `closeHandshakeTimeout` from the protocol when it fails or closes one.
    assert {"failByDrop", "closeHandshakeTimeout"} <= set(WebSocketServerProtocol.CONFIG_ATTRS), (
        "seam 16 size_socket_messages: autobahn no longer copies failByDrop and closeHandshakeTimeout per connection"
    )
    assert "if self.failByDrop:" in inspect.getsource(WebSocketProtocol._fail_connection), (
        "seam 16 size_socket_messages: autobahn's _fail_connection no longer reads failByDrop"
    )
    assert "self.closeHandshakeTimeout," in inspect.getsource(WebSocketProtocol.sendCloseFrame), (
        "seam 16 size_socket_messages: autobahn's sendCloseFrame no longer reads closeHandshakeTimeout"
    )
    assert "if not hasattr(self, configAttr)" in inspect.getsource(WebSocketProtocol._connectionMade), (
        "seam 16 size_socket_messages: autobahn's _connectionMade now overwrites what the protocol set"
    )
    assert list(inspect.signature(ws_protocol.WebSocketProtocol.serverClose).parameters) == ["self", "code"], (
        "seam 16 size_socket_messages: daphne's WebSocketProtocol.serverClose takes a reason now (drop that half)"
    )
    assert 'self.serverClose(code=message.get("code", None))' in inspect.getsource(
        ws_protocol.WebSocketProtocol.handle_reply
    ), "seam 16 size_socket_messages: daphne's WebSocketProtocol.handle_reply closes otherwise now"


def test_size_socket_messages_sets_the_limits_of_the_paths_it_names_and_sends_the_reason(monkeypatch):
    from daphne import ws_protocol

    monkeypatch.setattr(ws_protocol.WebSocketFactory, "protocol", ws_protocol.WebSocketFactory.protocol)
    sized = seams.size_socket_messages(lambda path: 99 if path.startswith("/big/") else None, close_wait_s=12.0)
    assert ws_protocol.WebSocketFactory.protocol is sized, (
        "seam 16 size_socket_messages: what the seam makes of it changed"
    )
    seen = []
    monkeypatch.setattr(ws_protocol.WebSocketProtocol, "onConnect", lambda self, request: seen.append(request.path))
    big, small = sized.__new__(sized), sized.__new__(sized)
    big.maxMessagePayloadSize = big.maxFramePayloadSize = small.maxMessagePayloadSize = small.maxFramePayloadSize = 7
    big.failByDrop = small.failByDrop = True
    big.closeHandshakeTimeout = small.closeHandshakeTimeout = 1

    class Request:
        def __init__(self, path: str) -> None:
            self.path = path

    big.onConnect(Request("/big/x"))
    small.onConnect(Request("/other"))
    assert (big.maxMessagePayloadSize, big.maxFramePayloadSize) == (99, 99), (
        "seam 16 size_socket_messages: what the seam makes of it changed"
    )
    assert (small.maxMessagePayloadSize, small.maxFramePayloadSize) == (7, 7) and seen == ["/big/x", "/other"], (
        "seam 16 size_socket_messages: what the seam makes of it changed"
    )
    assert (big.failByDrop, big.closeHandshakeTimeout) == (
        False,
        12.0,
    ), (  # a close frame past the limit, and time to read it
        "seam 16 size_socket_messages: what the seam makes of it changed"
    )
    assert (small.failByDrop, small.closeHandshakeTimeout) == (True, 1), (
        "seam 16 size_socket_messages: what the seam makes of it changed"
    )
    closes = []
    big.state, big.sendClose = sized.STATE_OPEN, lambda **close: closes.append(close)
    big.handle_reply({"type": "websocket.close", "code": 4001, "reason": "The lease ended."})
    assert closes == [{"code": 4001, "reason": "The lease ended."}], (
        "seam 16 size_socket_messages: what the seam makes of it changed"
    )


# --- 18. the driver tap on Chromium's pipe ------------------------------------------------------------


def test_the_driver_spawns_chromium_through_child_process_and_reads_its_pipe_from_stdio():
    """What browser/tap.cjs relies on in Playwright's driver: Chromium is
    spawned by `childProcess.spawn` (a getter onto Node's module, looked up
    at each call) with `--remote-debugging-pipe`, and the pipe's transport
    is built from the child's `stdio[3]` and `stdio[4]` afterwards, reading
    only `data`, `close`, `error` and `readable`. If this fails, the driver
    reaches the pipe another way now: adapt the tap. tests/test_cdp.py
    drives real clients through it."""
    bundle = (Path(playwright.__file__).parent / "driver/package/lib/coreBundle.js").read_text()
    assert 'childProcess = __toESM(require("child_process"))' in bundle, (
        "seam 18 the driver tap: Playwright's driver no longer reaches child_process through an __toESM getter"
    )
    assert "const spawnedProcess = childProcess.spawn(options.command, options.args || [], spawnOptions);" in bundle, (
        "seam 18 the driver tap: Playwright's driver no longer spawns Chromium through childProcess.spawn"
    )
    assert 'chromeArguments.push("--remote-debugging-pipe");' in bundle, (
        "seam 18 the driver tap: Playwright's driver no longer launches Chromium with --remote-debugging-pipe"
    )
    assert "transport = new PipeTransport2(stdio[3], stdio[4]);" in bundle, (
        "seam 18 the driver tap: Playwright's driver no longer builds its PipeTransport from stdio[3] and stdio[4]"
    )
    # The tap takes answers with a negative id at the root as the worker's: Playwright's ids count up from
    # 1, and its one negative id is its Browser.close's, which the tap leaves to it.
    assert "kBrowserCloseMessageId = -9999;" in bundle and "const id = ++this._lastId;" in bundle, (
        "seam 18 the driver tap: Playwright's driver numbers its CDP messages otherwise (the tap's negative ids may clash)"
    )
    assert len(re.findall(r"\bid: -\d|kBrowserCloseMessageId", bundle)) == len(
        re.findall(r"kBrowserCloseMessageId", bundle)
    ), "seam 18 the driver tap: Playwright's driver sends another negative id"
    transport = bundle[bundle.index("PipeTransport2 = class {") :]
    transport = transport[: transport.index("\n    };\n")]
    assert sorted(set(re.findall(r"pipeRead\.(\w+)", transport))) == ["on", "readable"], (
        "seam 18 the driver tap: Playwright's PipeTransport reads its pipe otherwise now"
    )
    assert sorted(set(re.findall(r'pipeRead\.on\("(\w+)"', transport))) == ["close", "data", "error"], (
        "seam 18 the driver tap: Playwright's PipeTransport listens to other events of its pipe now"
    )
