"""Browser fault rounds: one real worker under a mixed load of plain calls
and jobs (webhook and polling) while its browser's main process (odd rounds)
or every renderer (even rounds) is killed with SIGKILL at a random moment.
Every call must answer 200 or 502, every job must end exactly once (a
webhook delivered once, a poll `done`), none may stay running, and the worker
must serve at the end. Prints the time to recover (a kill to the next call
answered), p50 and p99 by fault.

`scripts/soak.sh browser --rounds 50` is the soak; the suite runs two rounds
(tests/test_browser_faults.py).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from harness.receiver import Receiver
from harness.worker import WorkerProcess, wait_until
from tests.support.faults import kill_browser, kill_renderers

PLUGINS = "plugins.web,tests.support.testing_plugins"
JOB_PAGES = ("jobs-1", "jobs-2", "jobs-3")
PROBE = "probe"  # no load on it: its first answer after a kill times the recovery


@dataclass
class SoakReport:
    rounds: int = 0
    calls: int = 0
    jobs: int = 0
    answers: dict[int, int] = field(default_factory=dict)  # plain calls and job outcomes by status
    recovery_s: dict[str, list[float]] = field(default_factory=lambda: {"browser": [], "renderer": []})
    problems: list[str] = field(default_factory=list)

    def count(self, status: int) -> None:
        self.answers[status] = self.answers.get(status, 0) + 1


def soak_round(worker: WorkerProcess, receiver: Receiver, rng: random.Random, number: int, report: SoakReport) -> None:
    fault = "browser" if number % 2 else "renderer"
    calls: list[int] = []
    jobs: dict[str, str] = {}  # job id -> "poll" or the receiver path
    with worker.client() as api:
        for n, page in enumerate(JOB_PAGES):
            action, params = rng.choice([("browser-wait", {"ms": rng.randint(50, 1500)}), ("sleep", {"seconds": rng.uniform(0.05, 1.5)})])
            if n % 2:
                path = f"/200/r{number}-{n}"
                headers = {"X-Callback-Url": receiver.url + path}
            else:
                path, headers = "poll", {"X-Result-Ttl": "600"}
            started = api.post(f"/{page}/plugin/testing/{action}", json=params, headers=headers)
            if started.status_code != 202:
                report.problems.append(f"round {number}: a job start on {page} answered {started.status_code}: {started.text}")
                continue
            jobs[started.json()["job_id"]] = path

        def plain_calls() -> None:
            with worker.client() as own:
                for _ in range(3):
                    try:
                        answer = own.get("/main/plugin/testing/browser-wait", params={"ms": rng.randint(20, 400)})
                    except httpx.HTTPError as error:  # no answer within the client's 60 s is a problem too
                        report.problems.append(f"round {number}: a plain call got no answer: {error!r}")
                        continue
                    calls.append(answer.status_code)

        callers = [threading.Thread(target=plain_calls) for _ in range(2)]
        for caller in callers:
            caller.start()
        time.sleep(rng.uniform(0.05, 0.8))  # the random moment of the fault is the point of the soak
        killed_at = time.monotonic()
        if fault == "browser":
            kill_browser(worker.store)
        else:
            kill_renderers(worker.store)
        probe = wait_until(
            lambda: api.post(f"/{PROBE}/plugin/web/evaluate", json={"expression": "1"}).status_code == 200,
            timeout=60, interval=0.01, what="the probe page to answer again",
        )
        if probe:
            report.recovery_s[fault].append(time.monotonic() - killed_at)
        for caller in callers:
            caller.join(120)

        for job_id, path in jobs.items():
            if path == "poll":
                body = api.get(f"/jobs/{job_id}", params={"wait": 60}).json()
                if body.get("state") != "done" or body.get("status") not in (200, 502):
                    report.problems.append(f"round {number}: polling job {job_id} ended as {body}")
                    continue
                report.count(body["status"])
            else:
                hits = wait_until(lambda path=path: receiver.received(path), timeout=30, what=f"job {job_id}'s webhook")
                body = json.loads(hits[0].body)
                report.count(body["status"])
        running = api.get("/jobs", params={"state": "running"}).json()["jobs"]
        if running:
            report.problems.append(f"round {number}: jobs still running after the round: {running}")
    for status in calls:
        if status not in (200, 502):
            report.problems.append(f"round {number}: a plain call answered {status}")
        report.count(status)
    report.rounds += 1
    report.calls += len(calls)
    report.jobs += len(jobs)


def run(rounds: int, seed: int, directory: Path) -> SoakReport:
    rng = random.Random(seed)
    report = SoakReport()
    env = {
        "PENELOPE_PLUGINS": PLUGINS, "MAX_PAGES": str(len(JOB_PAGES) + 2), "PAGE_WAIT_S": "60",
        "BROWSER_RELAUNCH_S": "0.2", "WEBHOOK_ATTEMPTS_S": "0,0.5,1,1.5",
    }
    with Receiver() as receiver:
        worker = WorkerProcess(directory / "store", env=env).start()
        try:
            with worker.client() as api:
                for page in (*JOB_PAGES, PROBE):
                    api.post("/pages", json={"page_id": page})
            for number in range(1, rounds + 1):
                soak_round(worker, receiver, rng, number, report)
            # Every webhook job was delivered exactly once.
            for path, hits in _by_path(receiver).items():
                if len(hits) != 1:
                    report.problems.append(f"webhook {path} arrived {len(hits)} times")
            with worker.client() as api:
                if api.post("/main/plugin/web/evaluate", json={"expression": "'serving'"}).status_code != 200:
                    report.problems.append("the worker does not serve at the end")
        finally:
            worker.stop()
    return report


def _by_path(receiver: Receiver) -> dict[str, list]:
    found: dict[str, list] = {}
    for request in receiver.requests:
        found.setdefault(request.path, []).append(request)
    return found


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def summary(report: SoakReport, seed: int) -> str:
    lines = [
        f"seed {seed}: {report.rounds} rounds, {report.calls} plain calls and {report.jobs} jobs; "
        f"answers by status {dict(sorted(report.answers.items()))}; {len(report.problems)} problems"
    ]
    for fault, times in report.recovery_s.items():
        if times:
            lines.append(
                f"  {fault} kills: {len(times)}, time to recover p50 {statistics.median(times):.2f} s, "
                f"p99 {percentile(times, 0.99):.2f} s, max {max(times):.2f} s"
            )
    lines += [f"  {problem}" for problem in report.problems]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description="Kill the real worker's browser and renderers under load, again and again.")
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    with tempfile.TemporaryDirectory(prefix="penelope-browser-soak-") as root:
        report = run(args.rounds, seed, Path(root))
    print(summary(report, seed))
    raise SystemExit(1 if report.problems else 0)


if __name__ == "__main__":
    main()
