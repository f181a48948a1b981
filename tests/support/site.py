"""A loopback web site for the tests: static pages and a few dynamic ones."""

from __future__ import annotations

import json
import threading
import time
from html import escape
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

PAGES = Path(__file__).resolve().parent / "pages"


class Handler(SimpleHTTPRequestHandler):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, directory=str(PAGES), **kwargs)

    def do_GET(self):
        self.server.requests.append(self.path)
        url = urlsplit(self.path)
        query = {name: values[0] for name, values in parse_qs(url.query).items()}
        if url.path == "/slow":
            # Answers after `ms` milliseconds: for navigation timeouts.
            time.sleep(int(query.get("ms", "5000")) / 1000)
            return self._send(b"<title>Slow</title><p>finally</p>")
        if url.path == "/echo":
            # The request's headers, as the page's text and as JSON in #headers.
            headers = json.dumps({name.lower(): value for name, value in self.headers.items()})
            return self._send(f"<title>Echo</title><pre id='headers'>{escape(headers)}</pre>".encode())
        if url.path == "/missing":
            return self._send(b"<title>Not here</title><p>nothing here</p>", status=404)
        if url.path == "/api/items":
            # `count` results as JSON after `delay_ms`: what late.html fetches.
            time.sleep(int(query.get("delay_ms", "0")) / 1000)
            count = int(query.get("count", "10"))
            items = [{"id": n, "title": f"Result {n}", "href": f"/item/{n}"} for n in range(count)]
            return self._send(json.dumps({"items": items, "count": count}).encode(), content_type="application/json")
        if url.path == "/api/blob":
            return self._send(bytes(range(256)) * int(query.get("kib", "4")) * 4, content_type="application/octet-stream")
        if url.path == "/list":
            page, pages = int(query.get("page", "1")), int(query.get("pages", "3"))
            if not 1 <= page <= pages:
                return self._send(b"<title>No such page</title>", status=404)
            return self._send(list_page(page, pages, int(query.get("per", "4"))))
        if url.path == "/set-cookie":
            self.send_response(200)
            self.send_header("Set-Cookie", f"{query.get('name', 'flavour')}={query.get('value', 'oat')}; Path=/")
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", "2")
            self.end_headers()
            return self.wfile.write(b"ok")
        if url.path.startswith("/shown/"):
            # A file a browser shows instead of saving, typed by its name's
            # extension or `as` (SHOWN), with no Content-Disposition or an
            # inline one (`disposition`), answered with `status`; `kib` KiB of
            # text instead, sent in 64 KiB chunks of unknown length when `chunked`.
            name = url.path.removeprefix("/shown/")
            body, content_type = SHOWN[query.get("as") or name.rsplit(".", 1)[-1]]
            if "kib" in query:
                body = b"line of text\n" * (int(query["kib"]) * 1024 // 13)
            status = int(query.get("status", "200"))
            content_type = "" if "untyped" in query else content_type
            return self._send_shown(body, content_type, query.get("disposition"), "chunked" in query, status)
        if url.path == "/download":
            # A file served as a download: `kib` KiB of a pattern, `pause_ms` between
            # 64 KiB pieces; behind the cookie `need` when asked (else 403).
            need = query.get("need")
            if need and f"{need}=" not in self.headers.get("Cookie", ""):
                return self._send(b"<title>Sign in first</title>", status=403)
            return self._send_file(query.get("name", "report.csv"), int(query.get("kib", "4")), int(query.get("pause_ms", "0")))
        return super().do_GET()

    def _send_file(self, name: str, kib: int, pause_ms: int):
        piece = bytes(range(256)) * 256  # 64 KiB
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Disposition", f'attachment; filename="{name}"')
        self.send_header("Content-Length", str(kib * 1024))
        self.end_headers()
        left = kib * 1024
        try:
            while left > 0:
                self.wfile.write(piece[: min(left, len(piece))])
                left -= min(left, len(piece))
                time.sleep(pause_ms / 1000)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the browser cancelled it

    def _send_shown(self, body: bytes, content_type: str, disposition: str | None, chunked: bool, status: int):
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        if disposition:
            self.send_header("Content-Disposition", f'inline; filename="{disposition}"')
        if not chunked:
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            return self.wfile.write(body)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for start in range(0, len(body), 65536):
                piece = body[start : start + 65536]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the browser stopped it

    def _send(self, body: bytes, status: int = 200, content_type: str = "text/html; charset=utf-8"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def end_headers(self):
        # Nothing is cached: a test that counts the site's requests sees every fetch.
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, *args):
        pass


def one_page_pdf() -> bytes:
    """A valid one-page PDF, offsets and all: Chromium opens it in its viewer."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 100] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length 35 >>\nstream\nBT /F1 12 Tf 20 50 Td (Shown) Tj ET\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


# What /shown/<name>.<extension> serves: the body and its Content-Type.
SHOWN = {
    "txt": (b"Plain text the browser shows.\nA second line.\n", "text/plain; charset=utf-8"),
    "json": (b'{"items": [1, 2, 3], "shown": true}', "application/json"),
    "png": (
        bytes.fromhex(
            "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
            "1f15c4890000000d4944415478da63f8cfc0f01f0005000200a9b1b1bc0000000049454e44ae426082"
        ),
        "image/png",
    ),
    "pdf": (one_page_pdf(), "application/pdf"),
}


def list_page(page: int, pages: int, per: int) -> bytes:
    """Page `page` of a server-paginated list: `per` rows with a relative link
    and a price each, and an `a.next` link on every page but the last."""
    rows = "".join(
        f"<li class='row'><a href='/item/{n}'>Item {n}</a> <span class='price'>{n * 10}</span></li>"
        for n in range((page - 1) * per, page * per)
    )
    following = f"<a class='next' href='/list?page={page + 1}&pages={pages}&per={per}'>next</a>" if page < pages else ""
    return f"<title>List page {page}</title><ul>{rows}</ul>{following}".encode()


class Site:
    def __init__(self):
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.requests = []  # every path asked for, in order
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Site:
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
