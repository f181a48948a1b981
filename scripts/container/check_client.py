"""The container check's client: what scripts/container-check.sh asks of a
worker running in a container, done as a client on the host would do it,
with Python's standard library only (the host needs no venv for it).

    check_client.py wait    BASE SECONDS [PATH]        until GET PATH (health) answers 200
    check_client.py calls   BASE STATE RECEIVER_HOST   a plugin call, a polling job
                                                 with a file, a webhook job
                                                 delivered to a receiver here,
                                                 and a long job left running
    check_client.py after   BASE STATE                 after a restart: the same key,
                                                 the held result and its file,
                                                 the running job interrupted
    check_client.py pod     BASE KEY                   the pod of the exported spec:
                                                 health, a plugin call, and
                                                 the browser's guard against
                                                 private addresses in force

KEY, WEBHOOK_SECRET: the worker's, from the environment (read from its store
by the script). STATE is a JSON file the two halves of a restart share. A
failed check raises SystemExit with what was expected and what came.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# The long job: 800 handles at a second a batch of ten, far longer than the
# check, so it is still running when the container restarts.
LONG_JOB = "demo/get-following?handle=alice&limit=800&pause_ms=1000"
TTL = "600"


def say(text: str) -> None:
    print(f"  {text}", flush=True)


def fail(text: str) -> None:
    raise SystemExit(f"check failed: {text}")


def request(
    base: str, path: str, key: str | None = None, headers: dict[str, str] | None = None, timeout: float = 120
) -> tuple[int, bytes, dict[str, str]]:
    req = urllib.request.Request(base.rstrip("/") + path, headers=dict(headers or {}))
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as answer:
            return answer.status, answer.read(), dict(answer.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read(), dict(error.headers)


def get_json(base: str, path: str, key: str | None = None, expect: int = 200, **kwargs: Any) -> dict[str, Any]:
    status, body, _ = request(base, path, key, **kwargs)
    if status != expect:
        fail(f"GET {path} answered {status}, not {expect}: {body[:500]!r}")
    return json.loads(body)


def wait_healthy(base: str, seconds: float, path: str = "/api/v1/health") -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            status, body, _ = request(base, path, timeout=5)
            if status == 200:
                return json.loads(body)
            last = f"{status} {body[:200]!r}"
        except OSError as error:
            last = str(error)
        time.sleep(0.5)
    fail(f"GET {path} did not answer 200 in {seconds:g} s (last: {last})")
    raise AssertionError  # not reached


def plugin_call(base: str, key: str) -> dict[str, Any]:
    answer = get_json(base, "/api/v1/main/plugin/demo/open-account?handle=alice", key)
    if not (answer.get("success") and answer.get("handle") == "alice" and isinstance(answer.get("followers"), int)):
        fail(f"demo/open-account answered {answer}")
    say(f"plugin call demo/open-account: {answer['name']!r}, {answer['followers']} followers")
    return answer


def wait_job(base: str, key: str, job_id: str, seconds: float, until: set[str]) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        job = get_json(base, f"/api/v1/jobs/{job_id}", key)
        if job["state"] in until:
            return job
        time.sleep(0.5)
    fail(f"job {job_id} not {'/'.join(sorted(until))} after {seconds:g} s: {job}")
    raise AssertionError


class Receiver(BaseHTTPRequestHandler):
    """Stores each POST whose Standard Webhooks signature checks out."""

    received: dict[str, dict[str, Any]] = {}
    secret = b""
    got = threading.Event()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        job_id, stamp = self.headers.get("webhook-id", ""), self.headers.get("webhook-timestamp", "")
        signed = f"{job_id}.{stamp}.".encode() + body
        expected = base64.b64encode(hmac.new(self.secret, signed, hashlib.sha256).digest()).decode()
        offered = [part.split(",", 1)[1] for part in self.headers.get("webhook-signature", "").split() if "," in part]
        ok = any(hmac.compare_digest(expected, sig) for sig in offered) and abs(time.time() - int(stamp or 0)) < 300
        if ok:  # stored before the 200, as a receiver should
            self.received[job_id] = json.loads(body)
            self.got.set()
        self.send_response(200 if ok else 401)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def webhook_job(base: str, key: str, secret: str, receiver_host: str) -> str:
    Receiver.secret = base64.b64decode(secret.split()[0].removeprefix("whsec_"))
    server = ThreadingHTTPServer((receiver_host, 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://{receiver_host}:{server.server_address[1]}/hooks/check"
    try:
        start = get_json(
            base, "/api/v1/main/plugin/demo/get-following?handle=alice&limit=20&pause_ms=0", key,
            expect=202, headers={"X-Callback-Url": url},
        )
        job_id = start["job_id"]
        if not Receiver.got.wait(120):
            job = get_json(base, f"/api/v1/jobs/{job_id}", key)
            fail(f"no signed webhook reached {url} in 120 s; the job: {job}")
        delivered = Receiver.received.get(job_id)
        if not delivered or delivered.get("state") != "done" or delivered["result"].get("count") != 20:
            fail(f"the webhook for {job_id} carried {delivered}")
        say(f"webhook job {job_id}: delivered to {url}, signature checked, {delivered['result']['count']} handles")
        return job_id
    finally:
        server.shutdown()


def calls(base: str, state_file: str, receiver_host: str) -> None:
    key, secret = os.environ["KEY"], os.environ["WEBHOOK_SECRET"]
    if request(base, "/api/v1/pages")[0] != 401:
        fail("GET /api/v1/pages without the key did not answer 401")
    plugin_call(base, key)

    # A polling job whose result holds a file (a screenshot, in the media store).
    start = get_json(base, "/api/v1/main/plugin/web/screenshot", key, expect=202, headers={"X-Result-Ttl": TTL})
    job = wait_job(base, key, start["job_id"], 120, {"done", "failed", "interrupted"})
    if job["state"] != "done" or job["status"] != 200:
        fail(f"the screenshot job ended {job['state']} {job['status']}: {job['result']}")
    media_url = job["result"]["media"]["url"]
    status, png, _ = request(base, media_url, key)
    if status != 200 or not png.startswith(b"\x89PNG"):
        fail(f"GET {media_url} answered {status}, {png[:20]!r}")
    say(f"polling job {job['job_id']}: done, its screenshot {len(png)} bytes at {media_url}")

    webhook_job(base, key, secret, receiver_host)

    # A job still running when the container restarts.
    long = get_json(base, f"/api/v1/main/plugin/{LONG_JOB}", key, expect=202, headers={"X-Result-Ttl": TTL})
    deadline = time.monotonic() + 60
    while True:
        job = get_json(base, f"/api/v1/jobs/{long['job_id']}", key)
        if job["state"] != "running":
            fail(f"the long job is {job['state']}, not running: {job}")
        if (job.get("progress") or {}).get("done"):
            break
        if time.monotonic() > deadline:
            fail(f"the long job made no progress in 60 s: {job}")
        time.sleep(0.5)
    say(f"long job {long['job_id']}: running, {job['progress']['message']}")
    with open(state_file, "w") as out:
        json.dump(
            {"key": key, "held_job": start["job_id"], "media_url": media_url,
             "media_sha256": hashlib.sha256(png).hexdigest(), "running_job": long["job_id"]},
            out,
        )


def after(base: str, state_file: str) -> None:
    with open(state_file) as source:
        state = json.load(source)
    key = state["key"]
    if os.environ.get("KEY") != key:
        fail("the key in the store changed across the restart")
    get_json(base, "/api/v1/pages", key)  # the old key still opens the API
    say("the key: the same in the store, and it still opens the API")
    held = get_json(base, f"/api/v1/jobs/{state['held_job']}", key)
    if held["state"] != "done" or held["result"]["media"]["url"] != state["media_url"]:
        fail(f"the held job after the restart: {held}")
    status, png, _ = request(base, state["media_url"], key)
    if status != 200 or hashlib.sha256(png).hexdigest() != state["media_sha256"]:
        fail(f"the held job's file after the restart: {status}, {len(png)} bytes, not the same")
    say(f"held job {state['held_job']}: still done, its file the same {len(png)} bytes")
    running = get_json(base, f"/api/v1/jobs/{state['running_job']}", key)
    if running["state"] != "interrupted":
        fail(f"the job running at the restart is {running['state']}, not interrupted: {running}")
    say(f"job {state['running_job']} running at the restart: interrupted ({running['result'].get('error')})")
    plugin_call(base, key)


def pod(base: str, key: str) -> None:
    """The manifest sets BROWSER_REFUSE_PRIVATE=1: the browser refuses the
    pod's own addresses, the demo site's among them. So the call is one that
    loads nothing (a screenshot of the blank page), and the demo call must be
    refused."""
    if request(base, "/api/v1/pages")[0] != 401:
        fail("GET /api/v1/pages without the key did not answer 401")
    answer = get_json(base, "/api/v1/main/plugin/web/screenshot", key)
    status, png, _ = request(base, answer["media"]["url"], key)
    if status != 200 or not png.startswith(b"\x89PNG"):
        fail(f"the screenshot's file answered {status}, {png[:20]!r}")
    say(f"plugin call web/screenshot with the key from the Secret: {answer['width']}x{answer['height']}, {len(png)} bytes")
    status, body, _ = request(base, "/api/v1/main/plugin/demo/open-account?handle=alice", key)
    if status != 403 or b"BROWSER_REFUSE_PRIVATE" not in body:
        fail(f"demo/open-account (the worker's own address) answered {status}, not 403 for BROWSER_REFUSE_PRIVATE: {body[:300]!r}")
    say("demo/open-account: 403, the browser refuses the pod's own address (BROWSER_REFUSE_PRIVATE=1)")


def main(argv: list[str]) -> None:
    command, base, *rest = argv
    if command == "wait":
        path = rest[1] if len(rest) > 1 else "/api/v1/health"
        health = wait_healthy(base, float(rest[0]), path)
        say(f"GET {path}: {health.get('status')}, browser {health.get('browser_state')}")
    elif command == "calls":
        calls(base, rest[0], rest[1])
    elif command == "after":
        after(base, rest[0])
    elif command == "pod":
        pod(base, rest[0])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
