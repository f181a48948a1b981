"""WAKER_API.md's blocks run, in order, as the one session the document is:
it writes its personas file, starts a real waker in the background (which
starts the personas' real workers), calls each route and stops the waker.
JSON answers are compared by shape, shown text (the waker's output, its
errors, its metrics) line by line, with `…` where a value varies
(tests/support/shown.py)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from harness.worker import ROOT, free_port
from tests.support.docs import run_document

DOC = ROOT / "docs" / "reference" / "WAKER_API.md"


def processes_in(folder: Path) -> dict[int, bytes]:
    """pid -> command line of every live process working in `folder`."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if Path(os.readlink(f"/proc/{entry}/cwd")) != folder.resolve():
                continue
            with open(f"/proc/{entry}/stat") as stat:
                if stat.read().rpartition(")")[2].split()[0] == "Z":
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                found[int(entry)] = cmdline.read()
        except OSError:
            continue
    return found


def stop_what_the_document_left(folder: Path, timeout: float = 60) -> list[bytes]:
    """The document stops its waker itself; when it failed before that, stop
    it here (SIGTERM: it stops its workers first). Answers the processes that
    were still there after the waker (none, unless a bug), killed."""
    for pid, cmdline in processes_in(folder).items():
        if b"manage.py\0waker" in cmdline:
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(b"manage.py\0waker" in cmdline for cmdline in processes_in(folder).values()):
        assert time.monotonic() < deadline, "the waker did not stop"
        time.sleep(0.2)
    left = processes_in(folder)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return list(left.values())


def test_every_block_of_the_waker_api_runs(tmp_path, monkeypatch):
    monkeypatch.delenv("WAKER_KEY", raising=False)  # the document's waker generates its own
    place = tmp_path / "home" / "checkout"  # the run's folder, the document's /srv/penelope
    waker, alice, bob = free_port(), free_port(), free_port()
    addresses = {
        '"port": 5001': f'"port": {alice}',
        '"port": 5002': f'"port": {bob}',
        "the port 5001": f"the port {alice}",
        "/srv/penelope": str(place),
    }
    # The policy read every 0.2 s rather than 2 s; the demo family's pauses short.
    env = {"WAKER_PORT": str(waker), "WAKER_POLL_S": "0.2", "DEMO_PAUSE_MS": "50", "WAKER_STOP_GRACE_S": "10"}
    (tmp_path / "store").mkdir()
    try:
        done = run_document(DOC, tmp_path, store=tmp_path / "store", env=env, addresses=addresses)
    finally:
        left = stop_what_the_document_left(place)
    assert left == [], f"processes outlived the document's waker: {left}"
    assert (len(done.ran), len(done.not_run), done.compared) == (13, 0, 12)
