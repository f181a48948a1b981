"""The walk of docs/design/JOB_CORE.md, traced on a real worker: a job on
`any` that finds every page busy (`X-Queue-Timeout`), fails once with a 502
that may pass (`X-Retry: 2`) and is delivered by webhook. Every Python call
of the worker is watched (tests/support/walk_trace/) from just before the
request until the delivered job's row is gone; the modules that ran code
must be exactly the ones the walk's table names, and as many as its count
says. A change that takes the path through another module, or out of one,
fails here until the page says so."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
from pathlib import Path

from harness.receiver import Receiver
from harness.worker import WorkerProcess, wait_until

ROOT = Path(__file__).resolve().parents[1]
JOB_CORE = ROOT / "docs" / "design" / "JOB_CORE.md"
HOOK = ROOT / "tests" / "support" / "walk_trace"
WALK_HEADING = "## A queued, retried job on `any`, walked"
# What the table calls "the plugin's module": here, the test family's.
PLUGIN_MODULE = "tests/support/testing_plugins.py"
# The worker's periodic loops (worker/setup.py), which may fire while the
# walk runs: their own modules are not the walk's.
PERIODIC = {"core/loops.py", "browser/pool.py", "browser/purge.py", "worker/setup.py"}
QUIET = {
    "SWEEP_S": "3600", "REQUEST_LOG_FLUSH_S": "3600", "PURGE_S": "3600", "POOL_PAGE_IDLE_S": "3600",
    "SCHEDULE_CHECK_S": "3600",
}


def walk_table() -> tuple[set[str], int]:
    """The modules the walk's table names, and the count its text gives."""
    text = JOB_CORE.read_text()
    section = text[text.index(WALK_HEADING):]
    named: set[str] = set()
    for row in re.findall(r"^\| \d+ \|(.*)$", section, flags=re.MULTILINE):
        cell = row.split(" | ")[1]  # what happens | modules first reached | task | hop
        named.update(re.findall(r"`([a-z_/]+\.py)`", cell))
        if "the plugin's module" in cell:
            named.add(PLUGIN_MODULE)
    count = int(re.search(r"The counts: \*\*(\d+) modules", section).group(1))
    return named, count


def row_gone(store: Path, job_id: str) -> bool:
    with sqlite3.connect(f"file:{store / 'penelope.db'}?mode=ro", uri=True) as db:
        return db.execute("SELECT count(*) FROM jobs_job WHERE id = ?", (job_id,)).fetchone()[0] == 0


def test_the_walk_runs_code_in_exactly_the_modules_its_table_names(make_worker, tmp_path):
    named, count = walk_table()
    assert len(named) == count, f"the table names {len(named)} modules, the text says {count}"
    trace = tmp_path / "trace"
    trace.mkdir()
    worker: WorkerProcess = make_worker(env={
        **QUIET, "MAX_PAGES": "2", "WEBHOOK_ATTEMPTS_S": "0", "WEBHOOK_TIMEOUT_S": "2",
        "PYTHONPATH": str(HOOK), "WALK_TRACE_DIR": str(trace),
    })
    with Receiver() as receiver, worker.client() as api:
        # Both pages busy (MAX_PAGES=2: main and one pool page): the first
        # lets its page go when the test opens its gate, the second holds its own.
        gate = tmp_path / "gate"
        holders = [
            api.post("/any/plugin/testing/gate", json={"path": str(gate)}, headers={"X-Result-Ttl": "60"}),
            api.post("/any/plugin/testing/sleep", json={"seconds": 600}, headers={"X-Result-Ttl": "60"}),
        ]
        assert [holder.status_code for holder in holders] == [202, 202], [holder.text for holder in holders]
        wait_until(lambda: all(api.get(f"/jobs/{h.json()['job_id']}").json()["state"] == "running" for h in holders),
                   what="both pages busy")
        os.kill(worker.process.pid, signal.SIGUSR1)
        wait_until(lambda: (trace / "armed").exists(), what="the trace to start")
        started = api.post(
            "/any/plugin/testing/flaky", json={"path": str(tmp_path / "attempts"), "failures": 1, "status": 502},
            headers={"X-Callback-Url": receiver.url + "/200/walk", "X-Queue-Timeout": "30", "X-Retry": "2",
                     "X-Retry-Backoff": "0.2"},
        )
        assert started.status_code == 202 and started.json()["state"] == "queued", started.text
        job_id = started.json()["job_id"]
        gate.touch()  # another call lets its page go (the walk's step 10)
        # No request of this test's own until the trace is written: a poll would run code of its own.
        wait_until(lambda: receiver.received("/200/walk"), timeout=30, what="the webhook")
        wait_until(lambda: row_gone(worker.store, job_id), timeout=30, what="the delivered job's row to go")
        os.kill(worker.process.pid, signal.SIGUSR2)
        wait_until(lambda: (trace / "seen").exists(), what="the trace")
    delivered = json.loads(receiver.received("/200/walk")[0].body)
    assert (delivered["status"], delivered["result"]["attempt"]) == (200, 2), delivered
    root = f"{ROOT}/"
    ran = {
        path.removeprefix(root) for path in (trace / "seen").read_text().splitlines()
        if path.startswith(root) and "/.venv/" not in path
    }
    assert named - ran == set(), "the table names modules the walk never ran"
    assert ran - named - PERIODIC == set(), "the walk ran code in modules the table does not name"
