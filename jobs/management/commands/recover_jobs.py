"""`manage.py recover_jobs`: what `serve` does at start, for operators.

It takes the store's lock for as long as it runs, as a worker does: it is
refused while a worker serves the store (that worker recovered its jobs when
it started, and the jobs running now are running for real), and a worker
started meanwhile is refused until it is done.
"""

from django.core.management.base import BaseCommand, CommandError

from core import store_lock
from jobs.services import recover


class Command(BaseCommand):
    help = "Mark running jobs interrupted and delete jobs past their deadline (refused while a worker runs)."

    def handle(self, *args, **options):
        try:
            lock = store_lock.acquire("recover_jobs")
        except store_lock.StoreInUse as refused:
            if refused.command == "serve":
                raise CommandError(
                    f"A worker is serving this store (pid {refused.pid}); it recovered its jobs when it started."
                ) from None
            raise CommandError(str(refused)) from None
        try:
            counts = recover()
        finally:
            store_lock.release(lock)
        self.stdout.write(f"{counts['interrupted']} jobs interrupted, {counts['expired']} past their deadline deleted")
        if counts["retried"]:
            self.stdout.write(f"{counts['retried']} jobs with attempts left (X-Retry) queued again for their next attempt")
