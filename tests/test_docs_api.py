"""The API reference's blocks run, in order, as written, against one real
worker on a port that is not 5000, with only `PENELOPE_PORT` set to say so,
and answer what the reference shows (tests/support/docs.py)."""

from __future__ import annotations

import secrets

from harness.worker import ROOT, free_port
from tests.support.docs import documented_worker, run_document


def test_every_block_of_the_api_reference_runs(tmp_path, monkeypatch):
    store = tmp_path / "store"
    read_key = secrets.token_urlsafe(32)  # the reference's "Keys with roles" shows one refused
    with documented_worker(store, PENELOPE_READ_KEYS=read_key) as worker:
        monkeypatch.setenv("PENELOPE_KEY", worker.key)  # the events example, a Python block, reads it
        addresses = {
            "127.0.0.1:8099": f"127.0.0.1:{free_port()}",  # a webhook job's receiver, absent: its first attempt waits
        }
        env = {"PENELOPE_PORT": str(worker.port), "PENELOPE_KEY": worker.key, "PENELOPE_READ_KEY": read_key}
        done = run_document(ROOT / "docs/reference/API.md", tmp_path, store=store, env=env, addresses=addresses)
    assert (len(done.ran), len(done.not_run), done.compared) == (79, 13, 73)
