"""`python manage.py waker`: run the waker. `python manage.py waker
export-kubernetes personas.json --namespace NAME [--output DIR] [--image
IMAGE] [--no-console]` writes the personas as Kubernetes manifests instead,
with the fleet console unless told not to (waker/kubernetes.py,
waker/kubernetes_console.py, docs/guides/SCALING.md).

One process, on its own port and key: it runs a worker (`manage.py serve`)
per persona as a child process, serves its API and `/w/{persona}/...` with
daphne, and runs each persona's policy, all on one asyncio event loop. First
SIGTERM/SIGINT stops every worker cleanly, then the waker; a second exits now
(the workers then get SIGTERM from the kernel, see `_stop_with_the_waker`).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from core.addresses import authority
from core.serving import PortInUse, check_port_free, event_loop, run_daphne, say_generated, write_new_key
from waker import kubernetes, kubernetes_console, socket_relay
from waker.personas import PersonasInvalid, load_personas

EXPORT_KUBERNETES = "export-kubernetes"

log = logging.getLogger("penelope.waker")


def ensure_waker_key(stdout, key_file: Path) -> None:
    """WAKER_KEY from the environment, else from `key_file`, else generated
    there; where it is kept is said once, never the key."""
    if settings.WAKER_KEY:
        return
    try:
        settings.WAKER_KEY = key_file.read_text().strip()
    except FileNotFoundError:
        pass
    if settings.WAKER_KEY:
        return
    settings.WAKER_KEY = write_new_key(key_file)
    say_generated(stdout, "WAKER_KEY", key_file)


class Command(BaseCommand):
    help = "Run the waker: a worker per persona, started on demand, stopped when idle, never under work."
    requires_system_checks = ()  # no models, no database: nothing for them to check

    def add_arguments(self, parser):
        # Without an action the command runs the waker, as it always has.
        parser.add_argument("action", nargs="?", choices=[EXPORT_KUBERNETES], help="export-kubernetes: write manifests")
        parser.add_argument("personas_file", nargs="?", type=Path, help="export-kubernetes: the personas file")
        parser.add_argument("--namespace", help="export-kubernetes: the namespace of every resource")
        parser.add_argument("--output", type=Path, help="export-kubernetes: the overlay's folder (else standard output)")
        parser.add_argument("--image", default=kubernetes.DEFAULT_IMAGE, help="export-kubernetes: the worker's image")
        parser.add_argument(
            "--domain", default=kubernetes.DEFAULT_DOMAIN, help="export-kubernetes: a sleepy persona's host is <name>.DOMAIN"
        )
        parser.add_argument(
            "--console",
            action=argparse.BooleanOptionalAction,
            default=True,
            help="export-kubernetes: the fleet console's Deployment too (the default), or not",
        )
        parser.add_argument("--host", default=settings.WAKER_HOST)
        parser.add_argument("--port", type=int, default=settings.WAKER_PORT)
        parser.add_argument("--personas", type=Path, default=settings.WAKER_PERSONAS, help="the personas file")

    def handle(self, *args, host: str, port: int, personas: Path, **options):
        if options["action"] == EXPORT_KUBERNETES:
            self.export_kubernetes(**options)
            return
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

        # After the reactor is installed: the supervisor and the proxy import Twisted.
        from waker import supervisor as supervision
        from waker.proxy import WakerApplication

        supervisor = supervision.running = supervision.Supervisor(loaded)
        listened = run_daphne(
            WakerApplication(get_asgi_application(), supervisor),
            server_name="waker",
            host=host,
            port=port,
            # Called only once the port is bound: no worker starts for a waker that cannot listen.
            on_ready=lambda: (supervisor.start(loop), self._announce(host, port, personas, len(loaded))),
            on_stop=supervisor.close,  # every worker stops before the waker does
            socket_open_wait_s=socket_relay.OPEN_WAIT_S + 5,  # a worker's CDP handshake may wait for its page
        )
        if not listened:
            loop.run_until_complete(supervisor.close())
            raise CommandError(f"Could not listen on {authority(host, port)}.")
        log.info("waker stopped")
        sys.stdout.flush()

    def export_kubernetes(
        self,
        *,
        personas_file: Path | None,
        namespace: str | None,
        output: Path | None,
        image: str,
        domain: str,
        console: bool,
        **options,
    ) -> None:
        if personas_file is None or not namespace:
            raise CommandError("export-kubernetes needs the personas file and --namespace NAME.")
        personas_file = personas_file.resolve()
        try:
            personas = kubernetes.read_personas(personas_file)
            files = kubernetes.export(personas, namespace=namespace, image=image, domain=domain)
            if console:
                key = kubernetes_console.sign_in_key(settings.WAKER_KEY, personas_file.parent / "waker.key")
                files = kubernetes_console.with_console(files, personas, namespace=namespace, image=image, key=key)
        except PersonasInvalid as error:
            raise CommandError(str(error)) from None
        for persona in personas:
            if persona.cluster_mode != persona.mode:
                self.stderr.write(
                    f"Persona {persona.name} is sleepy but has schedules: it runs always (one replica) on the "
                    "cluster, as nothing there could wake it for a fire (docs/guides/SCALING.md).\n"
                )
        if output is None:
            self.stdout.write(kubernetes.as_one_stream(files), ending="")
            return
        written = kubernetes.write(files, output)
        self.stderr.write(f"Wrote {len(written)} files to {output} (apply with: kubectl apply -k {output})\n")

    def _announce(self, host: str, port: int, personas: Path, count: int) -> None:
        self.stdout.write(
            f"Penelope waker on http://{authority(host, port)}/api/v1 ({count} personas from {personas})\n"
        )
        self.stdout.flush()
