"""The suite in two processes (pytest-xdist, `scripts/test.sh`): what keeps
them apart, loaded early by pytest.ini (`-p tests.support.parallel`).

- Each process gets a store of its own. Django's settings are read once, when
  pytest-django sets Django up, which is before any conftest loads; so this
  module, imported while pytest reads its options, points `PENELOPE_STORE` at
  `<store>/gw0`, `<store>/gw1` first. pytest-django already gives each process
  a test database of its own (`test-penelope.db_gw0`); the rest of the store
  (the store lock, the deliverers' claims, the next-wake file, media) is
  shared by whatever runs in the test process, so it is split too. Each
  worker subprocess a test starts has its own store already.
- A test marked `serial` runs alone: it measures time or memory (a bound of
  a few hundred milliseconds, a peak resident size) or loads the machine so
  much that a test beside it would measure the load instead. Every other test
  holds a shared lock between the processes for its setup, call and
  teardown; a `serial` test takes it exclusively, so it starts once the
  other process ends the test it is in, and that process waits until it
  ends. Outside xdist (one process) the lock is not taken at all.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import pytest

# Set by pytest-xdist in each of its processes before their configuration is
# read ("gw0", "gw1"); absent in a plain run and in xdist's controller.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")


def split_store(worker: str) -> None:
    """`PENELOPE_STORE` made this process's own, before the settings read it."""
    base = os.environ.get("PENELOPE_STORE")
    if base:
        own = Path(base) / worker
    else:  # not run by scripts/test.sh: a throwaway store, not ./store shared by both
        own = Path(tempfile.mkdtemp(prefix=f"penelope-test-{worker}-"))
        atexit.register(shutil.rmtree, own, ignore_errors=True)
    own.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.environ["PENELOPE_STORE"] = str(own)


if XDIST_WORKER:
    split_store(XDIST_WORKER)


class SerialLock:
    """A readers-writer lock between the processes of one run, on two files
    with flock(2): every test holds the room shared, a `serial` test holds
    it alone. Whoever asks for the room first passes the turnstile, so a
    `serial` test waiting for the room is not passed by the other process's
    next tests for ever (flock itself promises no order)."""

    def __init__(self, directory: Path):
        directory.mkdir(parents=True, exist_ok=True)
        self.turnstile: IO[str] = open(directory / "serial-turnstile.lock", "a+")  # held for the run
        self.room: IO[str] = open(directory / "serial-room.lock", "a+")

    @contextmanager
    def held(self, *, alone: bool) -> Iterator[None]:
        fcntl.flock(self.turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(self.room, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(self.turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(self.room, fcntl.LOCK_UN)

    def close(self) -> None:
        self.turnstile.close()
        self.room.close()


serial_lock_key = pytest.StashKey[SerialLock]()


def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or workerinput.get("workercount", 1) < 2:
        return
    # xdist gives each process <the run's basetemp>/popen-gwN: the run's own
    # folder, which two runs at once (two engineers) do not share.
    run_directory = Path(config.option.basetemp).parent
    config.stash[serial_lock_key] = lock = SerialLock(run_directory)
    config.add_cleanup(lock.close)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    # Around setup, call and teardown: a module's shared worker, started in
    # its first test's setup and stopped in its last test's teardown, is
    # started and stopped under the lock too.
    lock = item.config.stash.get(serial_lock_key, None)
    if lock is None:
        return (yield)
    with lock.held(alone=item.get_closest_marker("serial") is not None):
        return (yield)
