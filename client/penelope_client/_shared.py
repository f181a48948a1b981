"""What the sync and async clients share: the routes, the headers, and reading
an answer. No I/O here, so each twin is only its calls."""

from __future__ import annotations

import mimetypes
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import httpx

from penelope_client.errors import error_for

API = "/api/v1"
# A plain call holds its connection until the action ends: ACTION_TIMEOUT_S
# (300 s) at most by default, after waiting up to PAGE_WAIT_S (30 s) for the page.
DEFAULT_TIMEOUT_S = 360.0
# The worker holds a long-poll at most 60 s; a longer wait is several of them.
LONG_POLL_S = 60.0
# How much longer than its `wait` a long-poll may take before the client gives up on it.
LONG_POLL_MARGIN_S = 30.0
# A lease is renewed each time a third of its ttl has passed: when one renewal
# fails (a network blip), the next is still in time.
RENEW_FRACTION = 1 / 3
# A long-poll refused (MAX_WAITERS) or answered `running` before its wait was
# over is tried again after this long, growing: never a loop without a pause.
POLL_BACKOFF_S = (0.5, 5.0)

Answer = dict[str, Any]


def api_root(base_url: str) -> str:
    """`http://host:port` (or `.../w/{persona}`) from what a user may paste,
    with or without `/api/v1` and a trailing slash."""
    root = base_url.rstrip("/")
    return root.removesuffix(API)


def authorization(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def segment(name: str) -> str:
    """A page id or a job id as one path segment: a `/` in it cannot reach another route."""
    return quote(name, safe="")


def plugin_path(page: str, route: str) -> str:
    """`/{page}/plugin/{family}/{action}` for `route` = "family/action"."""
    return f"/{segment(page)}/plugin/{quote(route, safe='/')}"


def job_headers(
    ttl: float | None, callback: str | None, idempotency_key: str | None, queue_timeout: float | None = None,
    priority: int | None = None, retry: int | None = None, retry_backoff: float | None = None,
    notify_url: str | None = None,
) -> dict[str, str]:
    """The headers that make a plugin call a job: exactly one of a polling
    `ttl` and a webhook `callback` (without either it would run as a plain
    call); `queue_timeout` lets it wait that long for a busy page, `priority`
    (0-9) orders it among the waiting; `retry` (1-10) more attempts after a
    transient failure, the first `retry_backoff` seconds later; `notify_url`
    is told when its plugin asks a person (X-Notify-Url)."""
    if (ttl is None) == (callback is None):
        raise ValueError("A job is delivered one way: give ttl= (polling) or callback= (webhook), not both or neither.")
    if ttl is not None:  # plain decimals: the header takes no exponent
        headers = {"X-Result-Ttl": f"{ttl:f}".rstrip("0").rstrip(".")}
    else:
        headers = {"X-Callback-Url": str(callback)}
    if idempotency_key is not None:
        headers["Idempotency-Key"] = idempotency_key
    if queue_timeout is not None:
        headers["X-Queue-Timeout"] = f"{queue_timeout:f}".rstrip("0").rstrip(".")
    if priority is not None:
        headers["X-Priority"] = str(priority)
    if retry is not None:
        headers["X-Retry"] = str(retry)
    if retry_backoff is not None:
        headers["X-Retry-Backoff"] = f"{retry_backoff:f}".rstrip("0").rstrip(".")
    if notify_url is not None:
        headers["X-Notify-Url"] = str(notify_url)
    return headers


def live_path(page: str) -> str:
    return f"/{segment(page)}/live"


def absolute_live(root: str, answer: Answer) -> Answer:
    """A live link's answer with its `url` made absolute on the client's base:
    through the waker, under the persona's path, where it is carried too."""
    return {**answer, "url": root + answer["url"]}


def human_of(root: str, job: Answer) -> Answer | None:
    """A job's question to a person (`human`, with `live_url` absolute), or None."""
    human = job.get("human")
    return {**human, "live_url": root + human["live_url"]} if human else None


def lease_header(lease_id: str | None) -> dict[str, str]:
    return {"X-Lease": lease_id} if lease_id else {}


def wait_value(seconds: float) -> str | None:
    """`?wait=` for a long-poll of `seconds` (at most LONG_POLL_S), or None when
    there is no time left for one."""
    seconds = round(min(seconds, LONG_POLL_S), 3)
    return f"{seconds:.3f}" if seconds > 0 else None


def answered_early(asked_at: float, wait: str) -> bool:
    """Whether a long-poll answered well before its `wait` ran out, with the job
    still running: refused, or not held by whatever answered it."""
    return time.monotonic() - asked_at < 0.9 * float(wait)


def job_list_params(
    state: str | None, page_id: str | None, plugin: str | None, limit: int | None, schedule: str | None = None
) -> dict[str, str]:
    given = {"state": state, "page_id": page_id, "plugin": plugin, "limit": limit, "schedule": schedule}
    return {name: str(value) for name, value in given.items() if value is not None}


def socket_root(root: str) -> str:
    """The client's base as a WebSocket's: `ws://` for http, `wss://` for
    https, its path (a waker's `/w/{persona}`) kept."""
    scheme, _, rest = root.partition("://")
    socket_scheme = {"http": "ws", "https": "wss"}.get(scheme, scheme)
    return f"{socket_scheme}://{rest}"


def events_url(root: str, job: str | None, page: str | None, since: int | None = None) -> str:
    """`ws://…/api/v1/events` (`wss://` for https), with its filters and the
    id of the last event seen (`since`), to catch up from."""
    given = (("job", job), ("page", page), ("since", since))
    query = urlencode({name: value for name, value in given if value is not None})
    return f"{socket_root(root)}{API}/events" + (f"?{query}" if query else "")


def cdp_path(page: str) -> str:
    return f"/{segment(page)}/cdp"


def cdp_body(ttl: float | None) -> dict[str, float]:
    """POST /api/v1/{page}/cdp's body: without `ttl`, the token lasts as long as the lease has left."""
    return {} if ttl is None else {"ttl": ttl}


def cdp_url(root: str, answer: Answer) -> str:
    """The WebSocket URL of a CDP token's answer (`url` is `/cdp/<token>`), on the client's base."""
    return socket_root(root) + answer["url"]


def credential_path(name: str) -> str:
    return f"/credentials/{segment(name)}"


def credential_body(
    url: str, username: str | None, password: str | None, totp_secret: str | None, notes: str | None
) -> dict[str, str]:
    """PUT /api/v1/credentials/{name}'s body: the fields given (a PUT replaces
    the credential whole, so one left out is no longer set)."""
    given = {"url": url, "username": username, "password": password, "totp_secret": totp_secret, "notes": notes}
    return {name: value for name, value in given.items() if value is not None}


def answer_of(response: httpx.Response) -> Answer:
    """The answer of a success (`{}` for a 204), or the typed error of a failure."""
    if not response.is_success:
        raise error_for(response)
    if response.status_code == 204 or not response.content:
        return {}
    return response.json()


def media_path(link: str | Answer) -> str:
    """The route of a media link (`/api/v1/media/<token>`, or a `media` dict holding it)."""
    url = link["url"] if isinstance(link, dict) else link
    return "/" + url.removeprefix(API).lstrip("/")


def upload_headers(path: Path, content_type: str | None, filename: str | None) -> dict[str, str]:
    name = filename or path.name
    return {
        "Content-Type": content_type or mimetypes.guess_type(name)[0] or "application/octet-stream",
        "X-Filename": quote(name),
    }


# How much of a file an upload reads at a time: it never holds the file whole.
PIECE = 1024 * 1024


def transfer_params(url: str | None, selector: str | None, **more: Any) -> dict[str, Any]:
    """web/download's parameters: `url` or `selector`, and those given."""
    if (url is None) == (selector is None):
        raise TypeError("download() takes url= or selector=, one of the two")
    found = {"url": url} if url is not None else {"selector": selector}
    return {**found, **{name: value for name, value in more.items() if value is not None}}


def http_timeout(timeout: float | None) -> httpx.Timeout:
    # Connecting to a loopback or LAN worker is quick; only answers take long.
    return httpx.Timeout(timeout, connect=None if timeout is None else min(timeout, 10.0))


def long_poll_timeout(wait: str) -> httpx.Timeout:
    return httpx.Timeout(float(wait) + LONG_POLL_MARGIN_S, connect=10.0)


EVENTS_NEED_WEBSOCKETS = "events() needs the websockets package: pip install 'penelope-client[events]'."
EVENTS_REFUSED = (
    "The worker refused the event socket: a wrong key, a malformed job or page filter, "
    "or MAX_EVENT_SOCKETS sockets open already."
)
