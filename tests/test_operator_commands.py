"""The operators' commands, run as processes beside (or after) a real worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

from harness.receiver import Receiver
from harness.worker import ROOT, WorkerProcess, wait_until
from tests.test_jobs import ended, started


def manage(worker: WorkerProcess, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "PENELOPE_STORE": str(worker.store), "PENELOPE_KEY": worker.key, **worker.env}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=check
    )


def test_deliver_webhooks_beside_a_live_worker_never_sends_an_attempt_twice(make_worker):
    with Receiver() as receiver:
        worker = make_worker(env={"WEBHOOK_ATTEMPTS_S": "0,0.3,0.6,0.9", "WEBHOOK_TIMEOUT_S": "0.5"})
        env = {**os.environ, "PENELOPE_STORE": str(worker.store), "PENELOPE_KEY": worker.key, **worker.env}
        second = subprocess.Popen(
            [sys.executable, "manage.py", "deliver_webhooks", "--loop"], cwd=ROOT, env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            with worker.client() as api:
                jobs = []
                for n in range(6):
                    jobs.append(started(api, "web/state", callback=receiver.url + f"/500/race{n}"))
                    wait_until(lambda: not api.get("/main").json()["busy"])
                for n in range(6):
                    wait_until(lambda n=n: len(receiver.received(f"/500/race{n}")) >= 4, timeout=90, what="4 attempts")
                for job_id in jobs:
                    wait_until(lambda job_id=job_id: api.get(f"/jobs/{job_id}").status_code == 404, what="give up")
        finally:
            second.terminate()
            second.wait(30)
        for n in range(6):
            slots = Counter(hit.headers["X-Penelope-Attempt"] for hit in receiver.received(f"/500/race{n}"))
            assert slots == {"1": 1, "2": 1, "3": 1, "4": 1}, slots


def test_recover_jobs_is_refused_beside_a_worker_and_recovers_after_a_crash(make_worker):
    worker = make_worker()
    with worker.client() as api:
        job_id = started(api, "testing/sleep", {"seconds": 60}, ttl=60)
    refused = manage(worker, "recover_jobs", check=False)
    assert refused.returncode != 0 and "A worker is serving this store" in refused.stderr
    worker.kill()
    assert manage(worker, "recover_jobs").stdout.strip() == "1 jobs interrupted, 0 past their deadline deleted"
    shown = json.loads(manage(worker, "jobs", job_id, "--full").stdout)
    assert shown["state"] == "interrupted" and shown["status"] == 503
    listing = manage(worker, "jobs").stdout
    assert job_id in listing and "interrupted" in listing


def test_sweep_deletes_expired_jobs(make_worker):
    worker = make_worker(env={"SWEEP_S": "3600"})
    with worker.client() as api:
        job_id = started(api, "web/state", ttl=0.2)
        ended(api, job_id)
        wait_until(lambda: api.get(f"/jobs/{job_id}").status_code == 404, what="the result to expire")
    assert "swept 1 jobs" in manage(worker, "sweep").stdout
    assert job_id not in manage(worker, "jobs").stdout


def test_deliver_webhooks_refuses_to_sign_without_a_key(tmp_path):
    env = {**os.environ, "PENELOPE_STORE": str(tmp_path / "store"), "PENELOPE_KEY": ""}
    done = subprocess.run(
        [sys.executable, "manage.py", "deliver_webhooks"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0 and "No key to sign with" in done.stderr
