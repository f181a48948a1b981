"""What the worker's Python holds once it has imported what it serves with,
by package: `python -m bench.import_profile STORE` prints JSON.

Run in a process of its own, on the worker's settings, it does what `serve`
does before it opens its port, stage by stage (Django's settings and apps,
the URLs with every view, Playwright, daphne and Twisted), and measures
after each the memory Python's allocator traced (tracemalloc) and the
process's anonymous memory; then the traced memory by the package that
allocated it."""

from __future__ import annotations

import json
import os
import sys
import sysconfig
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MB = 1024 * 1024


def package_of(filename: str) -> str:
    """The installed package, the project's app, or `stdlib` a file belongs to."""
    if filename.startswith("<frozen importlib"):
        return "(modules' code, as imported)"
    path = Path(filename)
    if "site-packages" in path.parts:
        return path.parts[path.parts.index("site-packages") + 1].split(".")[0].removesuffix(".py")
    try:
        return path.relative_to(ROOT).parts[0].removesuffix(".py")
    except ValueError:
        pass
    return "stdlib" if filename.startswith(sysconfig.get_paths()["stdlib"]) else "(other)"


def main() -> None:
    tracemalloc.start()
    sys.path.insert(0, str(ROOT))
    os.environ["DJANGO_SETTINGS_MODULE"] = "penelope_site.settings"
    os.environ["PENELOPE_STORE"] = sys.argv[1]
    from core.procfs import anonymous

    stages = []

    def stage(name: str) -> None:
        stages.append({"stage": name, "traced_mb": tracemalloc.get_traced_memory()[0] / MB,
                       "anonymous_mb": anonymous(os.getpid()) / MB})

    stage("the interpreter")
    import django

    django.setup()
    stage("Django's settings and the apps")
    import penelope_site.urls  # noqa: F401  every route, every view

    stage("the URLs and every view")
    import playwright.async_api  # noqa: F401

    stage("Playwright")
    import worker.management.commands.serve  # noqa: F401  daphne, Twisted, the runtime

    stage("daphne, Twisted and the runtime")
    by_package: dict[str, float] = {}
    for statistic in tracemalloc.take_snapshot().statistics("filename"):
        package = package_of(statistic.traceback[0].filename)
        by_package[package] = by_package.get(package, 0.0) + statistic.size / MB
    top = dict(sorted(by_package.items(), key=lambda item: -item[1]))
    print(json.dumps({"stages": stages, "packages": top}))


if __name__ == "__main__":
    main()
