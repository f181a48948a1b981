#!/usr/bin/env python
"""Django's command-line entry point: the worker's commands, the waker's and
the console's.

`manage.py waker` runs with the waker's own settings
(penelope_site/waker_settings.py: its apps only), `manage.py console` with
the console's (penelope_site/console_settings.py), every other command with
the worker's. A DJANGO_SETTINGS_MODULE of your own is kept.
"""
import gc
import os
import sys

WORKER_SETTINGS = "penelope_site.settings"
WAKER_SETTINGS = "penelope_site.waker_settings"
CONSOLE_SETTINGS = "penelope_site.console_settings"
SETTINGS_OF = {"waker": WAKER_SETTINGS, "console": CONSOLE_SETTINGS}


def main() -> None:
    if sys.argv[1:2] == ["serve"]:
        # The worker's start allocates much and frees little, so the
        # collector's passes during its imports only cost time: `serve`
        # turns it back on once started, with what the start made frozen
        # (docs/BENCHMARKS.md, issue 46).
        gc.disable()
    wanted = SETTINGS_OF.get(sys.argv[1] if len(sys.argv) > 1 else "", WORKER_SETTINGS)
    if os.environ.get("DJANGO_SETTINGS_MODULE", "") in ("", WORKER_SETTINGS, *SETTINGS_OF.values()):
        os.environ["DJANGO_SETTINGS_MODULE"] = wanted
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
