"""A job's end reaching its client: a webhook, the event socket (and a
cancel's answer), a real plugin run plain and as jobs, and a no-op job's round
trip against the peer, RQ on a Redis server."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import httpx

from bench import load
from bench.report import Plan, Report, Row, lat, ms
from bench.stats import Latency
from bench.worker_calls import NOOP, POLL_TTL_S, long_poll_done, start_job, wait_done
from harness.receiver import Receiver
from harness.worker import WorkerProcess, free_port, wait_until


def webhook_phase(client: httpx.Client, plan: Plan, report: Report) -> None:
    """From the job's `finished_at` to the receiver holding the body."""
    delays = []
    with Receiver() as receiver:
        for n in range(plan.webhooks):
            path = f"/200/hook{n}"
            start_job(client, NOOP, **{"X-Callback-Url": receiver.url + path})
            hit = wait_until(lambda path=path: receiver.received(path), timeout=30, interval=0.0005,
                             what="the webhook")[0]
            delays.append((hit.at - json.loads(hit.body)["finished_at"]) * 1000)
            wait_until(lambda: client.get("/main").json()["job_id"] is None, what="page main to be free")
    latency = Latency.of(delays)
    report.add(Row("Webhook: finished_at → receiver holds the body", lat(latency), "", "",
                   "p50 ≤ 20 ms, p99 ≤ 100 ms", latency.p50 <= 20 and latency.p99 <= 100))


def events_phase(worker: WorkerProcess, client: httpx.Client, plan: Plan, report: Report) -> None:
    """A job's end to a WebSocket client holding `job.ended`, and a cancel of a
    plugin waiting in the browser to its answer."""
    from websockets.sync.client import connect

    delays = []
    url = f"ws://127.0.0.1:{worker.port}/api/v1/events?page=main"
    with connect(url, additional_headers={"Authorization": f"Bearer {worker.key}"}) as events:
        for n in range(plan.webhooks + 10):
            job_id = start_job(client, NOOP)
            while True:
                event = json.loads(events.recv(timeout=30))
                if event["event"] == "job.ended" and event["job_id"] == job_id:
                    held_at = time.time()
                    break
            if n >= 10:
                delays.append((held_at - event["job"]["finished_at"]) * 1000)
            wait_until(lambda: client.get("/main").json()["job_id"] is None, what="page main to be free")
    latency = Latency.of(delays)
    report.add(Row("Event socket: a job's finished_at → the client holds `job.ended`", lat(latency), "", "",
                   "p50 ≤ 5 ms, p99 ≤ 50 ms", latency.p50 <= 5 and latency.p99 <= 50))

    cancels = []
    for _ in range(plan.webhooks // 6 + 5):
        job_id = start_job(client, "/main/plugin/bench/browser-wait", **{"X-Result-Ttl": POLL_TTL_S})
        # Well inside the browser call: the page shows the job, and its first poll is answered.
        wait_until(lambda job_id=job_id: client.get("/main").json()["job_id"] == job_id, what="the job on page main")
        elapsed, response = load.timed_ms(lambda job_id=job_id: client.post(f"/jobs/{job_id}/cancel"))
        if response.status_code != 200 or response.json()["state"] != "cancelled":
            raise RuntimeError(f"a cancel answered {response.status_code}: {response.text}")
        cancels.append(elapsed)
    latency = Latency.of(cancels)
    report.add(Row("Cancel of a plugin waiting in the browser (`page.wait_for_timeout(60000)`) → the answer, c=1",
                   lat(latency), "", "", "p50 ≤ 100 ms", latency.p50 <= 100))


def plugin_phase(client: httpx.Client, plan: Plan, report: Report) -> None:
    """demo/get-following with a fixed limit: a plain call, a webhook job and a
    polling job, in turn, end to end as the client sees them."""
    query = f"?handle=alice&limit={plan.plugin_limit}&pause_ms={plan.plugin_pause_ms}"
    path = "/main/plugin/demo/get-following" + query
    runs: dict[str, list[float]] = {"plain": [], "webhook": [], "poll": []}
    poll_every_s = 0.05
    with Receiver() as receiver:
        for n in range(plan.plugin_runs + 1):  # the first round warms the page and the site up
            began = time.time()
            response = client.get(path)
            assert response.status_code == 200 and response.json()["count"] == plan.plugin_limit, response.text
            plain_s = time.time() - began

            hook = f"/200/following{n}"
            began = time.time()
            start_job(client, path, **{"X-Callback-Url": receiver.url + hook})
            hit = wait_until(lambda hook=hook: receiver.received(hook), timeout=120, interval=0.001,
                             what="the webhook")[0]
            assert json.loads(hit.body)["result"]["count"] == plan.plugin_limit
            webhook_s = hit.at - began
            wait_until(lambda: client.get("/main").json()["job_id"] is None, what="page main to be free")

            began = time.time()
            job_id = start_job(client, path, **{"X-Result-Ttl": "60"})
            body = wait_done(client, job_id, pause_s=poll_every_s)
            assert body["result"]["count"] == plan.plugin_limit
            poll_s = time.time() - began
            if n:
                runs["plain"].append(plain_s * 1000)
                runs["webhook"].append(webhook_s * 1000)
                runs["poll"].append(poll_s * 1000)
    plain, webhook, poll = (Latency.of(runs[name]) for name in ("plain", "webhook", "poll"))
    name = f"demo/get-following limit={plan.plugin_limit} pause_ms={plan.plugin_pause_ms}"
    report.add(Row(f"Plain call, {name}", lat(plain)))
    ratio = webhook.p50 / plain.p50
    report.add(Row("Same as a webhook job: start → receiver holds the result", lat(webhook),
                   f"plain p50 {ms(plain.p50)}", f"{ratio:.3f} ×", "≤ 1.05 × plain", ratio <= 1.05))
    ratio = poll.p50 / plain.p50
    report.add(Row(f"Same as a polling job: start → poll sees done (a poll every {poll_every_s * 1000:.0f} ms)",
                   lat(poll), f"plain p50 {ms(plain.p50)}", f"{ratio:.3f} ×", "≤ 1.05 × plain", ratio <= 1.05))


def peer_phase(client: httpx.Client, plan: Plan, report: Report, scratch: Path) -> None:
    """A no-op job's round trip at c=1: Penelope (202 → a poll sees done)
    against RQ (enqueue → its result is there), each asking again at once."""
    try:
        import redis
        import rq

        from bench.peer import RedisServer, RQWorker, round_trip_ms
    except ImportError as missing:
        report.add(Row("Peer: RQ + Redis", f"skipped: {missing} (pip install -r requirements/bench.txt)"))
        return
    if shutil.which("redis-server") is None:
        report.add(Row("Peer: RQ + Redis", "skipped: redis-server is not installed (scripts/bench.sh installs it)"))
        return
    server = RedisServer(scratch / "redis", free_port()).start()
    workers = [
        RQWorker(server.url, "fork", "rq.worker.Worker", scratch / "rq-fork.log"),
        RQWorker(server.url, "simple", "rq.worker.SimpleWorker", scratch / "rq-simple.log"),
    ]
    try:
        report.versions["redis-server"] = server.version()
        for worker in workers:
            worker.start()
        connection = redis.Redis.from_url(server.url)
        queues = {worker.queue: rq.Queue(worker.queue, connection=connection) for worker in workers}
        for queue in queues.values():  # the workers are up once they answer
            queue.enqueue("bench.peer.noop").latest_result(timeout=60)

        def penelope_trip() -> float:
            elapsed, _ = load.timed_ms(lambda: wait_done(client, start_job(client)))
            return elapsed

        def long_poll_trip() -> float:
            elapsed, _ = load.timed_ms(lambda: long_poll_done(client, start_job(client)))
            return elapsed

        trips: dict[str, list[float]] = {"penelope": [], "long-poll": [], "fork": [], "simple": []}
        for n in range(plan.peer_trips + 10):
            figures = {"penelope": penelope_trip(), "long-poll": long_poll_trip(), "fork": round_trip_ms(queues["fork"]),
                       "simple": round_trip_ms(queues["simple"])}
            if n >= 10:
                for name, value in figures.items():
                    trips[name].append(value)
    finally:
        for worker in workers:
            worker.stop()
        server.stop()
    penelope, long_poll, fork, simple = (Latency.of(trips[name]) for name in ("penelope", "long-poll", "fork", "simple"))
    report.add(Row("Penelope no-op job round trip: 202 → a poll sees done, c=1", lat(penelope)))
    ratio = long_poll.p50 / simple.p50
    report.add(Row("Penelope no-op job round trip with a long-poll: 202 → `?wait=10` answers done, c=1", lat(long_poll),
                   f"RQ SimpleWorker p50 {ms(simple.p50)}", f"{ratio:.2f} ×", "p50 ≤ 1.0 × RQ SimpleWorker", ratio <= 1.0))
    report.add(Row("Peer: RQ `rq worker` (forks a work horse per job): enqueue → result, c=1", lat(fork),
                   f"Penelope p50 {ms(penelope.p50)}", f"Penelope / RQ = {penelope.p50 / fork.p50:.2f} ×", "report the ratio"))
    report.add(Row("Peer: RQ `SimpleWorker` (no fork): enqueue → result, c=1", lat(simple),
                   f"Penelope p50 {ms(penelope.p50)}", f"Penelope / RQ = {penelope.p50 / simple.p50:.2f} ×", "report the ratio"))
