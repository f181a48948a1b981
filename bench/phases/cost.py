"""What one awake persona costs, and what each candidate cut saves (issue 46).

1. A real worker in a cgroup of its own, its page cache dropped first (so
   its files are charged to it, as in a fresh container), with two pages on
   the demo site as in the personas phase: its charge, and its processes by
   kind (bench/breakdown.py). Again after 1,000 calls.
2. What its Python holds, stage by stage and by package
   (bench/import_profile.py, in a process of its own on the worker's settings).
3. The candidates for Chromium and Playwright's driver, each against the
   same baseline measured the same way: raw Playwright in this process
   launches Chromium with the worker's flags (and the candidate's), opens
   the same two demo pages from the worker above, navigates one between two
   sites ten times, and the kinds are read after the same settling time. Anonymous memory is the figure compared: it
   is what each persona adds, whatever else runs on the host. Each is
   measured `ROUNDS` times, taking turns with the baseline; the median is
   kept. The allocator's candidate (MALLOC_ARENA_MAX) is a second worker.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.breakdown import KINDS, KindMemory, by_kind, described, total
from bench.cgroup import MemoryCgroup, drop_page_cache
from bench.report import Plan, Report, Row
from bench.worker_calls import PLUGINS
from browser.flags import CHROMIUM_ARGS, DRIVER_NODE_OPTIONS, MEMORY_FEATURES_OFF, PLAYWRIGHT_DISABLED_FEATURES
from harness.worker import ROOT, WorkerProcess

CALLS = 1000
SETTLE_S = 2.0
ROUNDS = 3
# The flags before issue 46: the worker's, less the features it now turns off.
BEFORE_ARGS = [argument for argument in CHROMIUM_ARGS if not argument.startswith("--disable-features=")]
FEATURES_OFF = next(argument for argument in CHROMIUM_ARGS if argument.startswith("--disable-features="))
# Each candidate against the flags before: its name, its Chromium arguments
# beside them, its driver's NODE_OPTIONS, and whether the worker keeps it.
CANDIDATES = (
    ("the address bar's WebUI popups off (kept: browser/flags.py)",
     ["--disable-features=" + ",".join(PLAYWRIGHT_DISABLED_FEATURES + MEMORY_FEATURES_OFF[:2])], ""),
    ("the driver's young generation at 1 MB, NODE_OPTIONS=--max-semi-space-size=1 (kept)", [], DRIVER_NODE_OPTIONS),
    ("the spare renderer off (kept: a navigation to another site waits for its renderer)",
     ["--disable-features=" + ",".join(PLAYWRIGHT_DISABLED_FEATURES + MEMORY_FEATURES_OFF[2:])], ""),
    ("every kept cut: the worker's launch now", [FEATURES_OFF], DRIVER_NODE_OPTIONS),
    ("the network service in the browser process (not kept: it would leave its sandbox)",
     ["--enable-features=NetworkServiceInProcess2"], ""),
    ("Chromium's low-end device mode (not kept: it changes what pages are given)", ["--enable-low-end-device-mode"], ""),
    ("renderers' V8 young generation at 1 MB, --js-flags=--max-semi-space-size=1 (not kept: too little)",
     ["--js-flags=--max-semi-space-size=1"], ""),
    ("the driver's old generation capped, NODE_OPTIONS=--max-old-space-size=64 (not kept: a large screenshot would "
     "end the driver)", [], "--max-old-space-size=64"),
)


def cost_phase(plan: Plan, report: Report, scratch: Path) -> None:
    cgroup = MemoryCgroup.make("penelope-cost")
    if cgroup:
        drop_page_cache()
    worker = WorkerProcess(scratch / "cost", env={"PENELOPE_PLUGINS": PLUGINS},
                           before_exec=cgroup.join if cgroup else None)
    try:
        worker.start()
        with worker.client() as client:
            two_pages(client)
            time.sleep(SETTLE_S)
            breakdown_rows(report, "one awake persona, two pages", by_kind(worker.process.pid), cgroup)
            calls = CALLS if plan.name == "full" else CALLS // 10
            for n in range(calls):
                page = ("main", "second")[n % 2]
                client.post(f"/{page}/primitive/evaluate", json={"expression": "1+1"}).raise_for_status()
            time.sleep(SETTLE_S)
            breakdown_rows(report, f"the same after {calls:,} calls", by_kind(worker.process.pid), cgroup)
        python_rows(report, scratch)
        candidate_rows(report, worker.base_url, scratch, worker.process.pid)
    finally:
        worker.stop()
        if cgroup:
            cgroup.remove()
    allocator_row(report, scratch)


def two_pages(client) -> None:
    client.post("/pages", json={"page_id": "second"}).raise_for_status()
    for page, handle in (("main", "alice"), ("second", "bob")):
        answer = client.get(f"/{page}/plugin/demo/open-account?handle={handle}")
        assert answer.status_code == 200, answer.text


def breakdown_rows(report: Report, when: str, kinds: dict[str, KindMemory], cgroup: MemoryCgroup | None) -> None:
    whole = total(kinds)
    charged = f"charged {cgroup.charged_bytes() / 2**20:.0f} MB, " if cgroup else ""
    report.add(Row(f"A persona's memory, {when}",
                   f"{charged}PSS {whole.pss_mb:.0f} MB, anonymous {whole.anonymous_mb:.0f} MB ({whole.processes} processes)"))
    report.add(Row(f"  by process (PSS/anonymous), {when}", described(kinds)))


def python_rows(report: Report, scratch: Path) -> None:
    store = Path(tempfile.mkdtemp(dir=scratch))
    found = json.loads(subprocess.run(
        [sys.executable, "-m", "bench.import_profile", str(store)], cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout)
    stages = "; ".join(f"{each['stage']} {each['traced_mb']:.1f}/{each['anonymous_mb']:.0f} MB" for each in found["stages"])
    report.add(Row("The worker's Python by stage of its start (traced/anonymous)", stages))
    top = ", ".join(f"{name} {size:.1f}" for name, size in list(found["packages"].items())[:12])
    report.add(Row("The worker's Python by package, traced MB after its start", top))


async def raw_persona(
    base_url: str, profile: Path, extra: list[str], node_options: str, worker_pid: int
) -> tuple[dict[str, KindMemory], float]:
    """Chromium with the flags before issue 46 and `extra`, two demo pages:
    its kinds and its driver's, and a cross-site navigation's median time."""
    from playwright.async_api import async_playwright

    previous = os.environ.get("NODE_OPTIONS")
    os.environ["NODE_OPTIONS"] = node_options  # read by the driver Playwright starts now
    try:
        async with async_playwright() as playwright:
            args = [*BEFORE_ARGS, *extra, *(["--no-sandbox"] if os.geteuid() == 0 else [])]
            context = await playwright.chromium.launch_persistent_context(
                str(profile), executable_path=executable(playwright), args=args,
            )
            pages = [context.pages[0], await context.new_page()]
            for page, handle in zip(pages, ("alice", "bob"), strict=True):
                await page.goto(f"{base_url}/demo/{handle}/", wait_until="domcontentloaded")
            navigations = []
            other_site = base_url.replace("127.0.0.1", "localhost")  # another site: another renderer
            for n in range(10):
                began = time.perf_counter()
                await pages[1].goto(f"{(base_url, other_site)[n % 2]}/demo/carol/", wait_until="domcontentloaded")
                navigations.append(time.perf_counter() - began)
            for _ in range(50):
                for page in pages:
                    await page.evaluate("1+1")
            await asyncio.sleep(SETTLE_S)
            kinds = by_kind(os.getpid(), with_root=False, excluding=worker_pid)
            await context.close()
    finally:
        if previous is None:
            os.environ.pop("NODE_OPTIONS", None)
        else:
            os.environ["NODE_OPTIONS"] = previous
    return kinds, statistics.median(navigations) * 1000


def executable(playwright) -> str:
    own = playwright.chromium.executable_path
    if own and os.access(own, os.X_OK):
        return own
    return "/usr/bin/chromium"


def measured(base_url: str, scratch: Path, extra: list[str], node_options: str, worker_pid: int) -> tuple[dict[str, KindMemory], float]:
    profile = Path(tempfile.mkdtemp(dir=scratch, prefix="profile-"))
    return asyncio.run(raw_persona(base_url, profile, extra, node_options, worker_pid))


def median_kinds(samples: list[dict[str, KindMemory]]) -> dict[str, KindMemory]:
    kinds = {}
    for kind in KINDS:
        present = [sample[kind] for sample in samples if kind in sample]
        if present:
            kinds[kind] = KindMemory(
                round(statistics.median(each.processes for each in present)),
                statistics.median(each.pss_mb for each in present),
                statistics.median(each.anonymous_mb for each in present),
            )
    return kinds


def candidate_rows(report: Report, base_url: str, scratch: Path, worker_pid: int) -> None:
    baseline: list[tuple[dict[str, KindMemory], float]] = []
    results = []
    for name, extra, node_options in CANDIDATES:
        samples = []
        for _ in range(ROUNDS):
            baseline.append(measured(base_url, scratch, [], "", worker_pid))
            samples.append(measured(base_url, scratch, extra, node_options, worker_pid))
        results.append((name, median_kinds([kinds for kinds, _ in samples]), statistics.median(nav for _, nav in samples)))
    base = median_kinds([kinds for kinds, _ in baseline])
    base_total = total(base).anonymous_mb
    base_nav = statistics.median(nav for _, nav in baseline)
    report.add(Row("Chromium and its driver with the flags before issue 46 (PSS/anonymous MB by process)", described(base),
                   f"a cross-site navigation {base_nav:.0f} ms", target="the baseline of the candidates below"))
    for name, kinds, nav in results:
        saved = base_total - total(kinds).anonymous_mb
        report.add(Row(f"Candidate: {name}", f"{described(kinds)}; a cross-site navigation {nav:.0f} ms",
                       f"baseline {base_total:.0f} MB anonymous", f"{saved:+.1f} MB saved"))


def allocator_row(report: Report, scratch: Path) -> None:
    """The worker's own anonymous memory after the same calls, with glibc's
    arenas as they are and capped at 2 (MALLOC_ARENA_MAX)."""
    figures = {}
    for label, env in (("as it is", {}), ("MALLOC_ARENA_MAX=2", {"MALLOC_ARENA_MAX": "2"})):
        worker = WorkerProcess(Path(tempfile.mkdtemp(dir=scratch)), env={"PENELOPE_PLUGINS": PLUGINS, **env})
        try:
            worker.start()
            with worker.client() as client:
                two_pages(client)
                for n in range(CALLS // 2):
                    client.post(f"/{('main', 'second')[n % 2]}/primitive/evaluate", json={"expression": "1+1"})
                time.sleep(SETTLE_S)
                figures[label] = by_kind(worker.process.pid)["worker"].anonymous_mb
        finally:
            worker.stop()
    report.add(Row("Candidate: glibc's arenas capped (MALLOC_ARENA_MAX=2), the worker's anonymous memory",
                   f"{figures['MALLOC_ARENA_MAX=2']:.0f} MB", f"as it is {figures['as it is']:.0f} MB",
                   f"{figures['as it is'] - figures['MALLOC_ARENA_MAX=2']:+.1f} MB saved"))
