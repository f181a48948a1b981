"""Schedules: how punctually a fire starts its job. A schedule firing every
second runs the no-op plugin on a page of its own; each fire's lateness is
its job's `started_at` (when it took its page) less the instant it was due,
the whole second before it."""

from __future__ import annotations

import math

import httpx

from bench.report import Plan, Report, Row, lat
from bench.stats import Latency
from harness.worker import wait_until

PAGE = "fires"


def schedules_phase(client: httpx.Client, plan: Plan, report: Report) -> None:
    fires = 120 if plan.name == "full" else 20
    client.post("/pages", json={"page_id": PAGE})
    created = client.post("/schedules", json={
        "name": "bench-every-second", "cron": "* * * * * *", "page_id": PAGE, "plugin": "bench/noop", "params": {},
        "result_ttl": 600, "overlap": "queue",
    })
    if created.status_code != 201:
        raise RuntimeError(f"the schedule was refused: {created.text}")
    schedule_id = created.json()["schedule_id"]
    try:
        jobs = wait_until(
            lambda: (found := client.get("/jobs", params={"schedule": schedule_id, "limit": 200}).json()["jobs"])
            and len(found) >= fires and found,
            timeout=fires * 2 + 30, interval=0.5, what=f"{fires} fires",
        )
    finally:
        client.delete(f"/schedules/{schedule_id}")
        client.delete(f"/{PAGE}")
    lateness = Latency.of([(job["started_at"] - math.floor(job["started_at"])) * 1000 for job in jobs[:fires]])
    report.add(Row(
        f"A schedule's fire: its instant → its job's started_at ({fires} fires, one a second)", lat(lateness), "", "",
        "p50 ≤ 50 ms, p99 ≤ 500 ms", lateness.p50 <= 50 and lateness.p99 <= 500,
    ))
