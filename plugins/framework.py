"""The plugin framework: families of named async actions with declared parameters.

A family is a module that defines `family = Family("name")` and decorates its
actions with `@family.action("name", params=SomeSerializer)`. An action is
`async def action(page, params, ctx) -> dict`. Families are listed in
`PENELOPE_PLUGINS`, so a user adds one without touching the project.

plugins/running.py turns an action's run into an answer (status and body).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from playwright.async_api import Page
from rest_framework import serializers

from core.api import ApiError, StatusError
from core.auth import SecretPath, hide_paths, secret_path
from core.db_thread import on_db_thread, persist
from core.rest import validated
from core.shapes import declared_fields
from media_store import store
from plugins import declared
from plugins.downloads import Downloads
from plugins.signing_in import CredentialOffOrigin, origin_of, reveal_for

if TYPE_CHECKING:
    from credentials.services import Revealed

log = logging.getLogger("penelope.plugins")


class PluginError(StatusError):
    """Raised by an action to answer a status and a sentence, e.g.
    `raise PluginError(404, "Account ghost does not exist.")`.

    For a job started with X-Retry, `retry=True` marks the failure worth
    another attempt and `retry=False` marks it final, whatever its status;
    without it the status decides (408, 502, 503 and 504 may pass:
    `core.api.MAY_PASS`). Either way it is the error's `transient`."""

    def __init__(self, status: int, message: str, page_id: str | None = None, *, retry: bool | None = None):
        super().__init__(status, message, page_id, transient=retry)


ActionFn = Callable[[Page, dict[str, Any], "Context"], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Action:
    family: str
    name: str
    run: ActionFn
    params: type[serializers.Serializer] | None = None
    # Seconds, or a function of the validated parameters (a long scroll needs longer).
    timeout_s: float | Callable[[dict[str, Any]], float] | None = None
    # The family's version, recorded on each job that runs the action.
    version: str | None = None
    # Paths into the result whose values only the full key sees (`secret=`).
    secret: tuple[SecretPath, ...] = ()
    # Takes parameters it does not declare (`extra_params=`), passed on as sent.
    extra_params: bool = False

    @property
    def route(self) -> str:
        return f"{self.family}/{self.name}"

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        """The validated parameters, or 400 naming what is wrong: a parameter
        the action does not declare (unless it takes extras), an integer not
        written as one (plugins/declared.py), or the first field its
        serializer refuses. Extras, when taken, are passed on as sent."""
        refused = declared.refusal(self.params, data, route=self.route, extra=self.extra_params)
        if refused is not None:
            raise ApiError(400, refused)
        params = dict(validated(self.params, data)) if self.params is not None else {}
        if self.extra_params:
            fields = declared_fields(self.params) if self.params is not None else {}
            params = {**{name: value for name, value in data.items() if name not in fields}, **params}
        return params

    def validate_stored(self, stored: dict[str, Any]) -> dict[str, Any]:
        """Parameters a job stored once validated, validated again (a re-run,
        a queued job after a restart): the values its optional fields took
        by default are left to the defaults again, as a default need not be
        a value the field takes from a client (DRF's `CharField(default="")`
        refuses a blank one)."""
        if self.params is None:
            return {}
        fields = declared_fields(self.params)
        sent = {
            name: value for name, value in stored.items()
            if name not in fields or fields[name].required or fields[name].default is serializers.empty
            or value != fields[name].get_default()
        }
        return self.validate(sent)

    def time_limit(self, params: dict[str, Any]) -> float:
        if self.timeout_s is None:
            return settings.ACTION_TIMEOUT_S
        if callable(self.timeout_s):
            return self.timeout_s(params)
        return self.timeout_s


MAX_VERSION = 64  # characters of a family's version


class Family:
    """A family of actions; `version` (any short string, e.g. "1.4.0" or a
    commit) is recorded on every job its actions run, so a result names the
    code that produced it."""

    def __init__(self, name: str, *, version: str | None = None, extra_params: bool = False) -> None:
        if version is not None and (not isinstance(version, str) or not 0 < len(version.strip()) <= MAX_VERSION):
            raise TypeError(f"Family {name}'s version is a string of 1 to {MAX_VERSION} characters, or None.")
        self.name = name
        self.version = version.strip() if version else None
        # Its actions take parameters they do not declare (each action may say otherwise).
        self.extra_params = extra_params
        self.actions: dict[str, Action] = {}

    def action(
        self,
        name: str,
        *,
        params: type[serializers.Serializer] | None = None,
        timeout_s: float | Callable[[dict[str, Any]], float] | None = None,
        secret: Iterable[str] = (),
        extra_params: bool | None = None,
    ) -> Callable[[ActionFn], ActionFn]:
        """Register an action. `secret` names the result's values that let
        their holder act or pass for the persona (a cookie's value, a
        token), as dotted paths (`"cookies.*.value"`; `*` is every item of
        a list): a read key's polls, list and event sockets show `"…"` in
        their place, while the full key, a webhook and a plain call get the
        result whole. A parameter the action does not declare answers 400
        naming it, unless `extra_params=True` (or the family's, when left
        out): the action then gets it as sent."""
        paths = (secret,) if isinstance(secret, str) else tuple(secret)
        secret_paths = tuple(secret_path(path) for path in paths)

        def register(fn: ActionFn) -> ActionFn:
            extra = self.extra_params if extra_params is None else extra_params
            self.actions[name] = Action(
                self.name, name, fn, params, timeout_s, self.version, secret_paths, extra_params=extra
            )
            return fn

        return register


class PluginsInvalid(RuntimeError):
    """PENELOPE_PLUGINS names a module that cannot be loaded as a family."""


@functools.cache
def families() -> dict[str, Family]:
    """The families named in PENELOPE_PLUGINS, by family name."""
    loaded: dict[str, Family] = {}
    for path in settings.PENELOPE_PLUGINS:
        try:
            module = importlib.import_module(path)
        except ImportError as error:
            raise PluginsInvalid(
                f"PENELOPE_PLUGINS lists {path}, which cannot be imported ({error}). "
                f"Check the module path, or remove it from PENELOPE_PLUGINS "
                f"(now {','.join(settings.PENELOPE_PLUGINS)})."
            ) from error
        family = getattr(module, "family", None)
        if not isinstance(family, Family):
            raise PluginsInvalid(f"PENELOPE_PLUGINS lists {path}, which defines no `family = Family(...)`.")
        loaded[family.name] = family
    return loaded


def find_action(family: str, action: str) -> Action | None:
    found = families().get(family)
    return found.actions.get(action) if found else None


def result_for_reader(route: str, result: Any) -> Any:
    """A result of the action at `route` (`family/action`) as a read key
    sees it: each value the action marks secret shown as `HIDDEN`."""
    family, _, name = route.partition("/")
    action = find_action(family, name)
    if action is None or not action.secret:
        return result
    return hide_paths(result, action.secret)


MAX_PROGRESS_MESSAGE = 1000  # characters; a longer message is cut
MAX_ASK_S = 3600  # the longest a plugin may wait for a person at once


@dataclass
class Context:
    """What an action gets besides its page and parameters."""

    page_id: str
    log: logging.Logger = log
    # Tokens of the media files this run stored, so a job can hold them.
    media_tokens: list[str] = field(default_factory=list)
    # A job's run holds its files from the moment they are stored.
    media_holder: str | None = None
    media_held_until: float | None = None
    # Where a job's progress reports go (`ProgressRelay`, jobs/run.py); a plain call keeps none.
    on_progress: Callable[[dict[str, Any]], None] | None = None
    # How a job's plugin asks a person on its page (live/human.py), given by
    # the job; a plain call has none, and cannot ask.
    ask_person: Callable[[str, float], Awaitable[str]] | None = None
    # What the run keeps for its author (plugins/debug.py): None, "on-failure" or "always".
    debug: str | None = None
    # Which attempt of its job this run is, from 1 (X-Retry gives a job more
    # than one); a plain call is a first attempt.
    attempt: int = 1
    # The tab the action runs on (set by `run_action`): a credential's origin rule reads its URL.
    tab: Page | None = field(default=None, repr=False)
    # Whose run this is, for the request log's row of each credential used.
    route: str = ""
    job_id: str | None = None
    # Where a credential's use is recorded (the request log), given by the call or the job.
    on_credential_use: Callable[[dict[str, Any]], None] | None = field(default=None, repr=False)
    # The secrets of the credentials this run used: X-Debug takes them out of its artifacts.
    revealed: set[str] = field(default_factory=set, repr=False)
    # The action's time limit while it runs (`within_time_limit`), which
    # `end_now` brings forward and `ask_human` pauses.
    _deadline: asyncio.Timeout | None = field(default=None, repr=False)

    async def credential(self, name: str) -> Revealed:
        """The persona's credential `name` (PUT /api/v1/credentials/{name}):
        its `username`, `password` and `totp()` (the current one-time code).
        Only while the page is on the credential's own origin: elsewhere a
        403 names both origins, and nothing is revealed. Each use is a row of
        the request log (name, plugin, job, origin), never a value. Keep the
        values out of the action's answer and its errors; `web/fill-credential`
        types them without Playwright's trace recording them."""
        url = self.tab.url if self.tab is not None else ""
        try:
            revealed = await reveal_for(name, url)
        except CredentialOffOrigin as refused:
            raise PluginError(403, str(refused), self.page_id, retry=False) from None
        self.revealed.update(revealed.secrets())
        if self.on_credential_use is not None:
            self.on_credential_use({
                "name": name, "plugin": self.route, "job_id": self.job_id, "page_id": self.page_id, "origin": origin_of(url),
            })
        return revealed

    @contextlib.asynccontextmanager
    async def within_time_limit(self, seconds: float) -> AsyncIterator[None]:
        """The action's run, ended by TimeoutError after `seconds` (run_action
        enters it around the action; an action does not). In this task:
        asyncio.wait_for would start another one per call."""
        try:
            async with asyncio.timeout(seconds) as self._deadline:
                yield
        finally:
            self._deadline = None

    def end_now(self) -> None:
        """End the action in hand at its next await, as if its time ran out:
        its page's tab was lost (a crash, a browser that stopped), so nothing
        it still waits for will come. The caller answers for the loss."""
        if self._deadline is not None and not self._deadline.expired():
            self._deadline.reschedule(asyncio.get_running_loop().time())

    async def ask_human(self, *, reason: str, timeout_s: float) -> str:
        """Ask a person for help on this page (a code, a checkpoint, a captcha)
        and wait for the answer: "done" (they did what `reason` asks and
        pressed Done on the page's live view), "gave_up", or "timeout" when
        nobody answered within `timeout_s` seconds. The job stays running and
        shows the question and its live link meanwhile; the action's own time
        limit is paused while it waits. Only a job can ask: in a plain call
        this raises a 409 that says so."""
        if not isinstance(reason, str) or not reason.strip():
            raise TypeError("ask_human needs a reason: a sentence that tells the person what to do")
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or not 0 < timeout_s <= MAX_ASK_S:
            raise TypeError(f"ask_human's timeout_s is a number of seconds, more than 0 and at most {MAX_ASK_S}")
        if self.ask_person is None:
            raise PluginError(
                409, "This action asks a person for help on the way; start it as a job (X-Result-Ttl or "
                "X-Callback-Url) so that the question can be shown and answered.", self.page_id, retry=False,
            )
        if self.media_holder is not None and self.media_held_until is not None:
            # The files stored so far, and those to come, are held as much longer as the person may take.
            self.media_held_until += timeout_s
            await persist(store.expire, self.media_holder, until=self.media_held_until, what="a job's files' hold")
        loop = asyncio.get_running_loop()
        deadline = self._deadline
        left = None
        if deadline is not None and deadline.when() is not None and not deadline.expired():
            left = deadline.when() - loop.time()
            deadline.reschedule(None)  # a person's time is not the action's
        try:
            return await self.ask_person(reason, timeout_s)
        finally:
            if deadline is not None and left is not None and deadline.when() is None and not deadline.expired():
                deadline.reschedule(loop.time() + left)

    async def put_media(self, data: bytes, *, content_type: str, filename: str) -> dict[str, Any]:
        """Store a file and answer its `{"url", "expires_at", "content_type", "size"}`."""
        return self._kept(await store.aput(data, content_type=content_type, filename=filename, **self._hold()))

    async def put_media_file(self, path: Path, *, size: int, content_type: str, filename: str) -> dict[str, Any]:
        """`put_media` for a file on disk (a download's): moved into the store, never read into memory."""
        put = on_db_thread(store.register_file)
        return self._kept(await put(path, size=size, content_type=content_type, filename=filename, **self._hold()))

    def _hold(self) -> dict[str, Any]:
        return {"holder": self.media_holder, "held_until": self.media_held_until}

    def _kept(self, item: Any) -> dict[str, Any]:
        self.media_tokens.append(item.token)
        return item.link()

    def expect_download(self, page: Page, *, timeout_ms: int = 30_000, inline: bool = False) -> Downloads:
        """Watch the downloads `page` starts (`async with ctx.expect_download(page) as downloads:`);
        `await downloads.store()` keeps each as a media file (plugins/downloads.py). With
        `inline`, a file the page shows instead of saving (its main frame opens a document
        that is not HTML, and no download starts) is kept the same way."""
        return Downloads(page, self, timeout_ms, inline=inline)

    def progress(self, done: int | None = None, total: int | None = None, message: str | None = None) -> None:
        """Report how far the action got: `done` of `total` items (whole numbers
        of 0 or more, either may be left out) and a short `message`. A job shows
        the last report in its polls and its webhook, and publishes it as
        `job.progress`; a plain call drops it. Cheap enough to call per item."""
        for name, count in (("done", done), ("total", total)):
            if count is not None and (type(count) is not int or count < 0):
                raise TypeError(f"progress {name} must be a whole number of 0 or more, or None; got {count!r}")
        if message is not None and not isinstance(message, str):
            raise TypeError(f"progress message must be a string or None; got {type(message).__name__}")
        if self.on_progress is not None:
            note = {"done": done, "total": total, "message": message[:MAX_PROGRESS_MESSAGE] if message else message}
            note["at"] = round(time.time(), 3)
            self.on_progress(note)
