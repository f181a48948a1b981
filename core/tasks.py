"""Background tasks on the worker's event loop, none of which dies silently.

`Tasks.spawn` keeps each task referenced until it ends (the loop itself
holds only weak references) and logs its exception, naming what the task
was about (a job, a page, a webhook attempt): a task that fails where nobody
awaits it otherwise leaves only asyncio's "Task exception was never
retrieved", long after, with nothing to say what was lost. The worker's
runtime owns one `Tasks` (worker/runtime.py) and hands it to what spawns;
an object built on its own (a test's, a command's) makes its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from core.errors import Refusal

log = logging.getLogger("penelope.tasks")


class Tasks:
    def __init__(self) -> None:
        self.running: set[asyncio.Task] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any], *, about: str) -> asyncio.Task:
        """Run `coro` as a task of its own; `about` names what it concerns ("job 5b1d…")."""
        task = asyncio.get_running_loop().create_task(coro, name=about)
        self.running.add(task)
        task.add_done_callback(self._ended)
        return task

    def _ended(self, task: asyncio.Task) -> None:
        self.running.discard(task)
        if task.cancelled():
            return
        error = task.exception()  # retrieved here, so asyncio never reports it unread
        if error is None or isinstance(error, Refusal):
            return  # an answer (a refusal is one), for whoever awaits it
        log.error("background task for %s failed", task.get_name(), exc_info=error)
