"""Before and after, side by side: the c=1 and c=32 measures of `bench.run`
(and its browser steps) on two checkouts at once, their workers taking turns, so both see the same
machine. A shared machine's load moves too much between two runs for a
before/after of a few tenths of a millisecond.

    python -m bench.compare --before /path/to/old/checkout [--after .]

The old checkout needs no `bench/` of its own: its worker loads the `bench`
plugin family from this one. Prints a table; asserts nothing.

With `--cdp N`, last (it leases `main`), a CDP client's step on each worker
in turns: a bare `Runtime.evaluate` on a flat session over `/cdp/<token>`
(the mux, the driver tap and the worker's socket; bench/phases/cdp.py has
the same step against a Chromium reached straight).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
from websockets.sync.client import ClientConnection, connect

import harness.worker as worker_harness
from bench import load
from bench.stats import Latency, Throughput
from bench.worker_calls import HOLD, NOOP, PLUGINS, REFERENCE_ROUTE, start_job, wait_done
from harness.worker import WorkerProcess

ROOT = Path(__file__).resolve().parents[1]
# A browser step (bench/phases/steps.py): `1+1` as a primitive, a plugin call and a job long-polled.
PRIMITIVE, EVALUATE, EXPRESSION = "/main/primitive/evaluate", "/main/plugin/web/evaluate", {"expression": "1+1"}


def evaluate_job(client: httpx.Client) -> httpx.Response:
    started = client.post(EVALUATE, json=EXPRESSION, headers={"X-Result-Ttl": "5"})
    assert started.status_code == 202, started.text
    return client.get(f"/jobs/{started.json()['job_id']}", params={"wait": "10"})


class CdpStep:
    """One CDP client on a worker's leased `main`: a flat session on its page,
    and `Runtime.evaluate("1+1")` there, message by message."""

    def __init__(self, worker: WorkerProcess, client: httpx.Client, sockets: contextlib.ExitStack) -> None:
        lease = client.post("/main/lease", json={"ttl": 600}).json()["lease"]
        made = client.post("/main/cdp", json={"ttl": 500}, headers={"X-Lease": lease})
        assert made.status_code == 201, made.text
        self.socket: ClientConnection = sockets.enter_context(
            connect(worker.base_url.replace("http://", "ws://") + made.json()["url"], max_size=None)
        )
        self.ids = itertools.count(1)
        target = self.call("Target.getTargets", {})["result"]["targetInfos"][0]["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["result"]["sessionId"]

    def call(self, method: str, params: dict, session: str | None = None) -> dict:
        call_id = next(self.ids)
        self.socket.send(
            json.dumps(
                {"id": call_id, "method": method, "params": params, **({"sessionId": session} if session else {})}
            )
        )
        while True:
            message = json.loads(self.socket.recv(timeout=30))
            if message.get("id") == call_id:
                return message

    def evaluate(self) -> dict:
        answer = self.call("Runtime.evaluate", {"expression": "1+1"}, self.session)
        assert answer["result"]["result"]["value"] == 2, answer
        return answer


@contextlib.contextmanager
def checkout(tree: Path) -> Iterator[None]:
    """Start workers from `tree`: the harness runs `manage.py serve` in its ROOT."""
    saved = worker_harness.ROOT
    worker_harness.ROOT = tree
    try:
        yield
    finally:
        worker_harness.ROOT = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the checkout before the change")
    parser.add_argument("--after", type=Path, default=ROOT, help="the checkout after it (this one)")
    parser.add_argument("--requests", type=int, default=1000, help="c=1 pairs per worker")
    parser.add_argument("--rounds", type=int, default=4, help="c=32 rounds per worker")
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--cdp", type=int, default=0, help="CDP client steps per worker, last (0: none)")
    args = parser.parse_args()
    client_name = load.load_client()

    scratch = Path(tempfile.mkdtemp(prefix="penelope-compare-"))
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    workers: dict[str, WorkerProcess] = {}
    try:
        for name, tree in trees.items():
            env = {"PENELOPE_PLUGINS": PLUGINS, "PYTHONPATH": str(ROOT)}  # `bench.plugins` from here
            with checkout(tree):
                workers[name] = WorkerProcess(scratch / name, env=env).start()
        clients = {name: worker.client() for name, worker in workers.items()}
        timings: dict[tuple[str, str], list[float]] = {}
        for n in range(args.requests):
            order = list(clients.items()) if n % 2 == 0 else list(reversed(clients.items()))
            for name, client in order:
                steps = [
                    ("reference", lambda c=client: c.get(REFERENCE_ROUTE)),
                    ("hold start", lambda c=client: start_job(c, HOLD)),
                    ("primitive evaluate", lambda c=client: c.post(PRIMITIVE, json=EXPRESSION)),
                    ("plugin evaluate", lambda c=client: c.post(EVALUATE, json=EXPRESSION)),
                    ("evaluate job + wait", lambda c=client: evaluate_job(c)),
                ]
                if n % 4 == 0:
                    steps.append(("noop start", lambda c=client: start_job(c, NOOP)))
                for step, call in steps:
                    elapsed, answer = load.timed_ms(call)
                    timings.setdefault((name, step), []).append(elapsed)
                    if isinstance(answer, str):  # a job started: its end, untimed
                        wait_done(client, answer)
                    elif isinstance(answer, httpx.Response):
                        assert answer.status_code == 200, answer.text
        polled = {name: start_job(client, NOOP, **{"X-Result-Ttl": "600"}) for name, client in clients.items()}
        for name, client in clients.items():
            wait_done(client, polled[name])
        rounds: dict[tuple[str, str], list[Throughput]] = {}
        for _ in range(args.rounds):
            for name, worker in workers.items():
                api = worker.base_url + "/api/v1"
                for step, url in (("reference", api + REFERENCE_ROUTE), ("poll", f"{api}/jobs/{polled[name]}")):
                    rounds.setdefault((name, step), []).append(
                        load.throughput(url, worker.key, concurrency=32, seconds=args.seconds, client=client_name)
                    )
        if args.cdp:
            with contextlib.ExitStack() as sockets:
                steps = {name: CdpStep(workers[name], client, sockets) for name, client in clients.items()}
                for n in range(args.cdp + args.cdp // 5):  # the first fifth warms up, untimed
                    order = list(steps.items()) if n % 2 == 0 else list(reversed(steps.items()))
                    for name, step in order:
                        elapsed, _ = load.timed_ms(step.evaluate)
                        if n >= args.cdp // 5:
                            timings.setdefault((name, "cdp evaluate"), []).append(elapsed)
        for client in clients.values():
            client.close()
    finally:
        for worker in workers.values():
            worker.stop()
        shutil.rmtree(scratch, ignore_errors=True)

    print(f"before: {trees['before']}\nafter:  {trees['after']}\n")
    print("| measurement | before | after |\n|---|---|---|")
    for step in (
        "reference",
        "hold start",
        "noop start",
        "primitive evaluate",
        "plugin evaluate",
        "evaluate job + wait",
        *(("cdp evaluate",) if args.cdp else ()),
    ):
        cells = []
        for name in trees:
            latency, ref = Latency.of(timings[(name, step)]), Latency.of(timings[(name, "reference")])
            ratio = "" if step == "reference" else f" = {latency.p50 / ref.p50:.2f} × reference"
            cells.append(f"p50 {latency.p50:.2f} ms, p99 {latency.p99:.2f} ms (n={latency.count}){ratio}")
        print(f"| c=1 {step} | {cells[0]} | {cells[1]} |")
    for step in ("reference", "poll"):
        cells = []
        for name in trees:
            median = sorted(rounds[(name, step)], key=lambda r: r.rps)[len(rounds[(name, step)]) // 2]
            reference = sorted(rounds[(name, "reference")], key=lambda r: r.rps)[len(rounds[(name, "reference")]) // 2]
            errors = sum(r.errors for r in rounds[(name, step)])
            ratio = "" if step == "reference" else f" = {median.rps / reference.rps:.2f} × reference"
            cells.append(f"{median.rps:,.0f} req/s, p50 {median.p50:.1f} ms, {errors} errors{ratio}")
        print(
            f"| c=32 {step} ({client_name}, median of {args.rounds} rounds of {args.seconds:g} s) "
            f"| {cells[0]} | {cells[1]} |"
        )


if __name__ == "__main__":
    main()
