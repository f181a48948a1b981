"""Crash rounds: start the real worker with every page running a job (half
webhook, half polling), SIGKILL it at a random moment, start it again, and
account for every job that got a 202.

`python -m tests.support.crash --rounds 20` is the soak; the suite runs one
round (tests/test_crash_rounds.py).
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.receiver import Receiver
from harness.worker import WorkerProcess, chromium_processes, wait_until

PLUGINS = "plugins.web,tests.support.testing_plugins"


@dataclass
class RoundReport:
    jobs: int = 0
    done_before_kill: int = 0
    interrupted: int = 0
    delivered: int = 0
    polled: int = 0
    problems: list[str] = field(default_factory=list)


def crash_round(store: Path, receiver: Receiver, rng: random.Random, *, pages: int = 4, label: str = "r") -> RoundReport:
    """One round on `store` (reused across rounds: the profile must start again)."""
    report = RoundReport()
    env = {"PENELOPE_PLUGINS": PLUGINS, "MAX_PAGES": str(pages), "WEBHOOK_ATTEMPTS_S": "0,0.5,1,1.5", "SWEEP_S": "0.5"}
    worker = WorkerProcess(store, env=env).start()
    jobs: dict[str, str] = {}  # job id -> "poll" or the receiver path
    with worker.client() as api:
        names = ["main"] + [f"page-{n}" for n in range(1, pages)]
        for name in names[1:]:
            api.post("/pages", json={"page_id": name})
        for n, name in enumerate(names):
            params = {"seconds": rng.uniform(0.05, 1.5), "tag": f"{label}-{n}", "media_size": rng.choice([0, 4096])}
            if n % 2 == 0:
                path = f"/200/{label}-{n}"
                headers = {"X-Callback-Url": receiver.url + path}
            else:
                path = "poll"
                headers = {"X-Result-Ttl": "600"}
            accepted = api.post(f"/{name}/plugin/testing/sleep", json=params, headers=headers)
            if accepted.status_code != 202:
                report.problems.append(f"job start answered {accepted.status_code}: {accepted.text}")
                continue
            jobs[accepted.json()["job_id"]] = path
    report.jobs = len(jobs)
    time.sleep(rng.uniform(0, 1.6))  # the random moment of the crash is the point of the test
    worker.kill()
    wait_until(lambda: not [p for p in chromium_processes() if str(store) in p], timeout=30,
               what="the killed worker's Chromium to exit")
    with sqlite3.connect(store / "penelope.db") as db:
        integrity = db.execute("PRAGMA integrity_check").fetchone()[0]
        done_before = db.execute("select count(*) from jobs_job where state = 'done'").fetchone()[0]
    if integrity != "ok":
        report.problems.append(f"integrity_check: {integrity}")

    worker.start()  # the profile starts again
    try:
        with worker.client() as api:
            for job_id, path in jobs.items():
                if path == "poll":
                    body = api.get(f"/jobs/{job_id}").json()
                    if body.get("state") == "done" and body["status"] == 200 and body["result"]["success"]:
                        report.polled += 1
                    elif body.get("state") == "interrupted" and body["status"] == 503:
                        report.polled += 1
                    else:
                        report.problems.append(f"polling job {job_id} not accounted for: {body}")
                else:
                    hits = wait_until(lambda path=path: receiver.received(path), timeout=30, what=f"job {job_id}'s webhook")
                    if all(h.headers["X-Penelope-Job"] == job_id for h in hits):
                        report.delivered += 1
                    else:
                        report.problems.append(f"webhook {path} carried another job's id")
            states = [json.loads(h.body)["state"] for path in jobs.values() if path != "poll" for h in receiver.received(path)]
            report.interrupted = states.count("interrupted") + sum(
                1 for job_id, path in jobs.items() if path == "poll" and api.get(f"/jobs/{job_id}").json()["state"] == "interrupted"
            )
        report.done_before_kill = done_before
        with sqlite3.connect(store / "penelope.db") as db:
            known = {name for (name,) in db.execute("select path from media_store_mediafile")}
        on_disk = {entry.name for entry in (store / "media").iterdir()} if (store / "media").exists() else set()
        if on_disk != known:
            report.problems.append(f"media out of step: files without rows {on_disk - known}, rows without files {known - on_disk}")
    finally:
        worker.stop()
    if [p for p in chromium_processes() if str(store) in p]:
        report.problems.append("a Chromium process outlived the worker")
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description="Crash the real worker again and again; account for every job.")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--pages", type=int, default=4)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    totals = RoundReport()
    with tempfile.TemporaryDirectory(prefix="penelope-soak-") as root, Receiver() as receiver:
        store = Path(root) / "store"
        for number in range(1, args.rounds + 1):
            report = crash_round(store, receiver, rng, pages=args.pages, label=f"r{number}")
            for name in ("jobs", "done_before_kill", "interrupted", "delivered", "polled"):
                setattr(totals, name, getattr(totals, name) + getattr(report, name))
            totals.problems += [f"round {number}: {p}" for p in report.problems]
            print(f"round {number}: {report.jobs} jobs, {report.interrupted} interrupted, "
                  f"{report.delivered} delivered, {report.polled} polled, problems: {len(report.problems)}", flush=True)
    print(f"seed {seed}: {args.rounds} rounds, {totals.jobs} jobs accounted for "
          f"({totals.delivered} webhook, {totals.polled} polling, {totals.interrupted} interrupted), "
          f"{len(totals.problems)} problems")
    for problem in totals.problems:
        print("  " + problem)
    raise SystemExit(1 if totals.problems else 0)


if __name__ == "__main__":
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "penelope_site.settings")
    django.setup()
    main()
