"""A small webhook receiver for Penelope jobs.

Usage:
    WEBHOOK_SECRET=whsec_... python3 webhook_receiver.py [PORT] [DIRECTORY]
    PENELOPE_KEY=...         python3 webhook_receiver.py [PORT] [DIRECTORY]

It listens on 127.0.0.1:PORT (default 8099) and stores each job it receives
as DIRECTORY/<job_id>.json (default ./received). For every POST it:

1. checks the signature against the raw body and answers 401 if it does not
   match. With WEBHOOK_SECRET (the worker's, from its environment or
   store/webhook_secret) it checks the Standard Webhooks headers with the
   `standardwebhooks` package (`pip install standardwebhooks`), which also
   refuses a delivery whose webhook-timestamp is more than 5 minutes off, so
   a captured one cannot be replayed later; this receiver never needs the
   API key. With PENELOPE_KEY instead it checks X-Penelope-Signature
   (HMAC-SHA256 of the body keyed with the key), standard library only;
2. keys on X-Penelope-Job: a job already stored is not written again;
3. writes the body to disk (temporary file, fsync, rename) and only then
   answers 200. If the write fails it answers 500, and the worker tries again
   at its next attempt.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

KEY = os.environ.get("PENELOPE_KEY", "").encode()
SECRET = os.environ.get("WEBHOOK_SECRET", "")
PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 8099
STORE = Path(sys.argv[2] if len(sys.argv) > 2 else "received")
JOB_ID = re.compile(r"[0-9a-f]{16}")
MAX_BODY = 50 * 1024 * 1024
store_lock = threading.Lock()  # one write at a time


def signature_ok(body: bytes, signature: str) -> bool:
    """The guide's check: X-Penelope-Signature, keyed with PENELOPE_KEY."""
    expected = "sha256=" + hmac.new(KEY, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), signature.encode())


def standard_signature_ok(body: bytes, headers: dict[str, str]) -> bool:
    """Standard Webhooks: webhook-id, webhook-timestamp and webhook-signature,
    keyed with WEBHOOK_SECRET (either secret's signature passes during a rotation)."""
    from standardwebhooks import Webhook, WebhookVerificationError

    try:
        Webhook(SECRET).verify(body, headers, json_parse=False)
    except (WebhookVerificationError, ValueError):
        return False
    return True


def verified(body: bytes, headers) -> bool:
    if SECRET:
        return standard_signature_ok(body, {name: value for name, value in headers.items()})
    return signature_ok(body, headers.get("X-Penelope-Signature", ""))


def store(job_id: str, body: bytes) -> bool:
    """Write the body durably; answers False when the job was already stored."""
    final = STORE / f"{job_id}.json"
    with store_lock:
        if final.exists():
            return False
        partial = STORE / f"{job_id}.json.part"
        with open(partial, "wb") as handle:
            handle.write(body)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, final)
    return True


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if not 0 < length <= MAX_BODY:
            return self.answer(400, "a body with a Content-Length is required")
        body = self.rfile.read(length)
        if not verified(body, self.headers):
            return self.answer(401, "bad signature")
        job_id = self.headers.get("X-Penelope-Job", "")
        if not JOB_ID.fullmatch(job_id):
            return self.answer(400, "bad X-Penelope-Job")
        try:
            stored = store(job_id, body)
        except OSError as error:
            return self.answer(500, f"could not store the job: {error}")
        attempt = self.headers.get("X-Penelope-Attempt")
        print(f"job {job_id} attempt {attempt}: {'stored' if stored else 'already stored'}", flush=True)
        self.answer(200, "stored")

    def answer(self, status: int, text: str) -> None:
        data = (text + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args) -> None:
        pass  # one line per job is printed above


if __name__ == "__main__":
    if not (SECRET or KEY):
        sys.exit("Set WEBHOOK_SECRET to the worker's webhook secret (or PENELOPE_KEY to its key).")
    STORE.mkdir(parents=True, exist_ok=True)
    print(f"receiving on http://127.0.0.1:{PORT}/, storing in {STORE.resolve()}", flush=True)
    ThreadingHTTPServer(("127.0.0.1", PORT), Receiver).serve_forever()
