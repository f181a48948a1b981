"""Settings of the waker (`manage.py waker`), all read from environment
variables: its own apps and routes only. The waker runs workers as child
processes; it imports no worker app, no database and no Playwright.

`manage.py` picks this module for the `waker` command (see manage.py).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from penelope_site.env import env_bool, env_float, env_int, env_str, front_door_settings, logging_settings

BASE_DIR = Path(__file__).resolve().parent.parent
# The waker's files (its key, each worker's log) are its user's only.
os.umask(0o077)

WAKER_HOST = env_str("WAKER_HOST", "127.0.0.1")
WAKER_PORT = env_int("WAKER_PORT", 5100)
# The key of the waker's own API. When unset, the one in `waker.key` beside the
# personas file is used; when that is missing too, `waker` generates one.
WAKER_KEY = env_str("WAKER_KEY")
# The personas, a JSON file read at start (docs/reference/WAKER_API.md).
WAKER_PERSONAS = Path(env_str("WAKER_PERSONAS", "./personas.json")).resolve()
# How often the waker reads each running worker's activity.
WAKER_POLL_S = env_float("WAKER_POLL_S", 2)
# A sleeping worker is started this many seconds before its next schedule's
# fire (its store's next-wake-at), and not stopped while one is due as soon.
WAKE_LEAD_S = env_float("WAKE_LEAD_S", 30)
# How often the waker reads a running worker's charged memory (its process
# tree's proportional set size), for the console.
WAKER_MEMORY_EVERY_S = env_float("WAKER_MEMORY_EVERY_S", 10)
# How long a console sign-in lasts.
CONSOLE_SESSION_S = env_float("CONSOLE_SESSION_S", 12 * 3600)
# A wrong key, on any route that takes one (the API, /w/..., the console),
# waits its turn for its refusal (core/wrong_keys.py); behind a TLS proxy
# whose header PROXY_SSL_HEADER names, the console's cookie is `Secure`.
KEY_REFUSAL_S, KEY_REFUSAL_QUEUE, SECURE_PROXY_SSL_HEADER = front_door_settings()
# How often an open console page refreshes itself.
CONSOLE_REFRESH_S = env_float("CONSOLE_REFRESH_S", 5)
# How long a worker may take to answer its health check after it is started.
WAKER_START_TIMEOUT_S = env_float("WAKER_START_TIMEOUT_S", 90)
# How long a worker has to stop after SIGTERM before it gets SIGKILL.
WAKER_STOP_GRACE_S = env_float("WAKER_STOP_GRACE_S", 30)
# Workers are forked from a template process that has imported what every
# worker imports (waker/template.py): a wake skips Python's imports. Off:
# each worker is started as a process of its own.
WAKER_FORK_WORKERS = env_bool("WAKER_FORK_WORKERS", True)
# Opens the waker's /api/v1/metrics without WAKER_KEY, for a scraper inside a private network.
WAKER_METRICS_PUBLIC = env_bool("WAKER_METRICS_PUBLIC", False)
# What each worker is started with (a child's DJANGO_SETTINGS_MODULE).
WORKER_SETTINGS_MODULE = "penelope_site.settings"

# Nothing the waker signs outlives the process: a random key per run.
SECRET_KEY = env_str("DJANGO_SECRET_KEY") or secrets.token_hex(32)
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = ["*"]
INSTALLED_APPS = ["waker", "console"]
# CommonMiddleware gives each answer its Content-Length.
MIDDLEWARE = ["django.middleware.common.CommonMiddleware"]
ROOT_URLCONF = "penelope_site.waker_urls"
# The console's pages (console/templates/); no context processor, no database.
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True}]
APPEND_SLASH = False
DATABASES: dict = {}
USE_TZ = True
# Log lines stamped in UTC, as the worker's (Django's default is America/Chicago).
TIME_ZONE = "UTC"
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("MAX_BODY_BYTES", 1024 * 1024)

LOGGING = logging_settings()
