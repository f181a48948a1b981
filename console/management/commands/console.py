"""`python manage.py console [--fleet fleet.json]`: the fleet console on its
own, where no waker runs it (Kubernetes: `waker export-kubernetes` writes its
Deployment, docs/guides/SCALING.md).

It serves the console's pages under /console/ and `GET /api/v1/fleet/jobs`
with daphne on CONSOLE_HOST:CONSOLE_PORT, and reads each persona of the fleet
file through its worker's Service with a read key (console/fleet_http.py).
Signing in takes WAKER_KEY, as on the waker; on Kubernetes it is the
console's own Secret. First SIGTERM/SIGINT stops it cleanly; a second exits now.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from console import fleet as console_fleet
from console.fleet_file import FleetInvalid, load_fleet
from console.fleet_http import ServiceFleet
from core.addresses import authority
from core.serving import PortInUse, check_port_free, event_loop, run_daphne

log = logging.getLogger("penelope.console")

NO_KEY = (
    "Set WAKER_KEY: the console's sign-in key (a long random string, such as the output of "
    "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`). On Kubernetes it comes from the console's Secret."
)


class Command(BaseCommand):
    help = "Run the fleet console alone: each persona read through its worker's Service with a read key."
    requires_system_checks = ()  # no models, no database: nothing for them to check

    def add_arguments(self, parser):
        parser.add_argument("--host", default=settings.CONSOLE_HOST)
        parser.add_argument("--port", type=int, default=settings.CONSOLE_PORT)
        parser.add_argument("--fleet", type=Path, default=settings.CONSOLE_FLEET, help="the fleet file (CONSOLE_FLEET)")

    def handle(self, *args, host: str, port: int, fleet: Path, **options):
        if not settings.WAKER_KEY:
            raise CommandError(NO_KEY)
        fleet = fleet.resolve()
        try:
            check_port_free(host, port, setting="CONSOLE_PORT")
            personas = load_fleet(fleet)
        except (PortInUse, FleetInvalid) as error:
            raise CommandError(str(error)) from None
        # httpx logs each request at INFO: a read of every persona every few seconds.
        logging.getLogger("httpx").setLevel(logging.WARNING)

        loop = event_loop()  # first: it installs the reactor daphne runs on

        from django.core.asgi import get_asgi_application

        served = console_fleet.standalone = ServiceFleet(personas, timeout_s=settings.CONSOLE_READ_TIMEOUT_S)
        listened = run_daphne(
            get_asgi_application(),
            server_name="console",
            host=host,
            port=port,
            on_ready=lambda: (served.start(loop, settings.CONSOLE_READ_EVERY_S), self._announce(host, port, fleet, len(personas))),
            on_stop=served.close,
        )
        if not listened:
            loop.run_until_complete(served.close())
            raise CommandError(f"Could not listen on {authority(host, port)}.")
        log.info("console stopped")
        sys.stdout.flush()

    def _announce(self, host: str, port: int, fleet: Path, count: int) -> None:
        self.stdout.write(
            f"Penelope console on http://{authority(host, port)}/console/ ({count} personas from {fleet})\n"
        )
        self.stdout.flush()
