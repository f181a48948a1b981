"""The README's blocks run, in order, as written, against a real worker
started as the README starts it on a port that is not 5000, with only
`PENELOPE_PORT` set to say so, and answer what the README shows
(tests/support/docs.py)."""

from __future__ import annotations

from harness.worker import ROOT, free_port
from tests.support.docs import documented_worker, run_document


def test_every_block_of_the_readme_runs(tmp_path):
    store = tmp_path / "store"
    with documented_worker(store) as worker:
        receiver = free_port()
        addresses = {  # the webhook receiver's, which the README starts itself
            "127.0.0.1:8099": f"127.0.0.1:{receiver}",
            "webhook_receiver.py 8099": f"webhook_receiver.py {receiver}",
            "/tmp/received": str(tmp_path / "received"),
        }
        env = {"PENELOPE_PORT": str(worker.port)}
        done = run_document(ROOT / "README.md", tmp_path, store=store, env=env, addresses=addresses)
    assert (len(done.ran), len(done.not_run), done.compared) == (8, 6, 6)
