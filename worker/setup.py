"""Wires the worker's pieces into one runtime: the only module that knows them all."""

from __future__ import annotations

from worker.runtime import Runtime


async def load_plugins() -> None:
    """Import every family in PENELOPE_PLUGINS now, so a typo fails the start."""
    from plugins.framework import families

    families()


def build_runtime() -> Runtime:
    runtime = Runtime()
    runtime.startup_steps.append(load_plugins)
    return runtime
