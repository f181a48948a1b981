"""`python manage.py serve`: run the worker.

Migrations, recovery before the port opens, the browser and page main, the
background loops and the API under daphne, all on one asyncio event loop.
First SIGTERM/SIGINT stops cleanly (the browser is closed); a second exits now.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import signal
import sys

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from penelope_site import store_lock

log = logging.getLogger("penelope.worker")


def ensure_key(stdout) -> None:
    """Generate PENELOPE_KEY when neither the environment nor the store has one."""
    if settings.PENELOPE_KEY:
        return
    key = secrets.token_urlsafe(32)
    fd = os.open(settings.KEY_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(key + "\n")
    settings.PENELOPE_KEY = key
    stdout.write(f"Generated PENELOPE_KEY (kept in {settings.KEY_FILE}): {key}\n")
    stdout.flush()


class Command(BaseCommand):
    help = "Run the Penelope worker: browser, background loops and the HTTP API."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=settings.PENELOPE_HOST)
        parser.add_argument("--port", type=int, default=settings.PENELOPE_PORT)

    def handle(self, *args, host: str, port: int, **options):
        try:
            self._store_lock = store_lock.acquire()
        except store_lock.StoreInUse as error:
            raise CommandError(str(error)) from None
        call_command("migrate", interactive=False, verbosity=0)
        ensure_key(self.stdout)

        # daphne installs Twisted's asyncio reactor on import; its loop is the
        # one everything runs on.
        import daphne.server
        from twisted.internet import defer, reactor

        from penelope_site.asgi import application
        from worker.setup import build_runtime

        loop = reactor._asyncioEventloop
        asyncio.set_event_loop(loop)
        runtime = build_runtime()
        try:
            loop.run_until_complete(runtime.start())
        except Exception as error:
            loop.run_until_complete(runtime.stop())
            raise CommandError(str(error)) from None

        server = daphne.server.Server(
            application=application,
            endpoints=[f"tcp:port={port}:interface={host}"],
            signal_handlers=False,
            verbosity=0,
            ready_callable=lambda: None,
        )
        stopping = []

        def request_stop(signum: int) -> None:
            if stopping:
                log.warning("second signal: exiting now")
                os._exit(1)
            stopping.append(signum)
            log.info("stopping (signal %s)", signum)
            reactor.stop()

        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, request_stop, signum)
        reactor.addSystemEventTrigger(
            "before", "shutdown", lambda: defer.Deferred.fromFuture(loop.create_task(runtime.stop()))
        )
        reactor.callWhenRunning(self._announce, server, host, port)
        server.run()
        if not server.listening_addresses:
            raise CommandError(f"Could not listen on {host}:{port}.")
        log.info("worker stopped")
        sys.stdout.flush()

    def _announce(self, server, host: str, port: int) -> None:
        self.stdout.write(f"Penelope worker on http://{host}:{port}/api/v1 (store {settings.STORE_DIR})\n")
        self.stdout.flush()
