"""All the personas' workers of a running `manage.py waker`: one
`PersonaWorker` each (waker/persona_worker.py), their policy loops, the HTTP
client they share, and the supervisor of this process (`current()`) that the
waker's views and proxy ask for a persona's worker.
"""

from __future__ import annotations

import asyncio
import logging

import httpx

from core.wrong_keys import WrongKeys
from waker import metrics
from waker import process as processes
from waker.persona_worker import PersonaWorker
from waker.personas import Persona
from waker.readings import ACTIVITY_TIMEOUT_S

log = logging.getLogger("penelope.waker")


class Supervisor:
    """All the personas' workers and their policy loops."""

    def __init__(self, personas: list[Persona]):
        # Loopback only, so no proxy from the environment; a forwarded call may
        # run for minutes, so reads have no timeout of their own (the worker's
        # actions have theirs).
        self.http = httpx.AsyncClient(
            trust_env=False,
            timeout=httpx.Timeout(ACTIVITY_TIMEOUT_S, read=None),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=20),
        )
        # Where workers are forked from (waker/template.py), when WAKER_FORK_WORKERS is on.
        self.template = processes.template()
        self.workers = {persona.name: PersonaWorker(persona, self.http, self.template) for persona in personas}
        metrics.known(self.workers)
        self._tasks: list[asyncio.Task[None]] = []
        self.key_guard = WrongKeys()  # wrong keys, on every route that takes one (core/wrong_keys.py)

    def get(self, name: str) -> PersonaWorker | None:
        return self.workers.get(name)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start the template and the policy loops (an `always` worker starts in
        its first step, forked once the template has imported)."""
        if self.template is not None:
            self._tasks.append(loop.create_task(self.template.start(), name="the worker template"))
        self._tasks += [
            loop.create_task(worker.run_policy(), name=f"policy {name}") for name, worker in self.workers.items()
        ]

    async def close(self) -> None:
        """Stop the policy loops, then every worker, all at once."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        results = await asyncio.gather(*(worker.close() for worker in self.workers.values()), return_exceptions=True)
        for worker, result in zip(self.workers.values(), results, strict=True):
            if isinstance(result, Exception):
                log.error("persona %s: the worker did not stop cleanly: %s", worker.persona.name, result)
        if self.template is not None:
            await self.template.close()
        await self.http.aclose()


# The supervisor of the running `manage.py waker`, for its views and proxy.
running: Supervisor | None = None


def current() -> Supervisor:
    if running is None:
        raise RuntimeError("The waker's supervisor is not running in this process.")
    return running
