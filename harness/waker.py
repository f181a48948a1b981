"""Start a real waker (`manage.py waker`) in a subprocess on loopback, with a
personas file of the caller's own; the waker starts real workers. Used by
the tests and the benchmarks alike."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from harness.worker import free_port, start_manage, wait_healthy, wait_until

WAKER_TEST_KEY = "waker-test-key-0123456789"


class WakerProcess:
    def __init__(
        self, directory: Path, personas: list[dict[str, Any]], env: dict[str, str] | None = None,
        before_exec: Callable[[], None] | None = None,
    ):
        """`personas` as in the file, without ports: each gets a free one.
        `before_exec` runs in the waker's process before `manage.py` (the
        benchmark's cgroup, which its workers then share)."""
        self.before_exec = before_exec
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        # Distinct: the kernel may hand out a port it handed out a moment ago.
        ports = distinct_free_ports(len(personas) + 1)
        self.personas = {p["name"]: {"port": port, "store": p["name"], **p} for p, port in zip(personas, ports[:-1], strict=True)}
        self.env = dict(env or {})
        self.port = ports[-1]
        self.key = WAKER_TEST_KEY
        self.process: subprocess.Popen | None = None
        self.log_path = self.directory / "waker.log"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def store(self, name: str) -> Path:
        return (self.directory / self.personas[name]["store"]).resolve()

    def worker_key(self, name: str) -> str:
        return self.personas[name].get("env", {}).get("PENELOPE_KEY") or (self.store(name) / "key").read_text().strip()

    def start(self, timeout: float = 30) -> WakerProcess:
        personas_file = self.directory / "personas.json"
        personas_file.write_text(json.dumps({"personas": list(self.personas.values())}, indent=2))
        env = {
            **os.environ,
            "WAKER_PORT": str(self.port),
            "WAKER_KEY": self.key,
            "WAKER_PERSONAS": str(personas_file),
            "PYTHONUNBUFFERED": "1",
            # Wrong keys answered at once (core/wrong_keys.py), unless the
            # test sets the wait, by its name or its older one.
            **({} if "CONSOLE_REFUSAL_S" in self.env else {"KEY_REFUSAL_S": "0"}),
            **self.env,
        }
        self.process = start_manage("waker", env, self.log_path, before_exec=self.before_exec)
        if wait_healthy(self.process, self.base_url + "/api/v1/health", timeout, self.log):
            return self
        self.stop()
        raise RuntimeError(f"the waker did not answer in {timeout} s:\n{self.log()}")

    def client(self, timeout: float = 60) -> httpx.Client:
        """The waker's own API, with its key."""
        return httpx.Client(
            base_url=self.base_url + "/api/v1", headers={"Authorization": f"Bearer {self.key}"}, timeout=timeout
        )

    def through(self, name: str, timeout: float = 60, key: str | None = None) -> httpx.Client:
        """A client of the persona's worker API through the waker (`/w/{name}/api/v1`)."""
        return httpx.Client(
            base_url=f"{self.base_url}/w/{name}/api/v1",
            headers={"Authorization": f"Bearer {key or self.worker_key(name)}"},
            timeout=timeout,
        )

    def direct(self, name: str, timeout: float = 60) -> httpx.Client:
        """A client of the persona's worker on its own port, past the waker."""
        return httpx.Client(
            base_url=f"http://127.0.0.1:{self.personas[name]['port']}/api/v1",
            headers={"Authorization": f"Bearer {self.worker_key(name)}"},
            timeout=timeout,
        )

    def persona(self, name: str) -> dict[str, Any]:
        with self.client() as api:
            response = api.get(f"/personas/{name}")
        assert response.status_code == 200, response.text
        return response.json()

    def wait_for(self, name: str, condition, timeout: float = 30, what: str = "") -> dict[str, Any]:
        """Poll the persona until `condition(body)` holds; answers that body."""

        def met() -> dict[str, Any] | None:
            body = self.persona(name)
            return body if condition(body) else None

        return wait_until(
            met,
            timeout=timeout,
            interval=0.05,
            what=what or f"persona {name} to meet the condition",
        )

    def start_persona(self, name: str) -> dict[str, Any]:
        with self.client() as api:
            response = api.post(f"/personas/{name}/start")
        assert response.status_code == 200, response.text
        return response.json()

    def workers(self, name: str | None = None) -> list[int]:
        """Live worker processes serving this waker's stores (or one persona's)."""
        stores = [self.store(name)] if name else [self.store(each) for each in self.personas]
        return _worker_processes(stores)

    def stop(self, timeout: float = 60) -> list[int]:
        """SIGTERM and wait: the waker stops its workers first. Answers the
        workers still alive after it exited (none, unless a bug), killed here so
        they do not outlive the test."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        left = self.workers()
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        return left

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-20000:]
        except OSError:
            return ""


def distinct_free_ports(count: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        if (port := free_port()) not in ports:
            ports.append(port)
    return ports


def _worker_processes(stores: list[Path]) -> list[int]:
    """The live worker serving each of `stores`: the process that holds its
    lock (core/store_lock.py) as /proc/locks tells, without touching the lock,
    however the worker was started (forked from the waker's template, whose
    command line and environment it shows, or not)."""
    wanted = {}
    for store in stores:
        try:
            found = os.stat(store / "worker.lock")
        except OSError:
            continue
        wanted[f"{os.major(found.st_dev):02x}:{os.minor(found.st_dev):02x}:{found.st_ino}"] = store
    holders = []
    with open("/proc/locks") as locks:
        for line in locks:
            fields = line.split()
            if len(fields) > 5 and fields[1] == "FLOCK" and fields[3] == "WRITE" and fields[5] in wanted:
                pid = int(fields[4])
                if not _zombie(pid):
                    holders.append(pid)
    return holders


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True
