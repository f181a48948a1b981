"""A worker as a process: started as `manage.py serve` with its persona's
environment, bound to die with the waker, and stopped with SIGTERM, then
SIGKILL after a grace period."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from core.parent_death import end_with
from waker.personas import WORKER_HOST, Persona
from waker.template import Forked, WorkerTemplate

log = logging.getLogger("penelope.waker")

PROJECT_DIR = Path(settings.BASE_DIR)
# The worker's own settings that belong to one persona: never passed down
# from the waker's environment, only from the persona.
PERSONAL_ENV = (
    "PENELOPE_KEY", "PENELOPE_STORE", "PENELOPE_HOST", "PENELOPE_PORT", "PENELOPE_PROXY", "CREDENTIALS_KEY", "CREDENTIALS_NEW_KEY",
)
LOG_TAIL_BYTES = 4000


class StartFailed(Exception):
    """A worker that would not start, and one sentence on why."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


@dataclass
class Child:
    """One worker process and what the waker knows of its end."""

    process: asyncio.subprocess.Process | Forked
    stop_requested: bool = False
    exited: bool = False
    watcher: asyncio.Task[None] | None = None


def inherited_env() -> dict[str, str]:
    """The waker's environment without what is the waker's or a persona's own."""
    return {name: value for name, value in os.environ.items() if name not in PERSONAL_ENV and not name.startswith("WAKER_")}


def worker_env(persona: Persona) -> dict[str, str]:
    """The waker's environment without what is the waker's or another
    persona's own, and the persona's settings on top."""
    return {
        **inherited_env(),
        **persona.env,
        "PENELOPE_STORE": str(persona.store),
        "PENELOPE_HOST": WORKER_HOST,
        "PENELOPE_PORT": str(persona.port),
        "PENELOPE_KEY": persona.key,
        # The worker's own stay_awake (activity, metrics) follows the waker's timeout.
        "IDLE_TIMEOUT_S": f"{persona.idle_timeout_s:g}",
        "PYTHONUNBUFFERED": "1",
        # The waker's own settings module is in its environment: not the worker's.
        "DJANGO_SETTINGS_MODULE": settings.WORKER_SETTINGS_MODULE,
    }


def template() -> WorkerTemplate | None:
    """The worker template the waker forks workers from (WAKER_FORK_WORKERS)."""
    if not settings.WAKER_FORK_WORKERS:
        return None
    return WorkerTemplate(inherited_env(), PROJECT_DIR, preexec_fn=_stop_with_the_waker(os.getpid()))


async def spawn(
    persona: Persona, log_path: Path, forks: WorkerTemplate | None = None
) -> asyncio.subprocess.Process | Forked:
    """`manage.py serve` for the persona, its output appended to `log_path`:
    forked from the template `forks` where it can be, else its own process."""
    if port_in_use(persona.port):
        raise StartFailed(f"Port {persona.port} is already in use by another process.")
    persona.store.mkdir(parents=True, exist_ok=True)
    env = worker_env(persona)
    if forks is not None and (forked := await forks.fork(["manage.py", "serve"], env, log_path)) is not None:
        return forked
    # Opening a local file for append does not wait on anything worth a thread.
    with open(log_path, "ab") as worker_log:  # noqa: ASYNC230
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "manage.py",
            "serve",
            cwd=PROJECT_DIR,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=worker_log,
            stderr=asyncio.subprocess.STDOUT,
            # Its own session: a Ctrl-C meant for the waker does not reach
            # the workers, which the waker then stops one by one.
            start_new_session=True,
            preexec_fn=_stop_with_the_waker(os.getpid()),
        )


async def terminate(child: Child, name: str) -> None:
    """SIGTERM, and SIGKILL after WAKER_STOP_GRACE_S."""
    process = child.process
    if process.returncode is not None:
        return
    child.stop_requested = True
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(process.wait(), settings.WAKER_STOP_GRACE_S)
    except TimeoutError:
        log.warning(
            "persona %s: worker %d did not stop within %g s; killing it", name, process.pid, settings.WAKER_STOP_GRACE_S
        )
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()


def _stop_with_the_waker(waker_pid: int):
    """Run in the child before `exec`: the kernel sends it SIGTERM when the
    waker dies, however it dies, so no worker outlives its waker."""
    return functools.partial(end_with, waker_pid)


def port_in_use(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((WORKER_HOST, port)) == 0


def log_tail(path: Path) -> str:
    """The last non-empty line of a worker's log: why it would not start."""
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - LOG_TAIL_BYTES))
            lines = handle.read().decode(errors="replace").splitlines()
    except OSError:
        return ""
    return next((line.strip() for line in reversed(lines) if line.strip()), "")
