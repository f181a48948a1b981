"""What BROWSER_REFUSE_PRIVATE costs a browser step: the same steps on two
workers started alike but for the guard, one with the egress guard on
(BROWSER_ALLOW naming a loopback site) and one without, in turn, c=1.

Two steps: `page.evaluate("1+1")` (no connection: the guard should cost
nothing) and a navigation to a loopback page with three sub-resources (each
connection through the egress: resolved, checked, connected, copied)."""

from __future__ import annotations

import functools
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from bench import load
from bench.report import Plan, Report, Row, lat
from bench.stats import Latency
from harness.worker import WorkerProcess

TARGET_RATIO = 1.10  # the guard adds at most 10 % to a step's p50
PAGE = (b"<!doctype html><title>guarded</title><link rel=stylesheet href=/style.css>"
        b"<script src=/app.js></script><img src=/pixel.svg><p>a page with three sub-resources</p>")
PARTS = {
    "/": (PAGE, "text/html"),
    "/style.css": (b"p { color: #333 }", "text/css"),
    "/app.js": (b"document.title += ' ready';", "text/javascript"),
    "/pixel.svg": (b"<svg xmlns='http://www.w3.org/2000/svg' width='1' height='1'/>", "image/svg+xml"),
    "/favicon.ico": (b"<svg xmlns='http://www.w3.org/2000/svg' width='1' height='1'/>", "image/svg+xml"),
}


class Page(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a real site answers
    # As a real server does: without it, a head and a body written apart on a
    # kept-alive connection wait for the browser's delayed ACK (about 40 ms).
    disable_nagle_algorithm = True

    def do_GET(self):
        body, kind = PARTS.get(self.path.split("?", 1)[0], (b"", "text/plain"))
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def guard_phase(plan: Plan, report: Report, scratch: Path) -> None:
    site = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{site.server_address[1]}/"
    workers = {
        "off": WorkerProcess(scratch / "unguarded-store", env={"PENELOPE_PLUGINS": "plugins.web"}),
        "on": WorkerProcess(scratch / "guarded-store", env={
            "PENELOPE_PLUGINS": "plugins.web", "BROWSER_REFUSE_PRIVATE": "1",
            "BROWSER_ALLOW": f"127.0.0.1:{site.server_address[1]}",
        }),
    }
    try:
        for worker in workers.values():
            worker.start()
        with workers["off"].client() as off, workers["on"].client() as on:
            timings = measure({"off": off, "on": on}, url, plan)
    finally:
        for worker in workers.values():
            worker.stop()
        site.shutdown()
    for step, name in (("evaluate", "`primitive/evaluate` `1+1` (no connection)"),
                       ("goto", "`primitive/goto` a loopback page with three sub-resources (4 connections)")):
        off, on = Latency.of(timings[(step, "off")]), Latency.of(timings[(step, "on")])
        ratio = on.p50 / off.p50
        report.add(Row(f"BROWSER_REFUSE_PRIVATE on (the egress guard) against off: {name}, c=1, in turn",
                       lat(on), f"off: {lat(off)}", f"{ratio:.3f} x", f"p50 ≤ {TARGET_RATIO:g} x off",
                       ratio <= TARGET_RATIO))


def measure(clients: dict[str, httpx.Client], url: str, plan: Plan) -> dict[tuple[str, str], list[float]]:
    """Each step's rounds in turn: on each worker once a round, the order
    turned each round; the warm-up dropped."""

    def evaluate(client: httpx.Client) -> None:
        answer = client.post("/main/primitive/evaluate", json={"expression": "1+1"})
        assert answer.status_code == 200 and answer.json()["value"] == 2, answer.text

    def goto(client: httpx.Client) -> None:
        answer = client.post("/main/primitive/goto", json={"url": url, "wait_until": "load"})
        assert answer.status_code == 200 and answer.json()["status"] == 200, answer.text

    steps = {"evaluate": evaluate, "goto": goto}
    timings: dict[tuple[str, str], list[float]] = {(step, side): [] for step in steps for side in clients}
    rounds = plan.c1_requests // 4
    for step, call in steps.items():  # each step's rounds on their own: an evaluate never follows a navigation
        for n in range(plan.warmup + rounds):
            for side in (list(clients) if n % 2 else list(reversed(clients))):
                elapsed, _ = load.timed_ms(functools.partial(call, clients[side]))
                if n >= plan.warmup:
                    timings[(step, side)].append(elapsed)
    return timings
