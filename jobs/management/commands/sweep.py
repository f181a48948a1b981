"""`manage.py sweep [--loop]`: delete expired jobs and media, once or every SWEEP_S."""

import time

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import close_old_connections

from jobs.service import sweep


def positive_seconds(raw: str) -> float:
    value = float(raw)
    if not value > 0:
        raise ValueError("the interval must be more than 0 seconds")
    return value


class Command(BaseCommand):
    help = "Delete expired jobs, their media and finished media files. Safe beside a live worker."

    def add_arguments(self, parser):
        parser.add_argument("--loop", action="store_true", help="sweep again every --interval seconds until stopped")
        parser.add_argument("--interval", type=positive_seconds, default=settings.SWEEP_S)

    def handle(self, *args, loop: bool, interval: float, **options):
        while True:
            counts = sweep()
            self.stdout.write(f"swept {counts['jobs']} jobs and {counts['files']} files")
            if not loop:
                return
            close_old_connections()
            time.sleep(interval)
