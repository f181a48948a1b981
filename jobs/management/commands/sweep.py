"""`manage.py sweep [--loop]`: delete expired jobs and media, once or every SWEEP_S.

Safe beside a live worker: it works in short batches, one transaction each,
and unlinks files only after the commit that drops their rows. With `--loop`
a failed sweep (a locked database, say) is logged and the next one runs on
time; SIGTERM or SIGINT stops it after the sweep in hand.
"""

from django.conf import settings
from django.core.management.base import BaseCommand

from core.loops import Loop, run_until_signalled
from jobs.services import asweep, sweep


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
        if not loop:
            self.report(sweep())
            return

        async def step() -> None:
            self.report(await asweep())

        sweeper = Loop("sweep", step, interval, at_start=True)
        run_until_signalled(sweeper.run, sweeper.stop)

    def report(self, counts: dict[str, int]) -> None:
        self.stdout.write(f"swept {counts['jobs']} jobs, {counts['files']} files and {counts['attempts']} delivery attempts")
        self.stdout.flush()
