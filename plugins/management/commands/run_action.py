"""`manage.py run_action FAMILY/ACTION [--param k=v …] [--json '{…}'] [--url URL]
[--headed] [--trace FILE] [--profile] [--media-dir DIR]`: one action on a
browser of its own, its answer printed (plugins/shell.py).

It is for iterating on a flow from a terminal: edit the action, run it
against a page, read the answer (or the trace), again, with no worker, key
or job in the way. The parameters are checked as the API checks them, and
every refusal (an unknown action, a bad parameter, no display for --headed,
a profile a worker holds) comes before a browser starts. The JSON answer goes
to stdout and `status: N` to stderr, so `| jq` reads the one and a script the
exit status: 0 for a 2xx answer, 1 for any other.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from core.api import ApiError
from plugins.shell import Shell, ShellCannotRun, check_headed, find, parameters


class Command(BaseCommand):
    help = (
        "Run one plugin action on a browser of its own (never a running worker's) and print its JSON answer; "
        "the status goes to stderr, and the exit status is 0 for a 2xx answer, 1 otherwise."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("route", metavar="FAMILY/ACTION", help="the action, e.g. web/state")
        parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                            help="a parameter as a query string gives it (converted as the action declares); repeatable")
        parser.add_argument("--json", metavar="OBJECT", help="parameters as a JSON object, as a POST body gives them")
        parser.add_argument("--url", help="open this address before the action runs")
        parser.add_argument("--headed", action="store_true", help="show the browser (needs DISPLAY or WAYLAND_DISPLAY)")
        parser.add_argument("--trace", type=Path, metavar="FILE",
                            help="record a Playwright trace into FILE (open it with `playwright show-trace FILE`)")
        parser.add_argument("--profile", action="store_true",
                            help="use the persona's browser profile (its cookies), holding the store meanwhile; refused while a worker serves it")
        parser.add_argument("--media-dir", type=Path, metavar="DIR",
                            help="where the action's files go (default: a new temporary folder)")

    def handle(self, *args, **options) -> None:
        try:
            action = find(options["route"])
            check_headed(options["headed"])
            data = parameters(options["json"], options["param"])
        except ShellCannotRun as refused:
            raise CommandError(str(refused)) from None
        try:
            params = action.validate(data)
        except ApiError as error:
            raise CommandError(error.message) from None
        shell = Shell(action, params, url=options["url"], headed=options["headed"], trace=options["trace"],
                      profile=options["profile"], media_dir=options["media_dir"])
        try:
            outcome = asyncio.run(shell.run())
        except ShellCannotRun as refused:
            raise CommandError(str(refused)) from None
        finally:
            self.say_trace(shell)
        self.stdout.write(json.dumps(outcome.body, ensure_ascii=False))  # one line, as the docs show it
        self.stderr.write(f"status: {outcome.status}")
        if not 200 <= outcome.status < 300:
            raise SystemExit(1)

    def say_trace(self, shell: Shell) -> None:
        """Where the trace went, whatever the outcome (a run that failed is the one worth reading)."""
        if shell.trace is None:
            return
        if shell.trace_written:
            self.stderr.write(f"trace: {shell.trace.resolve()} (open it with `playwright show-trace {shell.trace}`)")
        else:
            self.stderr.write(f"trace: none was written to {shell.trace}")
