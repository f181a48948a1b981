"""The peer a user would otherwise build with: RQ on a Redis server from the
distribution's packages, both started here on loopback and stopped after.

`noop` is the job both RQ workers run: the counterpart of the `bench/noop`
plugin action.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def noop() -> dict:
    """RQ's no-op job."""
    return {}


class RedisServer:
    """`redis-server` on a free loopback port, without persistence, in `directory`."""

    def __init__(self, directory: Path, port: int):
        self.directory, self.port = Path(directory), port
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 20) -> RedisServer:
        import redis

        executable = shutil.which("redis-server")
        if executable is None:
            raise RuntimeError("redis-server is not installed (scripts/bench.sh installs it with apt-get).")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [executable, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.directory), "--logfile", str(self.directory / "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if client.ping():
                    return self
            except redis.ConnectionError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"redis-server did not answer PING on port {self.port} in {timeout} s")

    def version(self) -> str:
        import redis

        return redis.Redis.from_url(self.url).info("server")["redis_version"]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class RQWorker:
    """`rq worker` in a subprocess on one queue, with the given worker class."""

    def __init__(self, redis_url: str, queue: str, worker_class: str, log_path: Path):
        self.redis_url, self.queue, self.worker_class, self.log_path = redis_url, queue, worker_class, log_path
        self.process: subprocess.Popen | None = None

    def start(self) -> RQWorker:
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child keeps it
        self.process = subprocess.Popen(
            [sys.executable, "-m", "rq.cli", "worker", "--url", self.redis_url, "--worker-class", self.worker_class,
             "--path", str(ROOT), "--quiet", self.queue],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
        )
        log.close()
        return self

    def stop(self) -> None:
        # RQ's own protocol: the first SIGTERM is a warm shutdown.
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def round_trip_ms(queue, timeout_s: float = 60) -> float:
    """Enqueue the no-op and ask for its result until it is there, with no
    pause between asks: how Penelope's round trip is measured too."""
    began = time.perf_counter()
    job = queue.enqueue(noop)
    while job.latest_result() is None:
        if time.perf_counter() - began > timeout_s:
            raise RuntimeError(f"RQ job {job.id} has no result after {timeout_s} s")
    return (time.perf_counter() - began) * 1000
