"""Settings of the console run on its own (`manage.py console`): the waker's
(penelope_site/waker_settings.py), with the console's routes only, its
address and its fleet file. On Kubernetes it is its own Deployment, and
reads each persona through its Service (console/fleet_http.py).

`manage.py` picks this module for the `console` command (see manage.py).
"""

from __future__ import annotations

from pathlib import Path

from penelope_site.env import env_float, env_int, env_str
from penelope_site.waker_settings import *  # noqa: F403 - the waker's settings, then the console's own

INSTALLED_APPS = ["console"]
ROOT_URLCONF = "penelope_site.console_urls"

CONSOLE_HOST = env_str("CONSOLE_HOST", "127.0.0.1")
CONSOLE_PORT = env_int("CONSOLE_PORT", 5200)
# The personas and how to reach them, a JSON file read at start (console/fleet_file.py).
CONSOLE_FLEET = Path(env_str("CONSOLE_FLEET", "./fleet.json")).resolve()
# How long one read of a worker may take, and how often every persona is
# read while no page asks (0: only when a page asks).
CONSOLE_READ_TIMEOUT_S = env_float("CONSOLE_READ_TIMEOUT_S", 5)
CONSOLE_READ_EVERY_S = env_float("CONSOLE_READ_EVERY_S", 30)
