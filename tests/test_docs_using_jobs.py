"""USING_JOBS.md's blocks run, in order, against a real worker started as the
guide assumes it, a real waker for its sleepy persona, and the guide's own
webhook receiver (tests/support/docs.py)."""

from __future__ import annotations

import os
import signal

from harness.waker import WakerProcess
from harness.worker import ROOT, free_port
from tests.support.docs import documented_worker, read_blocks, run_document

GUIDE = ROOT / "docs" / "guides" / "USING_JOBS.md"
RECEIVER = ROOT / "docs" / "guides" / "webhook_receiver.py"
# Scaled down from minutes to seconds: a delivery that met a receiver still
# starting is tried again a second later, not a minute.
WEBHOOK_ATTEMPTS_S = "0,1,5,10"


def stop_receivers(port: int) -> None:
    """A receiver a failed block left in the background (one of ours: its port is this test's)."""
    wanted = f"webhook_receiver.py\0{port}\0".encode()
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmd:
                if wanted in cmd.read():
                    os.kill(int(entry), signal.SIGTERM)
        except (OSError, ValueError):
            continue


def test_every_block_of_using_jobs_runs(tmp_path, monkeypatch):
    store = tmp_path / "store"
    receiver = free_port()
    waker = WakerProcess(
        tmp_path / "waker",
        [{"name": "alice", "mode": "sleepy", "idle_timeout_s": 1.5}],
        env={"WAKER_POLL_S": "0.2", "DEMO_PAUSE_MS": "50"},
    )
    with documented_worker(store, WEBHOOK_ATTEMPTS_S=WEBHOOK_ATTEMPTS_S) as worker:
        waker.start()
        try:
            addresses = {
                    "127.0.0.1:5000": f"127.0.0.1:{worker.port}",
                    "127.0.0.1:5001": f"127.0.0.1:{waker.personas['alice']['port']}",
                    "127.0.0.1:5100": f"127.0.0.1:{waker.port}",
                    "127.0.0.1:8099": f"127.0.0.1:{receiver}",
                    "webhook_receiver.py 8099": f"webhook_receiver.py {receiver}",
                    "/tmp/received": str(tmp_path / "received"),
                    "/tmp/trace.zip": str(tmp_path / "trace.zip"),
                    "/srv/penelope/alice": str(store),
                    "stores/alice": str(waker.store("alice")),
            }
            # The polling loop in Python reads the key from the environment.
            monkeypatch.setenv("PENELOPE_KEY", worker.key)
            done = run_document(GUIDE, tmp_path, store=store, env={"WAKER_KEY": waker.key}, addresses=addresses)
        finally:
            stop_receivers(receiver)
            waker.stop()
    assert (len(done.ran), len(done.not_run), done.compared) == (32, 3, 20)
    assert (tmp_path / "trace.zip").stat().st_size > 0
    # The guide's receiver is the one saved beside it, word for word.
    saved = [block for block in read_blocks(GUIDE) if block.note == "webhook_receiver.py"]
    assert [block.code + "\n" for block in saved] == [RECEIVER.read_text()]
