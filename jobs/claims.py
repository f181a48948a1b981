"""Who holds a webhook attempt: deliverers with an owner id and a life lock.

Every deliverer (the worker's, or a `deliver_webhooks` process) is an
`Owner`: a random id and an exclusive flock on `store/deliverers/<id>.lock`,
held for as long as the deliverer runs. The kernel keeps that lock for the
life of the process and drops it when the process ends, however it ends, so
"the owner is alive" is a question with an exact answer: another deliverer
takes over a claimed attempt only once it can take the owner's lock itself.

Why not a heartbeat written to the database: the claims live in SQLite, and
the failure they must survive is SQLite's write lock held by someone else for
a long while. A heartbeat stuck behind that lock looks exactly like a dead
owner, and the attempt would go out twice. The life lock cannot be starved
that way, costs no writes, and needs no clock. All deliverers of a store run
on the store's host (SQLite needs a local file system), where flock works.
"""

from __future__ import annotations

import fcntl
import logging
import os
import secrets
from collections.abc import Iterable
from pathlib import Path

from django.conf import settings

from core import store_lock

log = logging.getLogger("penelope.webhooks")

OWNER_ID_LENGTH = 24


def owners_dir() -> Path:
    directory = settings.STORE_DIR / "deliverers"
    directory.mkdir(mode=0o700, exist_ok=True)
    return directory


def lock_path(owner_id: str) -> Path:
    return owners_dir() / f"{owner_id}.lock"


class Owner:
    """This process's deliverer identity; alive from `start()` to `stop()`."""

    def __init__(self) -> None:
        self.id = f"{os.getpid()}-{secrets.token_hex(6)}"
        self._fd: int | None = None

    def start(self) -> Owner:
        # Locked under a name nobody looks at, then renamed into place: no
        # other deliverer ever sees this owner's lock file unlocked.
        path = lock_path(self.id)
        fresh = path.with_name(path.name + ".new")
        fd = os.open(fresh, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.rename(fresh, path)
        self._fd = fd
        remove_dead_owners()
        return self

    def stop(self) -> None:
        """Give up every claim at once: another deliverer may take them now."""
        if self._fd is None:
            return
        lock_path(self.id).unlink(missing_ok=True)
        os.close(self._fd)
        self._fd = None


def is_alive(owner_id: str) -> bool:
    """Whether the deliverer `owner_id` still runs: its life lock is held.

    Trying the lock takes it for a moment when the owner is dead; that is
    harmless, as an owner id is never used again."""
    if not owner_id or "/" in owner_id or len(owner_id) > OWNER_ID_LENGTH + 8:
        return False
    return store_lock.is_held(lock_path(owner_id))


def dead(owner_ids: Iterable[str]) -> list[str]:
    return [owner_id for owner_id in owner_ids if not is_alive(owner_id)]


def remove_dead_owners() -> int:
    """Delete the lock files of deliverers that have ended (their claims, if
    any, stay takeable: a missing lock is a dead owner)."""
    removed = 0
    for entry in owners_dir().glob("*.lock"):
        owner_id = entry.name.removesuffix(".lock")
        if not is_alive(owner_id):
            entry.unlink(missing_ok=True)
            removed += 1
    return removed
