"""The waker's side of the worker template (worker/template.py): a process
that has imported what every worker imports and forks a worker for each
start, so a wake skips Python's imports (docs/BENCHMARKS.md, issue 46).

A forked worker is held as a `Forked`, which answers what the waker asks of
an `asyncio.subprocess.Process` (pid, returncode, wait, send_signal, kill).
Its signals go through a pidfd, so they never reach a process that took its
pid after it ended. When the template is off (WAKER_FORK_WORKERS=0), not
started, or gone, or a persona sets what a process reads only as it starts
(`START_ONLY`), the worker is started with `exec` as before
(waker/process.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from pathlib import Path

log = logging.getLogger("penelope.waker")

# Read by Python or the C library only as a process starts: a worker whose
# value differs from the template's cannot be forked from it.
START_ONLY = ("PYTHON", "LD_", "MALLOC_", "GLIBC_", "LC_", "LANG")
# How long the template may take to import, and to answer a fork; past
# either, the worker is started on its own.
READY_TIMEOUT_S = 30.0
FORK_TIMEOUT_S = 10.0


def forkable(env: dict[str, str], template_env: dict[str, str]) -> bool:
    """Whether a worker with `env` can be forked from a template started with
    `template_env`: they agree on every start-only variable."""
    names = {name for name in (*env, *template_env) if name.startswith(START_ONLY)}
    return all(env.get(name) == template_env.get(name) for name in names)


class Forked:
    """A worker forked by the template, as the waker holds a process."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._ended = asyncio.Event()
        try:
            self._pidfd: int | None = os.pidfd_open(pid)
        except ProcessLookupError:  # ended already; the template says how
            self._pidfd = None

    def ended(self, returncode: int) -> None:
        if self.returncode is None:
            self.returncode = returncode
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        self._ended.set()

    async def wait(self) -> int:
        await self._ended.wait()
        return self.returncode  # type: ignore[return-value]

    def send_signal(self, signum: int) -> None:
        if self.returncode is not None:
            return
        if self._pidfd is None:
            raise ProcessLookupError(self.pid)
        signal.pidfd_send_signal(self._pidfd, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def orphaned(self) -> None:
        """The template ended: the kernel sent this worker SIGTERM. Its end is
        seen on its pidfd; its code is no longer anyone's to read."""
        if self._pidfd is None:
            self.ended(-signal.SIGTERM)
            return
        loop = asyncio.get_running_loop()
        pidfd = self._pidfd

        def gone() -> None:
            loop.remove_reader(pidfd)
            self.ended(-signal.SIGTERM)

        loop.add_reader(pidfd, gone)


class WorkerTemplate:
    """The template process, started by `start()` and asked for workers by
    `fork()`, which answers None when a worker must be started with `exec`."""

    def __init__(self, env: dict[str, str], cwd: Path, preexec_fn=None) -> None:
        # No settings module: the template configures no Django (each worker does, with its own).
        self.env = {**{name: value for name, value in env.items() if name != "DJANGO_SETTINGS_MODULE"}, "PYTHONUNBUFFERED": "1"}
        self.cwd = cwd
        self._preexec_fn = preexec_fn
        self._process: asyncio.subprocess.Process | None = None
        self._ready: asyncio.Future[bool] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._asked: dict[int, asyncio.Future[Forked]] = {}
        self._forked: dict[int, Forked] = {}
        self._next_id = 0
        # It ended before it was ready (a kernel without pidfds, an import
        # that fails): not started again; every worker is started on its own.
        self.given_up = False

    async def start(self) -> None:
        """Start the template (it imports in the background)."""
        if self.given_up or (self._reader is not None and not self._reader.done()):
            return  # running, or ending (its end is seen first), or never again
        self._ready = asyncio.get_running_loop().create_future()
        try:
            self._process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "worker.template",
                cwd=self.cwd, env=self.env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                # Its own session, as each worker has (waker/process.py).
                start_new_session=True, preexec_fn=self._preexec_fn,
            )
        except OSError as error:
            log.warning("the worker template did not start (%s); workers are started one by one", error)
            self._ready.set_result(False)
            return
        self._reader = asyncio.ensure_future(self._read(self._process))

    async def fork(self, argv: list[str], env: dict[str, str], log_path: Path) -> Forked | None:
        """A worker forked from the template, or None: start it with `exec`."""
        if self.given_up or not forkable(env, self.env):
            return None
        await self.start()
        try:
            ready = await asyncio.wait_for(asyncio.shield(self._ready), READY_TIMEOUT_S)
        except TimeoutError:
            ready = False
        process = self._process
        if not ready or process is None or process.stdin is None or process.returncode is not None:
            return None
        self._next_id += 1
        asked = self._asked[self._next_id] = asyncio.get_running_loop().create_future()
        start = {"id": self._next_id, "argv": argv, "env": env, "cwd": str(self.cwd), "log": str(log_path)}
        try:
            process.stdin.write(json.dumps(start).encode() + b"\n")
            await process.stdin.drain()
            return await asyncio.wait_for(asked, FORK_TIMEOUT_S)
        except (ConnectionError, RuntimeError, TimeoutError) as error:
            log.warning("the worker template could not fork (%s); starting the worker on its own", error or "no answer")
            if isinstance(error, TimeoutError):
                # Wedged: ended, so a worker it forks late ends with it.
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
            return None
        finally:
            self._asked.pop(start["id"], None)

    async def _read(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        try:
            while line := await process.stdout.readline():
                try:
                    message = json.loads(line)
                except ValueError:
                    log.warning("the worker template wrote %r", line[:200])
                    continue
                self._heard(message)
        finally:
            await process.wait()
            self._gone(process.returncode)

    def _heard(self, message: dict) -> None:
        if message.get("ready") and self._ready is not None and not self._ready.done():
            self._ready.set_result(True)
        elif "exited" in message:
            forked = self._forked.pop(message["exited"], None)
            if forked is not None:
                forked.ended(message["returncode"])
        elif (asked := self._asked.get(message.get("id"))) is not None and not asked.done():
            if "pid" in message:
                # Held at once: its end may be the very next line.
                asked.set_result(self._forked.setdefault(message["pid"], Forked(message["pid"])))
            else:
                asked.set_exception(RuntimeError(message.get("error", "no pid")))

    def _gone(self, returncode: int | None) -> None:
        """The template ended: its workers end with it, later starts exec."""
        if self._ready is not None and not self._ready.done():
            self._ready.set_result(False)
            self.given_up = True
            log.warning("the worker template exited with code %s before it was ready; workers are started on their own",
                        returncode)
        for asked in self._asked.values():
            if not asked.done():
                asked.set_exception(RuntimeError(f"the template exited with code {returncode}"))
        for forked in self._forked.values():
            forked.orphaned()
        self._forked.clear()
        if returncode not in (0, -signal.SIGTERM):
            log.warning("the worker template exited with code %s; it is started again at the next wake", returncode)

    async def close(self) -> None:
        """After the workers stopped: the template's stdin closes and it exits."""
        process = self._process
        if process is None or process.returncode is not None:
            return
        if process.stdin is not None:
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 5)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)
