"""The worker template: a process that has imported what every worker
imports, and forks a worker (`manage.py serve`) for each start the waker asks
for, so a wake does not pay Python's imports again (docs/BENCHMARKS.md,
issue 46). `python -m worker.template`, started by the waker
(waker/template.py); it speaks JSON lines on its stdin and stdout:

- in: `{"id": 1, "argv": ["manage.py", "serve"], "env": {...}, "cwd": "...", "log": "..."}`;
- out: `{"ready": true}` once it has imported, then `{"id": 1, "pid": 4242}`
  (or `{"id": 1, "error": "..."}`) for each start, and `{"exited": 4242,
  "returncode": 0}` when a worker it forked ends (as `Popen.returncode`:
  minus the signal that ended it).

It imports only what needs no settings (the worker's settings are read from
each persona's environment when its worker configures Django) and makes no
thread and no event loop, so a fork of it is a clean start. The workers it
forks are its children: it reaps them, each through a pidfd. It ends when
the waker closes its stdin or dies (the kernel's parent-death signal, set by
the waker), and its workers get SIGTERM when it ends, as they would from the
waker.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import selectors
import sys
import time

from core.parent_death import end_with

# What a worker imports that imports without Django's settings: about 1,200
# of the 1,370 modules a started worker holds, 0.5 s of its 0.8 s of
# imports. Not daphne.server or Twisted's reactor: importing them makes an
# event loop, which a fork must not share.
PRELOAD = (
    "django.db.models", "django.contrib.admin", "django.core.management", "django.db.backends.sqlite3.base",
    "django.db.migrations.executor", "django.template.defaulttags", "rest_framework.serializers",
    "rest_framework.fields", "playwright.async_api", "twisted.web.http", "twisted.internet.endpoints",
    "twisted.internet.ssl", "autobahn.twisted.websocket", "daphne.http_protocol", "daphne.ws_protocol", "httpx",
    "cryptography.fernet", "cryptography.x509", "prometheus_client", "channels.generic.websocket", "pyotp", "cronsim",
    "standardwebhooks", "sqlite3", "statistics",
)


def preload() -> None:
    for name in PRELOAD:
        importlib.import_module(name)


def say(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


class Template:
    """The loop: a start read from stdin is forked; a worker's end, seen on
    its pidfd, is reaped and said."""

    def __init__(self) -> None:
        self.selector = selectors.DefaultSelector()
        self.children: dict[int, int] = {}  # pidfd -> pid
        self.selector.register(sys.stdin.fileno(), selectors.EVENT_READ)
        self.pending = b""

    def run(self) -> dict | None:
        """Serve until stdin closes (None); in a forked worker, its start."""
        while True:
            for key, _ in self.selector.select():
                if key.fd == sys.stdin.fileno():
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        return None
                    self.pending += chunk
                    while b"\n" in self.pending:
                        line, self.pending = self.pending.split(b"\n", 1)
                        start = json.loads(line)
                        if self.fork(start):
                            return start
                else:
                    self.reap(key.fd)

    def fork(self, start: dict) -> bool:
        """True in the worker just forked; False in the template."""
        try:
            pid = os.fork()
        except OSError as error:
            say({"id": start["id"], "error": f"fork failed: {error}"})
            return False
        if pid == 0:
            self.leave()
            return True
        pidfd = os.pidfd_open(pid)
        self.children[pidfd] = pid
        self.selector.register(pidfd, selectors.EVENT_READ)
        say({"id": start["id"], "pid": pid})
        return False

    def reap(self, pidfd: int) -> None:
        pid = self.children.pop(pidfd)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        say({"exited": pid, "returncode": os.waitstatus_to_exitcode(status)})

    def leave(self) -> None:
        """In the forked worker: nothing of the template's stays open."""
        self.selector.close()
        for pidfd in self.children:
            os.close(pidfd)


def become(start: dict, template_pid: int) -> None:
    """In the forked worker: its own session, its end bound to the template's,
    its output to its log, and its persona's environment, as the waker's
    `exec` would give it (waker/process.py)."""
    os.setsid()
    end_with(template_pid)
    log = os.open(start["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(devnull)
    os.close(log)
    os.chdir(start["cwd"])
    os.environ.clear()
    os.environ.update(start["env"])
    time.tzset()
    sys.argv = list(start["argv"])


def main() -> None:
    # As `manage.py serve` does for its own imports (docs/BENCHMARKS.md): the
    # collector off while importing, what was imported frozen, so no pass of a
    # worker's collector scans it (nor writes to the pages it shares).
    gc.disable()
    template_pid = os.getpid()
    # Its workers are watched through pidfds (Linux 5.3): without them it
    # ends here, and the waker starts every worker on its own.
    os.close(os.pidfd_open(template_pid))
    preload()
    gc.freeze()
    say({"ready": True})
    start = Template().run()
    if start is None:
        return
    become(start, template_pid)
    import manage  # noqa: PLC0415  the worker's own entry point, run in the fork

    manage.main()


if __name__ == "__main__":
    main()
