"""A webhook receiver on loopback that records every request it gets.

The path says how to answer: `/<behaviours>/<name>` where behaviours is a
comma-separated list used one per request in turn (the last one repeats):
a status code (`200`, `500`, `429`, ...), `hang` (never answers in time),
`slow` (answers 200 after a short delay), `reset` (drops the connection
mid-answer), `huge` (200 with a very large body) or `redirect` (301).
`on_request`, when set, is called with each request before it is answered.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.time() when the body was in hand


@dataclass
class Receiver:
    hang_s: float = 5
    slow_s: float = 0.2
    requests: list[Received] = field(default_factory=list)
    on_request: Callable[[Received], None] | None = None

    def __post_init__(self):
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                received = Received(self.path, dict(self.headers.items()), body, time.time())
                with receiver.lock:
                    receiver.requests.append(received)
                    count = sum(1 for r in receiver.requests if r.path == self.path)
                if receiver.on_request is not None:
                    receiver.on_request(received)
                behaviours = self.path.strip("/").split("/")[0].split(",")
                receiver.answer(self, behaviours[min(count, len(behaviours)) - 1])

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def answer(self, handler: BaseHTTPRequestHandler, behaviour: str) -> None:
        if behaviour == "hang":
            self.stopping.wait(self.hang_s)
            behaviour = "200"
        elif behaviour == "slow":
            time.sleep(self.slow_s)
            behaviour = "200"
        if behaviour == "reset":
            handler.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
            handler.wfile.flush()
            # SO_LINGER 0: close with a RST, not a FIN.
            handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            handler.connection.close()
            handler.close_connection = True
            return
        if behaviour == "redirect":
            handler.send_response(301)
            handler.send_header("Location", self.url + "/200/redirected")
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        status = 200 if behaviour == "huge" else int(behaviour)
        size = 20 * 1024 * 1024 if behaviour == "huge" else 0 if status in (204, 304) else 2
        handler.send_response(status)
        handler.send_header("Content-Length", str(size))
        handler.end_headers()
        try:
            handler.wfile.write(b"ok"[:size] if size <= 2 else b"x" * size)
        except OSError:
            pass

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def received(self, path: str) -> list[Received]:
        with self.lock:
            return [r for r in self.requests if r.path == path]

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()
