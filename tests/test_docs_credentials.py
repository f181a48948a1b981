"""docs/guides/CREDENTIALS.md's blocks run, in order, as written, after the
README's variables, against a real worker started as the README starts it
on a port that is not 5000 (`PENELOPE_PORT`), with a read key
(tests/support/docs.py):
the demo's carol kept as a credential, signed in by `demo/sign-in` and
`web/fill-credential`, refused on another origin (`localhost` for the
worker's `127.0.0.1`), used by a family of the guide's own through
`run_action`, the request log read with sqlite3, an X-Debug trace and the
store searched, and the key file rotated beside the worker. Then what the
guide says holds: the worker's log says where it made the key, and holds
neither the key nor carol's secrets."""

from __future__ import annotations

import secrets

from demo_site.accounts import SECURE_PASSWORD, SECURE_TOTP_SECRET
from harness.worker import ROOT
from tests.support.docs import documented_worker, run_document

DOC = ROOT / "docs" / "guides" / "CREDENTIALS.md"


def test_every_block_of_the_credentials_guide_runs(tmp_path, monkeypatch):
    store = tmp_path / "store"
    read_key = secrets.token_urlsafe(32)  # the guide's PENELOPE_READ_KEY
    for name in ("PENELOPE_KEY", "CREDENTIALS_KEY", "CREDENTIALS_NEW_KEY"):  # the store's keys, as a reader's
        monkeypatch.delenv(name, raising=False)
    with documented_worker(store, PENELOPE_READ_KEYS=read_key) as worker:
        env = {"PENELOPE_PORT": str(worker.port), "PENELOPE_READ_KEY": read_key}
        done = run_document(DOC, tmp_path, store=store, env=env, after_readme=True)
        key = (store / "credentials_key").read_text().strip()  # the rotated one
    log = worker.log_path.read_text(errors="replace")
    assert log.count(f"made a new credentials key at {store / 'credentials_key'}") == 1
    assert key not in log
    assert SECURE_PASSWORD not in log and SECURE_TOTP_SECRET not in log
    assert (len(done.ran), len(done.not_run), done.compared) == (14, 1, 14)
