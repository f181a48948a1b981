"""docs/guides/BRING_YOUR_OWN_SCRIPT.md's blocks run, in order, as written,
after the README's variables, against a real worker started as the README
starts it on a port that is not 5000, with only `PENELOPE_PORT` set to say
so (tests/support/docs.py): its
Playwright script in a Python of its own, its Puppeteer script in Node with
the puppeteer-core that `scripts/setup.sh dev` installs, and its Python
client blocks in this process. Then what the guide says the worker keeps
holds: no token it made is in its log or its request log."""

from __future__ import annotations

import contextlib
import json
import sqlite3

from harness.worker import ROOT
from tests.support.docs import documented_worker, run_document

DOC = ROOT / "docs" / "guides" / "BRING_YOUR_OWN_SCRIPT.md"
PUPPETEER = ROOT / "requirements" / "node" / "node_modules" / "puppeteer-core"


def test_every_block_of_the_bring_your_own_script_guide_runs(tmp_path, monkeypatch):
    assert PUPPETEER.is_dir(), "puppeteer-core is missing: `bash scripts/setup.sh dev` installs it"
    store = tmp_path / "store"
    place = tmp_path / "home" / "checkout"  # the run's folder (run_document)
    monkeypatch.delenv("PENELOPE_KEY", raising=False)  # the blocks read the store's, as a reader's would
    monkeypatch.syspath_prepend(str(ROOT / "client"))  # in place of the guide's `pip install ./client` (not run)
    with documented_worker(store) as worker:
        env = {"PENELOPE_PORT": str(worker.port)}
        done = run_document(DOC, tmp_path, store=store, env=env, after_readme=True)
        token = json.loads((place / "cdp.json").read_text())["url"].removeprefix("/cdp/")
        assert (place / "following.png").read_bytes().startswith(b"\x89PNG")  # the script's screenshot
    assert token and token not in worker.log_path.read_text(errors="replace")
    with contextlib.closing(sqlite3.connect(store / "penelope.db")) as db:
        paths = [path for (path,) in db.execute("SELECT path FROM activity_requestlogentry")]
    assert paths and not [path for path in paths if token in path]
    assert (len(done.ran), len(done.not_run), done.compared) == (12, 0, 11)
