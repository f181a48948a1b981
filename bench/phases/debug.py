"""What X-Debug costs a plain call: nothing when it is off, and what
recording costs when it is asked for."""

from __future__ import annotations

import httpx

from bench import load
from bench.report import Plan, Report, Row, lat, ms
from bench.stats import Latency

CALL = "/main/plugin/web/evaluate"
BODY = {"expression": "1+1"}
# The variants, in turn: no header; X-Debug off (the default's path); on-failure
# on a success (recorded, then dropped); always (five files stored).
SIDES = {"none": None, "off": "off", "on-failure": "on-failure", "always": "always"}
ALWAYS_EVERY = 10  # `always` stores five files a call: one call in this many rounds


def debug_phase(client: httpx.Client, plan: Plan, report: Report) -> None:
    """`web/evaluate 1+1` as a plain call at c=1 in each variant, in turn, so
    that a drift of the machine's load falls on all alike."""
    timings: dict[str, list[float]] = {side: [] for side in SIDES}

    def call(side: str) -> None:
        headers = {"X-Debug": SIDES[side]} if SIDES[side] else {}
        elapsed, response = load.timed_ms(lambda: client.post(CALL, json=BODY, headers=headers))
        assert response.status_code == 200 and response.json()["value"] == 2, response.text
        assert ("artifacts" in response.json()) == (side == "always"), response.text
        timings[side].append(elapsed)

    def settle() -> None:
        assert client.post(CALL, json=BODY).status_code == 200

    for _ in range(plan.warmup):
        call("none")
    timings["none"].clear()
    rounds = plan.c1_requests // 2
    for n in range(rounds):
        # No header and off take turns going first; a recording goes last and
        # is followed by one untimed call, which its clean-up (the trace
        # dropped in the background) may slow, so it falls on neither.
        for side in ("none", "off", "on-failure") if n % 2 else ("off", "none", "on-failure"):
            call(side)
        if n % ALWAYS_EVERY == 0:
            call("always")
        settle()
    none, off, recorded, kept = (Latency.of(timings[side]) for side in SIDES)
    name = "Plain call `web/evaluate` `1+1`, c=1"
    report.add(Row(f"{name}, no X-Debug", lat(none)))
    ratio = off.p50 / none.p50
    report.add(Row(f"{name}, X-Debug: off (the path of DEBUG_ARTIFACTS off)", lat(off), f"no header p50 {ms(none.p50)}",
                   f"{ratio:.3f} ×", "p50 ≤ 1.05 × no header", ratio <= 1.05))
    report.add(Row(f"{name}, X-Debug: on-failure on a success (recorded: logs and a trace, then dropped)",
                   lat(recorded), f"no header p50 {ms(none.p50)}", f"{recorded.p50 / none.p50:.2f} ×", "(no target)"))
    report.add(Row(f"{name}, X-Debug: always (five files stored)", lat(kept), f"no header p50 {ms(none.p50)}",
                   f"{kept.p50 / none.p50:.2f} ×", "(no target)"))
