"""Files in and out through the worker against a plain fetch: a 100 MB file
downloaded by the persona's browser (`web/download` of a loopback link, then
the client's GET of its media link) and uploaded by a client (`POST
/api/v1/media`), each beside `httpx` fetching the same file straight from the
same loopback server; and the worker's peak resident memory across the
uploads, which streams bodies to disk and should not grow by the file's size.

On a worker of its own, so that its peak memory is this phase's."""

from __future__ import annotations

import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from bench.report import Plan, Report, Row
from harness.worker import WorkerProcess

SIZE_MB = 100
PIECE = 1024 * 1024
DATA = bytes(range(256)) * (PIECE // 256)  # one MiB, sent SIZE_MB times


class File(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Disposition", 'attachment; filename="big.bin"')
        self.send_header("Content-Length", str(SIZE_MB * PIECE))
        self.end_headers()
        for _ in range(SIZE_MB):
            self.wfile.write(DATA)

    def log_message(self, *args):
        pass


def peak_rss_mb(pid: int) -> float:
    """The process's resident high-water mark (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def timed(work) -> float:
    began = time.perf_counter()
    work()
    return time.perf_counter() - began


def rate(seconds: list[float]) -> str:
    return f"{SIZE_MB / statistics.median(seconds):.0f} MB/s (median of {len(seconds)}, {statistics.median(seconds):.2f} s)"


def files_phase(plan: Plan, report: Report, scratch: Path) -> None:
    rounds = 1 if plan.name == "quick" else 3
    site = ThreadingHTTPServer(("127.0.0.1", 0), File)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{site.server_address[1]}/big.bin"
    upload = scratch / "upload.bin"
    with open(upload, "wb") as file:
        for _ in range(SIZE_MB):
            file.write(DATA)
    worker = WorkerProcess(scratch / "files-store", env={
        "PENELOPE_PLUGINS": "plugins.web", "UPLOAD_MAX_MB": str(SIZE_MB + 1), "DOWNLOAD_MAX_MB": str(SIZE_MB + 1),
        "MEDIA_MAX_MB": str(SIZE_MB * 4),
    })  # fmt: skip
    try:
        worker.start()
        plain, through, up = [], [], []
        with worker.client(timeout=600) as client, httpx.Client(timeout=600) as direct:

            def fetch_plainly() -> None:
                with direct.stream("GET", url) as response:
                    for _ in response.iter_bytes(PIECE):
                        pass

            def download() -> None:
                answer = client.post("/main/plugin/web/download", json={"url": url})
                answer.raise_for_status()
                with client.stream("GET", answer.json()["media"]["url"].removeprefix("/api/v1")) as response:
                    for _ in response.iter_bytes(PIECE):
                        pass

            def pieces():
                with open(upload, "rb") as file:
                    while piece := file.read(PIECE):
                        yield piece

            def send() -> None:
                headers = {"Content-Type": "application/octet-stream", "X-Filename": "upload.bin"}
                client.post("/media", content=pieces(), headers=headers).raise_for_status()

            before = peak_rss_mb(worker.process.pid)
            for _ in range(rounds):
                plain.append(timed(fetch_plainly))
                up.append(timed(send))
            uploads_peak = peak_rss_mb(worker.process.pid)
            for _ in range(rounds):
                through.append(timed(download))
    finally:
        worker.stop()
        site.shutdown()
        upload.unlink(missing_ok=True)
    reference = f"httpx from the loopback server: {rate(plain)}"
    for name, seconds in (("download (`web/download` of a link, then the client's GET of its media link)", through),
                          ("upload (`POST /api/v1/media`, sent in 1 MiB pieces)", up)):
        ratio = statistics.median(seconds) / statistics.median(plain)
        report.add(Row(f"A {SIZE_MB} MB {name}, through the worker", rate(seconds), reference, f"{ratio:.2f} x time"))
    report.add(Row(f"The worker's peak resident memory across {rounds} {SIZE_MB} MB uploads",
                   f"{uploads_peak:.0f} MB", f"before them: {before:.0f} MB", f"+{uploads_peak - before:.0f} MB",
                   f"less than +{SIZE_MB // 4} MB (the body goes to disk)", uploads_peak - before < SIZE_MB / 4))
