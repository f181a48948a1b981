"""Start a real worker (`manage.py serve`) in a subprocess on loopback.

Used by the tests and the benchmarks alike.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
TEST_KEY = "test-key-0123456789abcdef"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(condition: Callable[[], object], timeout: float = 30, interval: float = 0.02, what: str = "condition"):
    """Poll `condition` until it answers something truthy; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def start_manage(
    command: str, env: dict[str, str], log_path: Path, args: tuple[str, ...] = (),
    before_exec: Callable[[], None] | None = None,
) -> subprocess.Popen:
    """`manage.py <command> [args]` in a subprocess, its output appended to
    `log_path`; `before_exec` runs in the child first (joining a cgroup)."""
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [sys.executable, "manage.py", command, *args], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
            preexec_fn=before_exec,
        )


def wait_healthy(process: subprocess.Popen, health_url: str, timeout: float, log: Callable[[], str]) -> bool:
    """Wait until `health_url` answers 200; False after `timeout`, RuntimeError
    (with the log) if the process exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"manage.py exited with {process.returncode}:\n{log()}")
        try:
            if httpx.get(health_url, timeout=1).status_code == 200:
                return True
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    return False


class WorkerProcess:
    def __init__(
        self, store: Path, env: dict[str, str] | None = None, key: str = TEST_KEY, args: tuple[str, ...] = (),
        before_exec: Callable[[], None] | None = None,
    ):
        self.store = Path(store)
        self.before_exec = before_exec  # run in the child before `manage.py` (the benchmark's cgroup)
        self.args = args  # more arguments of `serve` (--port is given through PENELOPE_PORT)
        self.key = key
        self.env = dict(env or {})
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        self.log_path = self.store.parent / f"{self.store.name}-worker.log"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> WorkerProcess:
        self.store.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "PENELOPE_STORE": str(self.store),
            "PENELOPE_HOST": "127.0.0.1",
            "PENELOPE_PORT": str(self.port),
            "PENELOPE_KEY": self.key,
            "PYTHONUNBUFFERED": "1",
            # Wrong keys answered at once (core/wrong_keys.py): tests send
            # them by the hundred; a test of the wait sets its own.
            "KEY_REFUSAL_S": "0",
            **self.env,
        }
        if not self.key:
            env.pop("PENELOPE_KEY")
        self.process = start_manage("serve", env, self.log_path, self.args, self.before_exec)
        if wait_healthy(self.process, self.base_url + "/api/v1/health", timeout, self.log):
            return self
        self.kill()
        raise RuntimeError(f"worker did not become healthy in {timeout} s:\n{self.log()}")

    def client(self, timeout: float = 60, **kwargs) -> httpx.Client:
        return httpx.Client(
            base_url=self.base_url + "/api/v1", headers={"Authorization": f"Bearer {self.key}"}, timeout=timeout, **kwargs
        )

    def async_client(self, timeout: float = 60, **kwargs) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.base_url + "/api/v1", headers={"Authorization": f"Bearer {self.key}"}, timeout=timeout, **kwargs
        )

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM and wait: a clean stop."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def kill(self) -> None:
        """SIGKILL: a crash."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-20000:]
        except OSError:
            return ""


def chromium_processes() -> list[str]:
    """Live (not zombie) Chromium processes on the machine, as 'pid cmdline'."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                state = stat.read().rpartition(")")[2].split()[0]
            with open(f"/proc/{entry}/cmdline", "rb") as cmd:
                cmdline = cmd.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):
            continue
        if state != "Z" and "chrom" in cmdline.split(" ")[0]:
            found.append(f"{entry} {cmdline}")
    return found
