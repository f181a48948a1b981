"""docs/guides/CONSOLE.md's blocks run, in order, as the one session the
guide is: its personas file, a real waker in the background (bob's worker
always up, alice's never started), a failed job of bob's, the console's
sign-in and fleet page read with curl, the fleet's job search with curl and
the Python client, and the waker's stop. Alice is never woken by any of it."""

from __future__ import annotations

from harness.worker import ROOT, free_port
from tests.support.docs import run_document
from tests.test_docs_waker_api import stop_what_the_document_left

DOC = ROOT / "docs" / "guides" / "CONSOLE.md"


def test_every_block_of_the_console_guide_runs(tmp_path, monkeypatch):
    monkeypatch.delenv("WAKER_KEY", raising=False)  # the guide's waker generates its own
    monkeypatch.syspath_prepend(str(ROOT / "client"))  # in place of the guide's `pip install ./client`
    place = tmp_path / "home" / "checkout"  # the run's folder
    waker, alice, bob = free_port(), free_port(), free_port()
    addresses = {
        '"port": 5001': f'"port": {alice}',
        '"port": 5002': f'"port": {bob}',
    }
    env = {"WAKER_PORT": str(waker), "WAKER_POLL_S": "0.2", "DEMO_PAUSE_MS": "50", "CONSOLE_REFUSAL_S": "0.2"}
    (tmp_path / "store").mkdir()
    try:
        done = run_document(DOC, tmp_path, store=tmp_path / "store", env=env, addresses=addresses)
    finally:
        left = stop_what_the_document_left(place)
    assert left == [], f"processes outlived the document's waker: {left}"
    assert not (place / "stores" / "alice" / "penelope.db").exists(), "the console woke alice"
    # not run: the nginx server block (tests/test_console_tls.py runs it)
    assert (len(done.ran), len(done.not_run), done.compared) == (8, 1, 6)
