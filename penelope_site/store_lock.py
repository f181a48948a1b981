"""One worker per store: `serve` holds an exclusive lock on `store/worker.lock`
for its lifetime. The kernel drops it when the process dies, however it dies."""

from __future__ import annotations

import fcntl
import os

from django.conf import settings


class StoreInUse(RuntimeError):
    pass


def lock_path():
    return settings.STORE_DIR / "worker.lock"


def acquire() -> int:
    """Take the store's lock for this process, or StoreInUse naming the holder."""
    fd = os.open(lock_path(), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise StoreInUse(f"Another worker (pid {holder}) is serving the store {settings.STORE_DIR}.") from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return fd  # kept open (and locked) until the process exits


def held_by_a_worker() -> bool:
    try:
        os.close(acquire())
    except StoreInUse:
        return True
    return False
