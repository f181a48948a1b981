"""What the benchmark asks of a worker: the plugins it loads, the routes it
times, a job's start, and waiting for a job's end (by polls or a long-poll).
`bench.run`'s phases and `bench.compare` share these."""

from __future__ import annotations

import time

import httpx

PLUGINS = "plugins.web,plugins.demo,bench.plugins"
REFERENCE_ROUTE = "/main"  # GET /api/v1/main: a page's state, in memory, no database
NOOP = "/main/plugin/bench/noop"
HOLD = "/main/plugin/bench/hold"
POLL_TTL_S = "5"  # short, so a thousand finished jobs never fill MAX_JOBS


def start_job(client: httpx.Client, path: str = NOOP, **headers: str) -> str:
    response = client.get(path, headers=headers or {"X-Result-Ttl": POLL_TTL_S})
    if response.status_code != 202:
        raise RuntimeError(f"a job start answered {response.status_code}: {response.text}")
    return response.json()["job_id"]


def wait_done(client: httpx.Client, job_id: str, pause_s: float = 0.0, timeout_s: float = 300) -> dict:
    """Poll until the job has ended; its body."""
    deadline = time.monotonic() + timeout_s
    while True:
        response = client.get(f"/jobs/{job_id}")
        if response.status_code != 200:
            raise RuntimeError(f"a poll of job {job_id} answered {response.status_code}: {response.text}")
        body = response.json()
        if body["state"] not in ("queued", "running"):
            return body
        if time.monotonic() > deadline:
            raise RuntimeError(f"job {job_id} still runs after {timeout_s} s")
        if pause_s:
            time.sleep(pause_s)


def long_poll_done(client: httpx.Client, job_id: str) -> dict:
    """Long-poll until the job has ended (one request, unless it runs past 10 s); its body."""
    while True:
        response = client.get(f"/jobs/{job_id}", params={"wait": "10"})
        if response.status_code != 200:
            raise RuntimeError(f"a long-poll of job {job_id} answered {response.status_code}: {response.text}")
        if response.json()["state"] != "running":
            return response.json()
