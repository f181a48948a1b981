"""`manage.py recover_jobs`: what `serve` does at start, for operators.

Only run it while no worker serves this store: it marks every running job
interrupted, and a live worker's jobs are running for real.
"""

from django.core.management.base import BaseCommand

from jobs.service import recover


class Command(BaseCommand):
    help = "Mark running jobs interrupted and delete jobs past their deadline (run only with the worker stopped)."

    def handle(self, *args, **options):
        counts = recover()
        self.stdout.write(f"{counts['interrupted']} jobs interrupted, {counts['expired']} past their deadline deleted")
