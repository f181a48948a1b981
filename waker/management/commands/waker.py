"""`python manage.py waker`: run the waker.

One process, on its own port and key: it runs a worker (`manage.py serve`)
per persona as a child process, serves its API and `/w/{persona}/...` with
daphne, and runs each persona's policy, all on one asyncio event loop. First
SIGTERM/SIGINT stops every worker cleanly, then the waker; a second exits now
(the workers then get SIGTERM from the kernel, see `_stop_with_the_waker`).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from core.serving import PortInUse, check_port_free, event_loop, run_daphne, write_new_key
from waker.personas import PersonasInvalid, load_personas

log = logging.getLogger("penelope.waker")


def ensure_waker_key(stdout, key_file: Path) -> None:
    """WAKER_KEY from the environment, else from `key_file`, else generated there and printed once."""
    if settings.WAKER_KEY:
        return
    try:
        settings.WAKER_KEY = key_file.read_text().strip()
    except FileNotFoundError:
        pass
    if settings.WAKER_KEY:
        return
    key = settings.WAKER_KEY = write_new_key(key_file)
    stdout.write(f"Generated WAKER_KEY (kept in {key_file}): {key}\n")
    stdout.flush()


class Command(BaseCommand):
    help = "Run the waker: a worker per persona, started on demand, stopped when idle, never under work."
    requires_system_checks = ()  # no models, no database: nothing for them to check

    def add_arguments(self, parser):
        parser.add_argument("--host", default=settings.WAKER_HOST)
        parser.add_argument("--port", type=int, default=settings.WAKER_PORT)
        parser.add_argument("--personas", type=Path, default=settings.WAKER_PERSONAS, help="the personas file")

    def handle(self, *args, host: str, port: int, personas: Path, **options):
        personas = personas.resolve()
        try:
            check_port_free(host, port, setting="WAKER_PORT")
            loaded = load_personas(personas, waker_port=port)
        except (PortInUse, PersonasInvalid) as error:
            raise CommandError(str(error)) from None
        ensure_waker_key(self.stdout, personas.parent / "waker.key")
        # httpx logs each request at INFO: for the waker that is an activity
        # read per worker every WAKER_POLL_S, which would bury its own log.
        logging.getLogger("httpx").setLevel(logging.WARNING)

        loop = event_loop()  # first: it installs the reactor daphne runs on

        from django.core.asgi import get_asgi_application

        from waker import supervisor as supervision
        from waker.proxy import WakerApplication

        supervisor = supervision.running = supervision.Supervisor(loaded)
        listened = run_daphne(
            WakerApplication(get_asgi_application(), supervisor),
            host=host,
            port=port,
            # Called only once the port is bound: no worker starts for a waker that cannot listen.
            on_ready=lambda: (supervisor.start(loop), self._announce(host, port, personas, len(loaded))),
            on_stop=supervisor.close,  # every worker stops before the waker does
        )
        if not listened:
            loop.run_until_complete(supervisor.close())
            raise CommandError(f"Could not listen on {host}:{port}.")
        log.info("waker stopped")
        sys.stdout.flush()

    def _announce(self, host: str, port: int, personas: Path, count: int) -> None:
        self.stdout.write(f"Penelope waker on http://{host}:{port}/api/v1 ({count} personas from {personas})\n")
        self.stdout.flush()
