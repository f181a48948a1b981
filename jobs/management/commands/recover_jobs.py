"""`manage.py recover_jobs`: what `serve` does at start, for operators.

It refuses while a worker serves the store: that worker recovered its jobs
when it started, and the jobs running now are running for real.
"""

from django.core.management.base import BaseCommand, CommandError

from jobs.service import recover
from penelope_site import store_lock


class Command(BaseCommand):
    help = "Mark running jobs interrupted and delete jobs past their deadline (refused while a worker runs)."

    def handle(self, *args, **options):
        if store_lock.held_by_a_worker():
            raise CommandError("A worker is serving this store; it recovered its jobs when it started.")
        counts = recover()
        self.stdout.write(f"{counts['interrupted']} jobs interrupted, {counts['expired']} past their deadline deleted")
