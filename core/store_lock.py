"""One process at a time runs the store: `serve` holds an exclusive lock on
`store/worker.lock` for its lifetime, and `recover_jobs` for as long as it
runs. The kernel drops the lock when the process dies, however it dies."""

from __future__ import annotations

import fcntl
import os

from django.conf import settings


class StoreInUse(RuntimeError):
    def __init__(self, pid: str, command: str):
        self.pid, self.command = pid, command
        super().__init__(self.sentence())

    def sentence(self) -> str:
        if self.command == "serve":
            return f"A worker (pid {self.pid}) is serving the store {settings.STORE_DIR}."
        return f"The store {settings.STORE_DIR} is in use by {self.command} (pid {self.pid}); try again when it is done."


def lock_path():
    return settings.STORE_DIR / "worker.lock"


def acquire(command: str = "serve") -> int:
    """Take the store's lock for this process (`command` names it to whoever
    is refused), or StoreInUse naming the holder."""
    fd = os.open(lock_path(), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 64).decode(errors="replace").split()
        os.close(fd)
        pid = holder[0] if holder else "unknown"
        raise StoreInUse(pid, holder[1] if len(holder) > 1 else "serve") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()} {command}".encode())
    return fd  # kept open (and locked) until released or the process exits


def release(fd: int) -> None:
    os.close(fd)


def is_held(path) -> bool:
    """Whether some process holds the flock on `path` (a missing file: no).
    Trying takes the lock for a moment when nobody holds it."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
