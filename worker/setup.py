"""Wires the worker's pieces into one runtime: the only module that knows them all."""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.conf import settings

from worker.runtime import Loop, Runtime


async def load_plugins() -> None:
    """Import every family in PENELOPE_PLUGINS now, so a typo fails the start."""
    from plugins.framework import families

    families()


async def recover_jobs() -> None:
    """Before the port opens: jobs caught running become interrupted."""
    from jobs.service import recover

    await sync_to_async(recover)()


async def sweep_jobs() -> None:
    from jobs.service import sweep

    await sync_to_async(sweep)()


def build_runtime() -> Runtime:
    from jobs import service as job_service
    from jobs.delivery import Deliverer

    runtime = Runtime()
    runtime.startup_steps.append(load_plugins)
    runtime.startup_steps.append(recover_jobs)
    deliverer = Deliverer()
    job_service.on_webhook_ready.append(deliverer.notify)
    runtime.services.append(deliverer.run_forever)
    runtime.loops.append(Loop("job sweep", sweep_jobs, settings.SWEEP_S))
    runtime.shutdown_steps.append(job_service.cancel_running)
    return runtime
