"""Jobs against the stack's own limit and against a peer, in one run.

    python -m bench.run [--quick] [--out PATH] [--only PHASE,...] [--profile DIR]

Starts a real worker (`manage.py serve`: daphne, real Chromium) on loopback
with a throwaway store, measures what a user of an async-job API pays (a job's
start, a poll, a webhook, the same plugin run plainly and as a job, restart
recovery, sweeps, memory, what the metrics cost a request), each beside its
reference measured in the same run, then RQ on a Redis server as the peer.
Prints a table and writes it, with the machine, versions and date, to
docs/BENCHMARKS.md between the generated-block markers (a full run; `--quick`
only prints unless given `--out`).

Asserts nothing: a benchmark prints figures. `scripts/bench.sh` sets up the
machine and runs this.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench import load
from bench.cgroup import MemoryCgroup, drop_page_cache
from bench.memory import Memory
from bench.phases.cdp import cdp_phase
from bench.phases.console import console_phase
from bench.phases.cost import cost_phase
from bench.phases.debug import debug_phase
from bench.phases.delivery import events_phase, peer_phase, plugin_phase, webhook_phase
from bench.phases.files import files_phase
from bench.phases.guard import guard_phase
from bench.phases.live import live_phase
from bench.phases.memory import max_pages_memory, memory_rows
from bench.phases.metrics import metrics_phase
from bench.phases.personas import personas_phase
from bench.phases.queue import queue_phase
from bench.phases.requests import c1_phase, floor_phase, throughput_phase
from bench.phases.schedules import schedules_phase
from bench.phases.soak import soak_phase
from bench.phases.steps import steps_phase
from bench.phases.store import store_phase
from bench.phases.wake import wake_phase
from bench.profiling import profiled
from bench.report import FULL, QUICK, Plan, Report, machine, table, versions, write
from bench.worker_calls import PLUGINS, REFERENCE_ROUTE, start_job, wait_done
from harness.worker import WorkerProcess

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "BENCHMARKS.md"


def warm_up(client: httpx.Client, plan: Plan) -> None:
    for _ in range(plan.warmup):
        client.get(REFERENCE_ROUTE).raise_for_status()
        wait_done(client, start_job(client))


PHASES = ("steps", "guard", "files", "cdp", "c1", "throughput", "floor", "metrics", "webhook", "events", "plugin", "debug", "queue", "schedules",
          "live", "peer", "memory", "store", "soak", "cost", "wake", "personas", "console")


def run(plan: Plan, profile_dir: Path | None, phases: tuple[str, ...] = PHASES) -> Report:
    report = Report(plan)
    client_name = load.load_client()
    scratch = Path(tempfile.mkdtemp(prefix="penelope-bench-"))
    load_before = os.getloadavg()
    began = time.time()
    cgroup = MemoryCgroup.make("penelope-bench")  # the worker's memory as the kernel charges it
    cold_cache = cgroup is not None and drop_page_cache()
    worker = WorkerProcess(scratch / "store", env={"PENELOPE_PLUGINS": PLUGINS}, before_exec=cgroup.join if cgroup else None)
    try:
        print(f"[{plan.name}] starting a worker (serve, daphne, Chromium) on loopback, store {scratch}", flush=True)
        worker.start()
        report.versions = versions(worker)
        pid = worker.process.pid
        with worker.client() as client:
            print("warm-up; memory idle", flush=True)
            warm_up(client, plan)
            time.sleep(1)
            idle = Memory.of(pid, cgroup)
            if "steps" in phases:
                print("a browser step: raw Playwright, a primitive, a plugin call, a job", flush=True)
                with profiled(pid, profile_dir, "steps"):
                    steps_phase(worker, client, plan, report)
            if "guard" in phases:
                print("a browser step with BROWSER_REFUSE_PRIVATE on and off", flush=True)
                guard_phase(plan, report, scratch)  # on workers of its own
            if "files" in phases:
                print("files: a 100 MB download and upload through the worker, against a plain fetch", flush=True)
                files_phase(plan, report, scratch)  # on a worker of its own
            if "cdp" in phases:
                print("cdp: a step through /cdp/<token> against the same step straight to the same Chromium", flush=True)
                cdp_phase(plan, report, scratch)  # on a worker of its own
            if "c1" in phases or "memory" in phases:
                print("c=1: reference and job starts", flush=True)
                with profiled(pid, profile_dir, "c1"):
                    c1_phase(client, plan, report)
                time.sleep(1)
                after_jobs = Memory.of(pid, cgroup)
            if "throughput" in phases:
                print(f"c={plan.concurrency}: reference and polls ({client_name})", flush=True)
                with profiled(pid, profile_dir, "throughput"):
                    throughput_phase(worker, client, plan, report, client_name)
            if "floor" in phases:
                print(f"the bare-stack floor, c=1 and c={plan.concurrency} ({client_name})", flush=True)
                with profiled(pid, profile_dir, "floor"):
                    floor_phase(worker, client, plan, report, client_name)
            if "metrics" in phases:
                print(f"metrics on against off, c=1 and c={plan.concurrency} ({client_name})", flush=True)
                metrics_phase(plan, report, client_name, scratch)  # on workers of its own
            if "webhook" in phases:
                print("webhooks", flush=True)
                with profiled(pid, profile_dir, "webhook"):
                    webhook_phase(client, plan, report)
            if "events" in phases:
                print("the event socket and cancel", flush=True)
                with profiled(pid, profile_dir, "events"):
                    events_phase(worker, client, plan, report)
            if "plugin" in phases:
                print("a plugin run: plain and as jobs", flush=True)
                with profiled(pid, profile_dir, "plugin"):
                    plugin_phase(client, plan, report)
            if "debug" in phases:
                print("X-Debug: a plain call without it, off, recorded and kept", flush=True)
                with profiled(pid, profile_dir, "debug"):
                    debug_phase(client, plan, report)
            if "queue" in phases:
                print("the queue: the option's cost, dispatch, a drain on any against RQ", flush=True)
                with profiled(pid, profile_dir, "queue"):
                    queue_phase(client, plan, report, scratch)
            if "schedules" in phases:
                print("schedules: a fire's punctuality", flush=True)
                with profiled(pid, profile_dir, "schedules"):
                    schedules_phase(client, plan, report)
            if "live" in phases:
                print("the live view: first frame, input to frame, a viewer's CPU", flush=True)
                with profiled(pid, profile_dir, "live"):
                    live_phase(worker, client, plan, report)
            if "peer" in phases:
                print("the peer: RQ and Redis", flush=True)
                with profiled(pid, profile_dir, "peer"):
                    peer_phase(client, plan, report, scratch)
            if "memory" in phases:
                print("memory with MAX_PAGES pages open", flush=True)
                pages, max_pages = max_pages_memory(worker, client, cgroup)
                jobs_run = plan.c1_requests + (plan.c1_requests + 3) // 4  # hold jobs, and a quarter as many no-ops
                memory_rows(report, idle, pages, max_pages, after_jobs, jobs_run)
        worker.stop()
        if "store" in phases:
            print("recovery, sweep and restart on their own stores", flush=True)
            store_phase(plan, report, scratch)
        if "soak" in phases:
            print("the soak: a persona's plain calls and jobs on 8 pages, on a worker of its own", flush=True)
            soak_phase(plan, report, scratch)
        if "cost" in phases:
            print("a persona's cost: its memory by process and by package, and the candidate cuts", flush=True)
            cost_phase(plan, report, scratch)
        if "wake" in phases:
            print("a sleeping persona's wake, part by part, through the waker", flush=True)
            wake_phase(plan, report, scratch)
        if "personas" in phases:
            print("personas per host, through the waker", flush=True)
            personas_phase(plan, report, scratch)
        if "console" in phases:
            print("the console: 30 sleeping personas of 10,000 jobs each, through the waker", flush=True)
            console_phase(plan, report, scratch, profile_dir)
    except BaseException:
        print(worker.log()[-5000:], file=sys.stderr)
        raise
    finally:
        worker.stop()
        if cgroup:
            cgroup.remove()
        shutil.rmtree(scratch, ignore_errors=True)
    load_after = os.getloadavg()
    loads = ", ".join(f"{x:.2f}" for x in load_before), ", ".join(f"{x:.2f}" for x in load_after)
    report.notes += [
        f"Date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; {plan.name} run, {time.time() - began:.0f} s.",
        "Machine: " + ", ".join(f"{key} {value}" for key, value in machine().items()) + ".",
        f"Load average (1, 5, 15 min) before: {loads[0]}; after: {loads[1]}.",
        "Versions: " + ", ".join(f"{key} {value}" for key, value in report.versions.items()) + ".",
        ("c=1 figures: one keep-alive httpx client, the reference and the candidate alternating. "
         f"c={plan.concurrency} figures: {client_name}, {plan.throughput_rounds} alternating round(s) of "
         f"{plan.throughput_seconds:g} s each, the median round shown; the ratio is the median of paired rounds."),
        ("Memory: " + (f"charged is the worker's own {'v2' if cgroup.v2 else 'v1'} memory cgroup (its usage, page cache "
                       "included; the working set leaves out inactive page cache)"
                       + ("; the page cache was dropped before each measured worker or waker started, so the files "
                          "it reads are charged to it as in a fresh container" if cold_cache else
                          "; files already cached by another cgroup are charged to that one, not here")
                       if cgroup else "no cgroup could be made here, so no charged figures")
         + "; PSS sums the proportional set sizes of the worker's process tree; the resident sum counts "
           "Chromium's shared pages once per process."),
    ]
    return report


def phase_list(raw: str) -> tuple[str, ...]:
    chosen = tuple(name.strip() for name in raw.split(",") if name.strip())
    unknown = set(chosen) - set(PHASES)
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"phases are {', '.join(PHASES)}")
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run of about a minute: fewer samples")
    parser.add_argument("--out", type=Path, help=f"write the figures here (a full run: {DOC.relative_to(ROOT)})")
    parser.add_argument("--profile", type=Path, metavar="DIR", help="record each phase with py-spy into DIR")
    parser.add_argument("--only", type=phase_list, default=PHASES, metavar="PHASE,...",
                        help=f"run only these phases, of {', '.join(PHASES)} (memory needs c1, and runs it)")
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    report = run(plan, args.profile, args.only)
    if args.only != PHASES and args.out is None:
        args.quick = True  # a partial run never overwrites the full figures unless asked
    print()
    print("\n".join(report.notes))
    print()
    print(table(report))
    out = args.out or (None if args.quick else DOC)
    if out is not None:
        write(report, out)
        print(f"\nwritten to {out}")


if __name__ == "__main__":
    main()
