"""Recovery and sweep on a throwaway store, timed in a process of their own.

    PENELOPE_STORE=/tmp/x python -m bench.store_ops recovery --jobs 1000
    PENELOPE_STORE=/tmp/x python -m bench.store_ops sweep --jobs 1000
    PENELOPE_STORE=/tmp/x python -m bench.store_ops running --jobs 1000

`recovery` inserts running jobs and times what `jobs.services.recover()` does
(`serve` runs it before its port opens); `sweep` inserts expired jobs, each
holding one media file on disk, and times what `jobs.services.sweep()` does;
both also time their longest batch, one write transaction each;
`running` only inserts running jobs, for a real worker to recover at its
start. Each prints one JSON line. Run `bench.run`, which calls this.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def setup_django() -> None:
    if "PENELOPE_STORE" not in os.environ:
        sys.exit("Set PENELOPE_STORE to a throwaway store: this writes and deletes jobs and files.")
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "penelope_site.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", interactive=False, verbosity=0)


def insert_running(count: int, *, webhook_share: float) -> None:
    """`count` jobs caught running, as a crash leaves them; some of them webhook jobs."""
    from jobs.models import Job

    now = time.time()
    webhooks = round(count * webhook_share)
    Job.objects.bulk_create(
        [
            Job(
                id=f"{n:016x}",
                page_id="main",
                plugin="demo/get-following",
                params={"handle": "alice", "limit": 200},
                mode=Job.Mode.WEBHOOK if n < webhooks else Job.Mode.POLL,
                ttl=None if n < webhooks else 600.0,
                callback="http://127.0.0.1:9/hook" if n < webhooks else None,
                accepted_at=now - 30,
                started_at=now - 30,
                attempt_started_at=now - 30,
            )
            for n in range(count)
        ],
        batch_size=500,
    )


class Longest:
    """The longest call of the batch steps it wraps: each step is one write
    transaction (and, for a sweep, the unlinks after its commit)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def timed(self, step):
        def run(*args):
            began = time.perf_counter()
            try:
                return step(*args)
            finally:
                self.seconds = max(self.seconds, time.perf_counter() - began)

        return run


def recovery(count: int) -> dict:
    """What `jobs.services.recover()` does, its batches timed one by one."""
    from core.db_thread import drain
    from jobs.services import discard_expired_batch, interrupt_batch

    insert_running(count, webhook_share=0.5)
    longest = Longest()
    began = time.perf_counter()
    now = time.time()
    counts = {
        "interrupted": drain(longest.timed(interrupt_batch), now),
        "expired": drain(longest.timed(discard_expired_batch), now),
    }
    return {"seconds": time.perf_counter() - began, "longest_transaction_s": longest.seconds, **counts}


def sweep(count: int, file_bytes: int = 16 * 1024) -> dict:
    """`count` ended jobs past their deadline, each holding one media file."""
    from core.db_thread import drain
    from jobs.models import Job
    from jobs.services import discard_expired_batch
    from media_store import store as media

    now = time.time()
    data = os.urandom(file_bytes)
    jobs = []
    for n in range(count):
        item = media.put(data, content_type="image/png", filename=f"shot{n}.png")
        job_id = f"{n:016x}"
        media.hold([item.token], holder=job_id, until=now - 1)
        jobs.append(
            Job(
                id=job_id, page_id="main", plugin="web/screenshot", params={}, state=Job.State.DONE,
                mode=Job.Mode.POLL, ttl=60.0, accepted_at=now - 120, started_at=now - 120, finished_at=now - 61,
                expires_at=now - 1,
                status=200, result={"success": True, "page_id": "main", "media": {"url": f"/api/v1/media/{item.token}"}},
                media_tokens=[item.token],
            )
        )
    Job.objects.bulk_create(jobs, batch_size=500)
    files_before = sum(1 for entry in media.media_dir().iterdir() if entry.is_file())
    longest = Longest()
    began = time.perf_counter()
    now = time.time()  # what `jobs.services.sweep()` does, its batches timed one by one
    counts = {"jobs": drain(longest.timed(discard_expired_batch), now), "files": drain(longest.timed(media.sweep_batch), now)}
    seconds = time.perf_counter() - began
    files_after = sum(1 for entry in media.media_dir().iterdir() if entry.is_file())
    return {"seconds": seconds, "longest_transaction_s": longest.seconds, **counts, "files_on_disk_before": files_before, "files_on_disk_after": files_after}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("operation", choices=["recovery", "sweep", "running"])
    parser.add_argument("--jobs", type=int, default=1000)
    args = parser.parse_args()
    setup_django()
    if args.operation == "recovery":
        result = recovery(args.jobs)
    elif args.operation == "sweep":
        result = sweep(args.jobs)
    else:
        insert_running(args.jobs, webhook_share=0.0)
        result = {"inserted": args.jobs}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
