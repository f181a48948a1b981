"""Settings of one Penelope worker, all read from environment variables.

Every variable has a default a newcomer can run on; durations accept decimals
so tests run the real schedules scaled down.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

from penelope_site.env import env_bool, env_float, env_floats, env_int, env_str, front_door_settings, logging_settings

BASE_DIR = Path(__file__).resolve().parent.parent


def secrets_token() -> str:
    """A random stand-in until the key exists (a fresh store before `serve`)."""
    return secrets.token_hex(32)


# --- The persona's store -----------------------------------------------------

# The store holds job parameters, results, callback URLs, the key and the
# browser's cookies: it is private to the user that runs the worker. Files
# this process creates are readable by that user only (umask 077).
os.umask(0o077)
STORE_DIR = Path(env_str("PENELOPE_STORE", "./store")).resolve()
STORE_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
MEDIA_DIR = STORE_DIR / "media"
# Where the browser writes downloads as they run (emptied at each launch).
DOWNLOADS_DIR = STORE_DIR / "downloads"
PROFILE_DIR = STORE_DIR / "profile"
KEY_FILE = STORE_DIR / "key"


def tighten_store() -> None:
    """Make an existing store private: directories 0700, files 0600 (the
    database, its journal, the key, media), as a new store is created.
    The browser profile's own files are Chromium's; its directory is closed."""
    for directory in (STORE_DIR, MEDIA_DIR, PROFILE_DIR, STORE_DIR / "deliverers"):
        if directory.is_dir():
            directory.chmod(0o700)
    files = [*STORE_DIR.glob("penelope.db*"), *STORE_DIR.glob("*.lock"), *STORE_DIR.glob("*.log"), KEY_FILE, STORE_DIR / "webhook_secret"]
    files += STORE_DIR.glob("credentials_key*")
    if MEDIA_DIR.is_dir():
        files += [entry for entry in MEDIA_DIR.iterdir() if entry.is_file()]
    for path in files:
        try:
            if stat.S_IMODE(path.stat().st_mode) & 0o077:
                path.chmod(0o600)
        except FileNotFoundError:
            pass


def is_sealing_key(text: str) -> bool:
    """Whether `text` is a credentials key: the urlsafe base64 of 32 bytes
    (credentials/sealing.py reads it)."""
    try:
        return len(base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)) == 32
    except ValueError:
        return False


def sealing_key_setting(name: str) -> str:
    """The variable `name`, empty or a credentials key; never its value in the error."""
    value = env_str(name)
    if value and not is_sealing_key(value):
        raise ValueError(
            f"{name} must be the urlsafe base64 of 32 random bytes; make one with: python3 -c "
            "'import base64, os; print(base64.urlsafe_b64encode(os.urandom(32)).decode())'"
        )
    return value


def _stored(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


# The bearer key and webhook signing key. `serve` generates one when neither
# the environment nor the store has it.
PENELOPE_KEY = env_str("PENELOPE_KEY") or _stored(KEY_FILE)
# Keys that may read and nothing else (core/auth.py), space-separated, each at
# least 32 characters: for a dashboard or a monitor.
PENELOPE_READ_KEYS = env_str("PENELOPE_READ_KEYS").split()
KEY_REFUSAL_S, KEY_REFUSAL_QUEUE, SECURE_PROXY_SSL_HEADER = front_door_settings()  # wrong keys' turns, a TLS proxy's header
# The Standard Webhooks signing secret (`whsec_` + base64), separate from the
# key so that a receiver never holds the API key; two, separated by a space,
# during a rotation. `serve` generates one when neither the environment nor
# the store has it.
WEBHOOK_SECRET_FILE = STORE_DIR / "webhook_secret"
WEBHOOK_SECRET = env_str("WEBHOOK_SECRET") or _stored(WEBHOOK_SECRET_FILE)
# The key that seals the persona's credentials (credentials/sealing.py): the
# urlsafe base64 of 32 random bytes. Unset, the worker makes one at first use
# in store/credentials_key (readable by its owner only) and says where, never
# the key. `manage.py credentials rotate-key` changes it: the file's at once;
# with this set, to CREDENTIALS_NEW_KEY, which the operator then puts here.
CREDENTIALS_KEY = sealing_key_setting("CREDENTIALS_KEY")
CREDENTIALS_NEW_KEY = sealing_key_setting("CREDENTIALS_NEW_KEY")

# --- The worker ----------------------------------------------------------------

PENELOPE_HOST = env_str("PENELOPE_HOST", "127.0.0.1")
PENELOPE_PORT = env_int("PENELOPE_PORT", 5000)
PENELOPE_BROWSER = env_str("PENELOPE_BROWSER")
PENELOPE_PROXY = env_str("PENELOPE_PROXY")
PENELOPE_HEADLESS = env_bool("PENELOPE_HEADLESS", True)
# Chromium's sandbox. Chromium refuses it as root; a non-root user in a
# container usually has no user namespaces for it, so the Containerfile turns
# it off (docs/guides/SCALING.md says what that gives up).
CHROMIUM_SANDBOX = env_bool("CHROMIUM_SANDBOX", os.geteuid() != 0)
PENELOPE_PLUGINS = [
    name.strip() for name in env_str("PENELOPE_PLUGINS", "plugins.web,plugins.demo").split(",") if name.strip()
]
PENELOPE_DEMO = env_bool("PENELOPE_DEMO", True)

MAX_PAGES = env_int("MAX_PAGES", 8)
# How long the worker says it must stay awake with nothing in flight
# (`stay_awake` in GET /api/v1/activity, core/awake.py): a persona's
# `idle_timeout_s`, set per persona by `waker export-kubernetes`.
IDLE_TIMEOUT_S = env_float("IDLE_TIMEOUT_S", 60)
# A schedule's fire due within this many seconds keeps the worker awake
# (`stay_awake`): the waker starts a sleeping worker this long before a fire.
WAKE_LEAD_S = env_float("WAKE_LEAD_S", 30)
MAX_JOBS = env_int("MAX_JOBS", 1000)
# Jobs that may wait in one page's queue (X-Queue-Timeout); one more answers 429.
QUEUE_MAX = env_int("QUEUE_MAX", 100)
# A pool page (opened for `any`) left idle this long is closed.
POOL_PAGE_IDLE_S = env_float("POOL_PAGE_IDLE_S", 300)
# The demo family's default pause between scrolls (demo/get-following's
# `pause_ms`); the suite's docs runner shortens it.
DEMO_PAUSE_MS = env_int("DEMO_PAUSE_MS", 250)
MEDIA_MAX_MB = env_float("MEDIA_MAX_MB", 4096)
# The largest file POST /api/v1/media takes (its own bound, not MAX_BODY_BYTES).
UPLOAD_MAX_MB = env_float("UPLOAD_MAX_MB", 100)
# The largest file a download (web/download, ctx.expect_download) may bring.
DOWNLOAD_MAX_MB = env_float("DOWNLOAD_MAX_MB", 500)
PAGE_WAIT_S = env_float("PAGE_WAIT_S", 30)
MAX_TTL_S = env_float("MAX_TTL_S", 600)
# A CDP client (cdp/sockets.py): the MiB of messages that may wait for it before it is closed (4008), and the seconds a close waits for it.
CDP_QUEUE_MB, CDP_CLOSE_WAIT_S = env_float("CDP_QUEUE_MB", 128), env_float("CDP_CLOSE_WAIT_S", 10)
WEBHOOK_ATTEMPTS_S = env_floats("WEBHOOK_ATTEMPTS_S", "0,60,300,600")
WEBHOOK_TIMEOUT_S = env_float("WEBHOOK_TIMEOUT_S", 10)
# How often a deliverer looks for due attempts it was not woken for (scheduled
# by another process, or left behind by a deliverer that ended).
WEBHOOK_POLL_S = env_float("WEBHOOK_POLL_S", 5)
# Opt-in: refuse callbacks into loopback, private, link-local and metadata addresses.
WEBHOOK_REFUSE_PRIVATE = env_bool("WEBHOOK_REFUSE_PRIVATE", False)
# Opt-in: the browser refuses connections into them too, every one through
# its egress proxy (browser/egress.py).
BROWSER_REFUSE_PRIVATE = env_bool("BROWSER_REFUSE_PRIVATE", False)
# Under BROWSER_REFUSE_PRIVATE, the exceptions (browser/allowance.py): name
# (80, 443), name:port, address, address:port or CIDR network, space-separated.
BROWSER_ALLOW = env_str("BROWSER_ALLOW")
MEDIA_TTL_S = env_float("MEDIA_TTL_S", 300)
MEDIA_AFTER_DELIVERY_S = env_float("MEDIA_AFTER_DELIVERY_S", 300)
SWEEP_S = env_float("SWEEP_S", 60)
PURGE_S = env_float("PURGE_S", 300)
# The largest answer a plugin action may give, in bytes of JSON: a larger one
# answers 507, for a plain call and a job alike, and nothing of it is kept.
RESULT_MAX_BYTES = env_int("RESULT_MAX_BYTES", 32 * 1024 * 1024)
# The time limit of a plugin action that declares none of its own.
ACTION_TIMEOUT_S = env_float("ACTION_TIMEOUT_S", 300)
# The tallest capture one screenshot takes, in CSS pixels: a full page (or an
# element) taller than it is captured in parts and joined, for one capture of
# a very tall page comes back blank below a point Chromium does not report.
SCREENSHOT_PART_HEIGHT = env_int("SCREENSHOT_PART_HEIGHT", 16384)
# A part's decoded pixels at most (64 Mi, about 256 MB as RGBA): a page or an
# element too wide for a part of that height is captured in lower parts, so
# no capture is one huge bitmap and Pillow's decompression-bomb limit is never reached.
SCREENSHOT_PART_PIXELS = env_int("SCREENSHOT_PART_PIXELS", 64 * 1024 * 1024)
# How long request-log rows are kept.
REQUEST_LOG_RETENTION_S = env_float("REQUEST_LOG_RETENTION_S", 7 * 24 * 3600)
# The request log: on by default; rows are buffered in memory and written in
# bulk every REQUEST_LOG_FLUSH_S, so logging adds no database write to a request.
REQUEST_LOG = env_bool("REQUEST_LOG", True)
REQUEST_LOG_FLUSH_S = env_float("REQUEST_LOG_FLUSH_S", 0.5)
# Rows the log keeps in memory while the database refuses writes; past it the
# oldest are dropped, counted, and the count is logged.
REQUEST_LOG_BUFFER_ROWS = env_int("REQUEST_LOG_BUFFER_ROWS", 50_000)
# Launching the browser and opening a tab, each bounded.
BROWSER_LAUNCH_TIMEOUT_S = env_float("BROWSER_LAUNCH_TIMEOUT_S", 60)
# A browser that stops (killed, out of memory) is launched again at once on
# the same profile; a launch that fails is tried again after
# BROWSER_RELAUNCH_S, doubling each time, BROWSER_RELAUNCH_ATTEMPTS times in
# all, and then the worker exits non-zero for its supervisor to start again.
BROWSER_RELAUNCH_S = env_float("BROWSER_RELAUNCH_S", 2)
BROWSER_RELAUNCH_ATTEMPTS = env_int("BROWSER_RELAUNCH_ATTEMPTS", 5)
# Recycling (off at 0): relaunch the browser when its charged memory (the
# proportional set size of its processes) passes BROWSER_MAX_MB, or after
# BROWSER_RECYCLE_AFTER_CALLS calls and jobs, at the first moment nothing runs
# on it. The memory is read every BROWSER_CHECK_S.
BROWSER_MAX_MB = env_float("BROWSER_MAX_MB", 0)
BROWSER_RECYCLE_AFTER_CALLS = env_int("BROWSER_RECYCLE_AFTER_CALLS", 0)
BROWSER_CHECK_S = env_float("BROWSER_CHECK_S", 10)
# How long a cancelled job's plugin gets to stop before its browser page is
# closed and opened again under the same name.
CANCEL_GRACE_S = env_float("CANCEL_GRACE_S", 5)
# How often the schedules' loop reads the store even when nothing woke it:
# a change made by `manage.py schedules` in another process takes effect
# within this. The API and the admin wake the loop at once.
SCHEDULE_CHECK_S = env_float("SCHEDULE_CHECK_S", 5)
# Schedules stored at once; one more answers 409. Each fires on its own, so
# this bounds the loop's work (an every-second schedule costs a job start a
# second: docs/guides/USING_JOBS.md).
SCHEDULES_MAX = env_int("SCHEDULES_MAX", 100)
# A schedule whose fires keep being refused logs one line at most this often,
# with the count of refusals since its last line (the row and the metrics
# count every one).
SCHEDULE_REFUSAL_LOG_S = env_float("SCHEDULE_REFUSAL_LOG_S", 60)
# Long-polls (`GET /api/v1/jobs/{id}?wait=S`) waiting at once; one more answers 503.
MAX_WAITERS = env_int("MAX_WAITERS", 1000)
# Event sockets (`/api/v1/events`) open at once; events queued for a slow one before its oldest are dropped;
# the events kept for `?since=` (core/event_log.py): the newest EVENT_LOG_KEEP (0: none), EVENT_LOG_KEEP_S at most.
MAX_EVENT_SOCKETS = env_int("MAX_EVENT_SOCKETS", 100)
EVENT_SOCKET_QUEUE = env_int("EVENT_SOCKET_QUEUE", 1000)
EVENT_LOG_KEEP = env_int("EVENT_LOG_KEEP", 10_000)
EVENT_LOG_KEEP_S = env_float("EVENT_LOG_KEEP_S", 3600)
# The live view of a page (live/): viewers at once per page, the frames a
# second each page's screencast sends at most, their JPEG quality (1 to 100)
# and their largest side in pixels (a larger viewport is scaled down).
LIVE_MAX_VIEWERS = env_int("LIVE_MAX_VIEWERS", 4)
LIVE_FPS = env_float("LIVE_FPS", 10)
LIVE_JPEG_QUALITY = env_int("LIVE_JPEG_QUALITY", 70)
LIVE_MAX_SIDE = env_int("LIVE_MAX_SIDE", 1600)
if not (LIVE_FPS > 0 and 1 <= LIVE_JPEG_QUALITY <= 100 and LIVE_MAX_VIEWERS >= 1 and LIVE_MAX_SIDE >= 64):
    raise ValueError(
        "LIVE_FPS must be more than 0, LIVE_JPEG_QUALITY 1 to 100, LIVE_MAX_VIEWERS at least 1 and LIVE_MAX_SIDE at least 64."
    )
# What a plugin call or job keeps for its author when it sends no X-Debug
# (plugins/debug.py): "off", "on-failure" (a screenshot, the HTML, console and
# network logs and a trace of a run that failed) or "always".
DEBUG_ARTIFACTS = env_str("DEBUG_ARTIFACTS", "off").strip().lower()
if DEBUG_ARTIFACTS not in ("off", "on-failure", "always"):
    raise ValueError(f"DEBUG_ARTIFACTS must be off, on-failure or always, not {DEBUG_ARTIFACTS!r}.")
# Prometheus metrics at /api/v1/metrics (core/metrics.py). On by default; off,
# every hook that counts is a no-op and the route answers 404.
METRICS_ENABLED = env_bool("METRICS_ENABLED", True)
# Opens /api/v1/metrics without the key, for a scraper inside a private network.
METRICS_PUBLIC = env_bool("METRICS_PUBLIC", False)

# The job event bus (core/events.py): channels' in-memory layer, for a worker is one process. Every listener
# drains its channel as events arrive; the capacity covers a burst published before a listener runs again,
# and group memberships last as long as the worker (channels' default drops them after a day).
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels.layers.InMemoryChannelLayer",
        "CONFIG": {"capacity": 10_000, "group_expiry": 100 * 365 * 24 * 3600},
    }
}

# --- Django ----------------------------------------------------------------------

def secret_key_from(key: str) -> str:
    """Django's SECRET_KEY for a worker whose key is `key`: derived, so that
    neither gives the other away."""
    return "penelope-" + hmac.new(key.encode(), b"django SECRET_KEY", hashlib.sha256).hexdigest()


# Without DJANGO_SECRET_KEY, derived from PENELOPE_KEY; `serve` derives it again
# when it generates the key on a fresh store, so it is never a public default.
SECRET_KEY_FROM_ENV = bool(env_str("DJANGO_SECRET_KEY"))
SECRET_KEY = env_str("DJANGO_SECRET_KEY") or secret_key_from((PENELOPE_KEY.split() or [""])[0] or secrets_token())
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = ["*"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "core",
    "browser",
    "plugins",
    "media_store",
    "credentials",
    "activity",
    "jobs",
    "schedules",
    "live",
    "cdp",
    "worker",
    "demo_site",
]

# Every request runs only async-native middleware; the admin's own chain
# (ADMIN_MIDDLEWARE) runs for /admin/ alone (core/auth.py, `AdminOnly`).
MIDDLEWARE = [
    "activity.middleware.ApiAccountingMiddleware",
    "core.auth.AdminOnly",
]
ADMIN_MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
# The admin's checks look for its middleware in MIDDLEWARE; it is in
# ADMIN_MIDDLEWARE, run by core.auth.AdminOnly for /admin/.
SILENCED_SYSTEM_CHECKS = ["admin.E408", "admin.E409", "admin.E410"]

ROOT_URLCONF = "penelope_site.urls"
# No ASGI_APPLICATION: `serve` builds the application around its runtime (penelope_site/asgi.py).
APPEND_SLASH = False

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": STORE_DIR / "penelope.db",
        "OPTIONS": {
            # WAL survives a process crash with every committed row; synchronous
            # NORMAL may lose the last transactions on a power loss. The log is
            # cut back to 1 MiB once checkpointed. (A new store is also made
            # with incremental auto-vacuum: core/db_thread.py, `new_store_vacuums`.)
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA journal_size_limit=1048576;",
            "transaction_mode": "IMMEDIATE",
            # How long a write waits for another process's write lock
            # (seconds): an operator's command, a backup.
            "timeout": env_float("DB_BUSY_TIMEOUT_S", 20),
        },
        # Tests that use Django's test database get a real file too.
        "TEST": {"NAME": STORE_DIR / "test-penelope.db"},
    }
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True
STATIC_URL = "static/"
# Static URLs under each request's root path, like the admin's links (core/static_urls.py).
STORAGES = {"default": {"BACKEND": "django.core.files.storage.FileSystemStorage"}}
STORAGES["staticfiles"] = {"BACKEND": "core.static_urls.RootPathStaticFilesStorage"}

# Bodies and headers have size limits: a plugin's parameters are small.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("MAX_BODY_BYTES", 1024 * 1024)

REST_FRAMEWORK = {
    # The API's views are `core.rest.ApiView`s: these are only what DRF
    # itself reads. No accounts on the API: the key is the client.
    "UNAUTHENTICATED_USER": None,
    "UNAUTHENTICATED_TOKEN": None,
    "EXCEPTION_HANDLER": "core.rest.envelope_handler",
    # `?format=` is a plugin parameter like any other, not a renderer choice.
    "URL_FORMAT_OVERRIDE": None,
    # Non-ASCII characters go out escaped, as the API has always sent them
    # (core/api.py renders every answer so, whatever this says; it is
    # kept for DRF's own renderers, e.g. its error pages).
    "UNICODE_JSON": False,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}

# The OpenAPI document served at /api/v1/schema.
SPECTACULAR_SETTINGS = {
    "TITLE": "Penelope worker API",
    "DESCRIPTION": (
        "One worker drives one persona's browser: plugin actions and primitives on named pages, leases, "
        "async jobs (polling or webhook), media downloads. Every error is the envelope "
        '`{"success": false, "error": "<sentence>", "page_id": <id or null>}`. See docs/reference/API.md.'
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # The bearer key's security scheme comes from core.schema.BearerKeyScheme.
    # Enums stay inline (`"success": true` is an enum of one): no enum components to name.
    # Each plugin action's parameters become a component (plugins.schema).
    "POSTPROCESSING_HOOKS": ["core.schema.without_enum_ids", "plugins.schema.action_parameters"],
    "ENUM_GENERATE_CHOICE_DESCRIPTION": False,
}

LOGGING = logging_settings()
