"""`manage.py schedules [list | pause NAME|ID | resume NAME|ID | trigger NAME|ID]`:
the schedules for an operator's shell.

A command runs in a process of its own, beside the worker: pause and resume
change the row, which the worker's loop reads within SCHEDULE_CHECK_S;
trigger sets a "fire requested" stamp on the row, which the loop fires at
that next check (the API's trigger fires at once and answers the job). Each
also records the store's next wake, so a sleeping worker's supervisor wakes
it in time (core/awake.py).
"""

import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from core.admin_base import when
from core.awake import write_next_wake
from core.errors import NoSuchSchedule
from schedules import services
from schedules.selectors import earliest_fire_at, list_schedules


class Command(BaseCommand):
    help = (
        "List schedules; pause, resume or trigger one (by name or id). The worker's loop sees a change within "
        f"SCHEDULE_CHECK_S ({settings.SCHEDULE_CHECK_S:g} s): trigger asks it to fire the schedule at that next check."
    )

    def add_arguments(self, parser):
        parser.add_argument("action", nargs="?", default="list", choices=["list", "pause", "resume", "trigger"])
        parser.add_argument("schedule", nargs="?", help="a schedule's name or id (not with list)")

    def handle(self, *args, action: str, schedule: str | None, **options):
        if action == "list":
            if schedule:
                raise CommandError("list takes no schedule.")
            self.list()
            return
        if not schedule:
            raise CommandError(f"{action} needs a schedule's name or id.")
        now = time.time()
        try:
            if action == "trigger":
                found = services.request_fire(name_or_id=schedule, now=now)
                # A sleeping worker is woken for it (its supervisor reads the store's next wake).
                write_next_wake(settings.STORE_DIR, now)
                self.stdout.write(f"{found.name}: fire requested; the worker fires it at its next check.")
                return
            found = services.set_paused(name_or_id=schedule, paused=action == "pause", now=now)
            write_next_wake(settings.STORE_DIR, earliest_fire_at())
        except NoSuchSchedule as unknown:
            raise CommandError(f"{unknown.message} ({schedule})") from None
        self.stdout.write(f"{found.name}: {'paused' if found.paused else 'resumed, next fire ' + when(found.next_fire_at)}")

    def list(self) -> None:
        self.stdout.write(
            f"{'id':16}  {'name':24}  {'cron':18}  {'timezone':16}  {'next fire':27}  {'fired':>5}  {'skip':>5}  "
            f"{'miss':>5}  {'refus':>5}  plugin on page"
        )
        for schedule in list_schedules():
            next_fire = "paused" if schedule.paused else when(schedule.next_fire_at)
            self.stdout.write(
                f"{schedule.id:16}  {schedule.name[:24]:24}  {schedule.cron[:18]:18}  {schedule.timezone[:16]:16}  "
                f"{next_fire:27}  {schedule.fired:>5}  {schedule.skipped:>5}  {schedule.missed:>5}  {schedule.refused:>5}  "
                f"{schedule.plugin} on {schedule.page_id}"
            )
