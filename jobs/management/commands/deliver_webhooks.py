"""`manage.py deliver_webhooks [--loop]`: send due webhook attempts.

Safe beside a live worker: each attempt is claimed in the database before it
is sent, so no attempt goes out twice because two processes saw it due.
"""

import asyncio

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from jobs.delivery import Deliverer, webhook_client


class Command(BaseCommand):
    help = "Send the webhook attempts that are due, once or until stopped (--loop)."

    def add_arguments(self, parser):
        parser.add_argument("--loop", action="store_true", help="keep delivering as attempts come due")

    def handle(self, *args, loop: bool, **options):
        if not settings.PENELOPE_KEY:
            raise CommandError("No key to sign with: set PENELOPE_KEY as the worker has it (or keep it in store/key).")
        deliverer = Deliverer()
        if loop:
            try:
                asyncio.run(deliverer.run_forever())
            except KeyboardInterrupt:
                pass
            return
        sent = asyncio.run(self._once(deliverer))
        self.stdout.write(f"sent {sent} webhook attempts")

    async def _once(self, deliverer: Deliverer) -> int:
        async with webhook_client() as client:
            return await deliverer.run_once(client)
