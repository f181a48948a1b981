"""How many personas one host holds: personas woken through the real waker,
in steps (4, 8, 16, 24, ...), each with two pages showing the demo site, all
awake at once; at each step the memory charged per persona, the time from a
cold request to its answer (the wake included), and whether every persona
answers a call on each of its pages within 5 s while all are awake. Stops
at the first step that fails, or before one the host's memory would not hold."""

from __future__ import annotations

import re
import shutil
import statistics
import time
from pathlib import Path

from bench import load
from bench.cgroup import MemoryCgroup, drop_page_cache
from bench.memory import MB, Memory
from bench.report import Plan, Report, Row, ms
from bench.worker_calls import PLUGINS
from harness.waker import WakerProcess

STEPS = (4, 8, 16, 24, 32, 40, 48, 64)
ANSWER_WITHIN_S = 5.0
HOST_SHARE = 0.85  # a step runs only if its projected charge fits in this share of the host's memory
# (a persona's charge falls as they grow in number, so the projection from the step before is high)
OPEN = "/main/plugin/demo/open-account?handle=alice"
SECOND_PAGE = "second"
TOUCH = {"expression": "document.querySelectorAll('*').length"}


def persona_name(n: int) -> str:
    return f"p{n:02d}"


def personas_phase(plan: Plan, report: Report, scratch: Path) -> None:
    steps = STEPS if plan.name == "full" else STEPS[:2]
    cgroup = MemoryCgroup.make("penelope-personas")
    if cgroup:
        drop_page_cache()  # its files charged to it, as in a fresh container (bench/cgroup.py)
    names = [persona_name(n) for n in range(1, steps[-1] + 1)]
    waker = WakerProcess(
        scratch / "personas",
        [{"name": name, "mode": "sleepy", "idle_timeout_s": 3600,
          "env": {"PENELOPE_KEY": f"bench-{name}-key-0123456789abcdef"}} for name in names],
        env={"PENELOPE_PLUGINS": PLUGINS, "WAKER_POLL_S": "1"},
        before_exec=cgroup.join if cgroup else None,
    )
    host_mb = _mem_total_mb()
    results: list[dict] = []
    try:
        waker.start(timeout=60)
        awake: list[str] = []
        for count in steps:
            if results and results[-1]["per_persona_mb"] * count > HOST_SHARE * host_mb:
                results.append({"count": count, "skipped": True, "projected_mb": results[-1]["per_persona_mb"] * count})
                break
            new = names[len(awake):count]
            colds = [cold_call(waker, name) for name in new]  # one at a time: a cold start beside the others awake
            for name in new:
                with waker.through(name) as client:
                    client.post("/pages", json={"page_id": SECOND_PAGE}).raise_for_status()
                    opened = client.get(f"/{SECOND_PAGE}/plugin/demo/open-account?handle=bob")
                    assert opened.status_code == 200, opened.text
            awake += new
            time.sleep(2)  # the new pages settle (their first paint, the demo's scripts)
            answers = all_at_once(waker, awake)
            charged = cgroup.charged_bytes() / MB if cgroup else None
            pss = sum(Memory.of(pid).pss_mb for pid in waker.workers())
            per_persona = (charged if charged is not None else pss) / count
            results.append({
                "count": count, "cold": colds, "answers": answers, "charged_mb": charged, "pss_mb": pss,
                "per_persona_mb": per_persona, "ok": all(took <= ANSWER_WITHIN_S for took in answers),
            })
            print(f"  {count} personas: cold p50 {statistics.median(colds):.2f} s (of the {len(new)} new), "
                  f"all at once max {max(answers):.2f} s, {per_persona:.0f} MB a persona", flush=True)
            if not results[-1]["ok"]:
                break
    finally:
        waker.stop(timeout=120)
        if cgroup:
            cgroup.remove()
        shutil.rmtree(scratch / "personas", ignore_errors=True)
    rows(report, results, cgroup is not None, host_mb)


def cold_call(waker: WakerProcess, name: str) -> float:
    """A request to a sleeping persona through the waker, to its answer: the
    wake (worker and browser start) and the first page's demo load. Seconds."""
    with waker.through(name, timeout=120) as client:
        began = time.perf_counter()
        response = client.get(OPEN)
        took = time.perf_counter() - began
    assert response.status_code == 200, response.text
    return took


def all_at_once(waker: WakerProcess, names: list[str]) -> list[float]:
    """Every persona at once, a call on each of its two pages (in turn): the
    seconds each persona took to answer both."""
    took: dict[str, float] = {}

    def ask(name: str) -> None:
        with waker.through(name, timeout=60) as client:
            began = time.perf_counter()
            for page in ("main", SECOND_PAGE):
                response = client.post(f"/{page}/plugin/web/evaluate", json=TOUCH)
                assert response.status_code == 200 and response.json()["value"] > 10, response.text
            took[name] = time.perf_counter() - began

    load.in_threads(ask, [(name,) for name in names], "personas failed to answer")
    return [took[name] for name in names]


def rows(report: Report, results: list[dict], charged: bool, host_mb: float) -> None:
    measure = "charged (the waker's cgroup)" if charged else "PSS (no cgroup could be made here)"
    for result in results:
        count = result["count"]
        if result.get("skipped"):
            report.add(Row(f"Personas awake at once: {count}", f"not run: {result['projected_mb'] / 1024:.1f} GB projected",
                           f"{HOST_SHARE:.0%} of the host's {host_mb / 1024:.1f} GB", "", "", None))
            continue
        colds, answers = result["cold"], result["answers"]
        report.add(Row(
            f"Personas awake at once: {count}, two pages each on the demo site",
            f"{result['per_persona_mb']:.0f} MB a persona, {measure}; cold request → answer (wake included), "
            f"the {len(colds)} woken at this step one at a time: p50 {ms(statistics.median(colds) * 1000)}, "
            f"max {ms(max(colds) * 1000)}; all at once, a call on each page: max {ms(max(answers) * 1000)}",
            f"PSS {result['pss_mb'] / count:.0f} MB a persona", "",
            f"every persona answers within {ANSWER_WITHIN_S:g} s", result["ok"],
        ))
    held = [r["count"] for r in results if r.get("ok")]
    most = max(held, default=0)
    report.add(Row("Personas per host: the most awake at once, each answering a call on each page within 5 s",
                   f"{most}", f"host: {host_mb / 1024:.1f} GB", "", "≥ 24", most >= 24))


def _mem_total_mb() -> float:
    meminfo = Path("/proc/meminfo").read_text()
    return int(re.search(r"MemTotal:\s+(\d+)", meminfo).group(1)) / 1024
