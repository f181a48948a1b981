#!/usr/bin/env python
"""Django's command-line entry point: the worker's commands, and the waker's.

`manage.py waker` runs with the waker's own settings
(penelope_site/waker_settings.py: its apps only); every other command with
the worker's. A DJANGO_SETTINGS_MODULE of your own is kept.
"""
import os
import sys

WORKER_SETTINGS = "penelope_site.settings"
WAKER_SETTINGS = "penelope_site.waker_settings"


def main() -> None:
    wanted = WAKER_SETTINGS if sys.argv[1:2] == ["waker"] else WORKER_SETTINGS
    if os.environ.get("DJANGO_SETTINGS_MODULE", "") in ("", WORKER_SETTINGS, WAKER_SETTINGS):
        os.environ["DJANGO_SETTINGS_MODULE"] = wanted
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
