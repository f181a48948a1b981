"""`manage.py deliver_webhooks [--loop]`: send due webhook attempts.

Safe beside a live worker: each attempt is claimed in the database by this
process's deliverer before it is sent, and only the claim's owner records
its outcome (`Owner`, jobs/delivery.py). With `--loop`, SIGTERM or SIGINT stops it once
the sends in hand are sent and recorded; a second signal exits at once.
"""

import asyncio

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from core.loops import run_until_signalled
from jobs.delivery import Deliverer
from jobs.webhooks import BadSecret, signers, webhook_client


class Command(BaseCommand):
    help = "Send the webhook attempts that are due, once or until stopped (--loop)."

    def add_arguments(self, parser):
        parser.add_argument("--loop", action="store_true", help="keep delivering as attempts come due")

    def handle(self, *args, loop: bool, **options):
        if not settings.PENELOPE_KEY:
            raise CommandError("No key to sign with: set PENELOPE_KEY as the worker has it (or keep it in store/key).")
        if not settings.WEBHOOK_SECRET:
            raise CommandError(
                "No webhook secret to sign with: set WEBHOOK_SECRET as the worker has it (or keep it in store/webhook_secret)."
            )
        try:
            signers(settings.WEBHOOK_SECRET)
        except BadSecret as error:
            raise CommandError(str(error)) from None
        deliverer = Deliverer()
        if loop:
            run_until_signalled(deliverer.run_forever, deliverer.stop)
            return
        sent = asyncio.run(self._once(deliverer))
        self.stdout.write(f"sent {sent} webhook attempts")

    async def _once(self, deliverer: Deliverer) -> int:
        async with webhook_client() as client:
            return await deliverer.run_once(client)
