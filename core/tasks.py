"""Background tasks on the worker's event loop, none of which dies silently.

`spawn` keeps each task referenced until it ends and logs its exception,
naming what the task was about (a job, a page, a webhook attempt): a task
that fails where nobody awaits it otherwise leaves only asyncio's "Task
exception was never retrieved", long after, with nothing to say what was lost.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from core.errors import Refusal

log = logging.getLogger("penelope.tasks")

_running: set[asyncio.Task] = set()


def spawn(coro: Coroutine[Any, Any, Any], *, about: str) -> asyncio.Task:
    """Run `coro` as a task of its own; `about` names what it concerns ("job 5b1d…")."""
    task = asyncio.get_running_loop().create_task(coro, name=about)
    _running.add(task)
    task.add_done_callback(_ended)
    return task


def _ended(task: asyncio.Task) -> None:
    _running.discard(task)
    if task.cancelled():
        return
    error = task.exception()  # retrieved here, so asyncio never reports it unread
    if error is None or isinstance(error, Refusal):
        return  # an answer (a refusal is one), for whoever awaits it
    log.error("background task for %s failed", task.get_name(), exc_info=error)
