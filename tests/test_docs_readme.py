"""The README's blocks run, in order, against a real worker started as the
README starts it, and answer what the README shows (tests/support/docs.py)."""

from __future__ import annotations

from harness.worker import ROOT, free_port
from tests.support.docs import documented_worker, run_document


def test_every_block_of_the_readme_runs(tmp_path):
    store = tmp_path / "store"
    with documented_worker(store) as worker:
        receiver = free_port()
        addresses = {
            "127.0.0.1:5000": f"127.0.0.1:{worker.port}",
            "127.0.0.1:8099": f"127.0.0.1:{receiver}",
            "webhook_receiver.py 8099": f"webhook_receiver.py {receiver}",
            "/tmp/received": str(tmp_path / "received"),
        }
        done = run_document(ROOT / "README.md", tmp_path, store=store, env={}, addresses=addresses)
    assert (len(done.ran), len(done.not_run), done.compared) == (8, 6, 6)
