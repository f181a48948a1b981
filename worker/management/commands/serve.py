"""`python manage.py serve`: run the worker.

Migrations, recovery before the port opens, the browser and page main, the
background loops and the API under daphne, all on one asyncio event loop.
First SIGTERM/SIGINT stops cleanly (the browser is closed); a second exits now.
A browser that cannot be launched again (BROWSER_RELAUNCH_ATTEMPTS) stops the
worker the same way, and it exits 1 for its supervisor to start it again.
"""

from __future__ import annotations

import gc
import logging
import sys

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from core import store_lock
from core.addresses import authority
from core.db_thread import on_db_thread, watch_connections
from core.serving import (
    PortInUse,
    check_port_free,
    event_loop,
    run_daphne,
    say_generated,
    stop_serving,
    write_new_key,
)
from core.start_clock import StartClock
from jobs.webhooks import BadSecret, new_secret, signers
from media_store import uploads
from penelope_site.settings import secret_key_from, tighten_store

log = logging.getLogger("penelope.worker")


def ensure_key(stdout) -> None:
    """Generate PENELOPE_KEY when neither the environment nor the store has
    one; Django's SECRET_KEY is derived from it from this first start on.
    Where it is kept is said, never the key: the output goes to logs."""
    if settings.PENELOPE_KEY:
        return
    key = settings.PENELOPE_KEY = write_new_key(settings.KEY_FILE)
    if not settings.SECRET_KEY_FROM_ENV:
        settings.SECRET_KEY = secret_key_from(key)
    say_generated(stdout, "PENELOPE_KEY", settings.KEY_FILE)


class BadReadKeys(ValueError):
    """PENELOPE_READ_KEYS holds a key too short to guess at, or a full key."""


def check_read_keys() -> None:
    """Each read key is at least 32 characters, and none is a full key."""
    for number, key in enumerate(settings.PENELOPE_READ_KEYS, start=1):
        if len(key) < 32:
            raise BadReadKeys(
                f"PENELOPE_READ_KEYS: key {number} has {len(key)} characters; each needs at least 32 "
                "(`python3 -c 'import secrets; print(secrets.token_urlsafe(32))'` makes one)."
            )
        if key in settings.PENELOPE_KEY.split():
            raise BadReadKeys(f"PENELOPE_READ_KEYS: key {number} is also in PENELOPE_KEY; a read key must be a key of its own.")


def ensure_webhook_secret(stdout) -> None:
    """Generate WEBHOOK_SECRET when neither the environment nor the store has
    one, and refuse to start with a malformed one."""
    if not settings.WEBHOOK_SECRET:
        settings.WEBHOOK_SECRET = write_new_key(settings.WEBHOOK_SECRET_FILE, new_secret())
        say_generated(stdout, "WEBHOOK_SECRET", settings.WEBHOOK_SECRET_FILE)
    try:
        signers(settings.WEBHOOK_SECRET)
    except BadSecret as error:
        raise CommandError(str(error)) from None


class Command(BaseCommand):
    help = "Run the Penelope worker: browser, background loops and the HTTP API."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=settings.PENELOPE_HOST)
        parser.add_argument("--port", type=int, default=settings.PENELOPE_PORT)

    def handle(self, *args, host: str, port: int, **options):
        clock = StartClock("Python, Django and the apps")
        # Here, not at the top: Django imports every command to list them, and the framework loads Playwright.
        from plugins.framework import PluginsInvalid, families

        try:
            check_read_keys()
            check_port_free(host, port, setting="PENELOPE_PORT")
            families()  # a typo in PENELOPE_PLUGINS is said now, not at the first call
            self._store_lock = store_lock.acquire()
        except (BadReadKeys, PortInUse, PluginsInvalid, store_lock.StoreInUse) as error:
            raise CommandError(str(error)) from None
        tighten_store()
        # Everything that builds a URL to this worker (the demo family) reads these.
        settings.PENELOPE_HOST, settings.PENELOPE_PORT = host, port
        watch_connections()
        clock.lap("the plugins and the store's lock")

        loop = event_loop()  # first: it installs the reactor daphne and Playwright share

        # After the reactor is installed: the application and the runtime import Twisted.
        from penelope_site.asgi import build_application
        from worker.setup import build_runtime

        runtime = build_runtime()
        application = build_application(runtime)
        runtime.stop_serving = stop_serving
        clock.lap("daphne and the runtime")

        async def prepare() -> None:
            """The store's schema and the keys, while the browser launches."""
            await on_db_thread(call_command)("migrate", interactive=False, verbosity=0)
            ensure_key(self.stdout)
            ensure_webhook_secret(self.stdout)

        try:
            loop.run_until_complete(runtime.start(clock, prepare=prepare))
        except Exception as error:
            loop.run_until_complete(runtime.stop())
            raise CommandError(str(error)) from None
        finally:
            # manage.py turned the collector off for the start. What the start
            # made lives as long as the worker: frozen, no pass scans it again
            # (with the start's own few cyclic leftovers, about a thousand
            # objects: a collection first would cost 50 ms of the wake).
            gc.freeze()
            gc.enable()
        self.clock = clock

        from browser.pages import page_of_path  # after the reactor is installed, with the runtime's modules

        listened = run_daphne(
            application, host=host, port=port, on_ready=lambda: self._announce(host, port), on_stop=runtime.stop,
            page_of=page_of_path, streams={uploads.UPLOAD_PATH: uploads.chooser(runtime.wrong_keys)}, socket_close_wait_s=settings.CDP_CLOSE_WAIT_S,
            # A CDP client's handshake waits for its page's turn, up to PAGE_WAIT_S (cdp/sockets.py).
            socket_open_wait_s=settings.PAGE_WAIT_S + 5,
        )
        if not listened:
            raise CommandError(f"Could not listen on {authority(host, port)}.")
        if runtime.failure:
            raise CommandError(runtime.failure)
        log.info("worker stopped")
        sys.stdout.flush()

    def _announce(self, host: str, port: int) -> None:
        self.clock.lap("the port")
        log.info("worker %s", self.clock.said())
        self.stdout.write(f"Penelope worker on http://{authority(host, port)}/api/v1 (store {settings.STORE_DIR})\n")
        self.stdout.flush()
