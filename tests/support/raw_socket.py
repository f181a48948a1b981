"""A WebSocket client on a bare socket that reads only when told to: a client
that has stopped reading, for the event stream's overflow test; and an HTTP
request on a bare socket whose answer's head is read as it was sent (its
status line with its reason phrase, which HTTP clients do not keep)."""

from __future__ import annotations

import base64
import json
import os
import socket
import struct


class RawSocket:
    def __init__(self, host: str, port: int, path: str, key: str, receive_buffer: int = 4096) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)  # before connect: a small window
        self.sock.connect((host, port))
        handshake = (
            f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}\r\nSec-WebSocket-Version: 13\r\n"
            f"Authorization: Bearer {key}\r\n\r\n"
        )
        self.sock.sendall(handshake.encode())
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self._recv()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        self.status = int(head.split(b" ")[1])

    def _recv(self) -> bytes:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the socket")
        return chunk

    def _take(self, n: int) -> bytes:
        while len(self.buffer) < n:
            self.buffer += self._recv()
        taken, self.buffer = self.buffer[:n], self.buffer[n:]
        return taken

    def message(self) -> dict:
        """The next text message, as JSON (server frames are unmasked and, from
        daphne, unfragmented)."""
        first, second = self._take(2)
        opcode, length = first & 0x0F, second & 0x7F
        if length == 126:
            (length,) = struct.unpack("!H", self._take(2))
        elif length == 127:
            (length,) = struct.unpack("!Q", self._take(8))
        payload = self._take(length)
        if opcode != 1:
            raise ConnectionError(f"frame of opcode {opcode}")
        return json.loads(payload)

    def close(self) -> None:
        self.sock.close()


def http_head(host: str, port: int, request: bytes, timeout: float = 30) -> tuple[str, dict[str, str]]:
    """Send `request` (a whole HTTP/1.1 request) and read its answer's head:
    the status line as sent (`HTTP/1.1 429 Too Many Requests`) and the
    headers, by lowercase name."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(request)
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("the server closed the socket before the end of the head")
            received += chunk
    status_line, *lines = received.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    return status_line, headers
