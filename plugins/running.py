"""Running an action: the one code path from a page to an answer.

`run_action` turns an action's run into its answer (status and body); a
plain call, a job and `run_action` in a shell all use it. `run_claimed` runs
it on a page claimed through the broker (its tab made ready first) and lets
the page go, whatever happens; `run_plain` and `run_anywhere` are a plain
call's two ways to its claim. A job claims its page through its run
(jobs/run.py) and only decides who waits for the outcome and where it goes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from browser.pages import Claim, ManagedPage
from browser.registry import PageRegistry
from core.api import MAY_PASS, first_line, refusal
from core.errors import (
    ActionFailed,
    ActionTimedOut,
    BadAction,
    BrowserStepFailed,
    DomainError,
    NavigationRefused,
    Refusal,
    ResultTooLarge,
    TabLost,
)
from core.routes import ANY
from plugins.debug import Recorder
from plugins.framework import Action, Context, PluginError
from plugins.signing_in import CredentialOffOrigin

log = logging.getLogger("penelope.plugins")


@dataclass
class Outcome:
    """An action's answer: the status and body of the plain call."""

    status: int
    body: dict[str, Any]
    started_at: float
    duration_s: float
    # Whether the failure may pass by itself (its error's `transient`): X-Retry's question.
    transient: bool | None = None

    def __post_init__(self) -> None:
        if self.transient is None:
            # Made from a status alone (no error behind it): the status says
            # it, by the rule a PluginError without `retry=` follows.
            self.transient = self.status in MAY_PASS

    @classmethod
    def refused(cls, error: Refusal, page_id: str, started_at: float, duration_s: float) -> Outcome:
        """The outcome of a call refused by `error`: its status, the envelope and its `transient`."""
        answer = refusal(error, page_id)
        return cls(answer.status, answer.envelope(), started_at, duration_s, error.transient)


async def run_action(action: Action, page: Page, params: dict[str, Any], ctx: Context) -> Outcome:
    ctx.tab, ctx.route = page, action.route
    started_at = time.time()
    began = time.monotonic()
    try:
        result = await _result(action, page, params, ctx)
    except Refusal as error:
        return Outcome.refused(error, ctx.page_id, started_at, time.monotonic() - began)
    return Outcome(200, {"success": True, "page_id": ctx.page_id, **result}, started_at, time.monotonic() - began)


async def _result(action: Action, page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """The action's result, checked; whatever goes wrong is raised as a
    refusal (core/errors.py) naming it."""
    page_id = ctx.page_id
    limit = action.time_limit(params)
    try:
        async with ctx.within_time_limit(limit):
            result = await action.run(page, params, ctx)
    except Refusal:
        raise  # the action's own refusal (a PluginError), or one of the page's
    except (TimeoutError, PlaywrightTimeoutError) as error:
        if isinstance(error, PlaywrightTimeoutError):
            raise ActionTimedOut(f"{action.route} timed out on the page: {first_line(error.message)}", page_id) from None
        raise ActionTimedOut(f"{action.route} ran past its time limit of {limit:g} s.", page_id) from None
    except CredentialOffOrigin as error:
        # `fill_form` refused a document off the credential's origin, in an
        # action that left it to the framework: the origin rule's 403.
        raise PluginError(403, str(error), page_id, retry=False) from None
    except PlaywrightError as error:
        if BAD_SELECTOR.search(error.message or ""):
            raise BadAction(f"{action.route}: the selector is not valid: {first_line(error.message)}", page_id) from None
        log.warning("%s on page %s failed: %s", action.route, page_id, error.message)
        raise BrowserStepFailed(f"{action.route} failed in the browser: {first_line(error.message)}", page_id) from None
    except Exception:
        log.exception("%s on page %s raised", action.route, page_id)
        raise ActionFailed(
            f"{action.route} failed with an unexpected error; the details are in the worker's log.", page_id
        ) from None
    if not isinstance(result, dict):
        log.error("%s returned %r instead of a dict", action.route, type(result))
        raise ActionFailed(f"{action.route} returned no result object.", page_id)
    try:
        # A job stores the result as JSON and a plain call sends it: both need strict JSON.
        encoded = json.dumps(result, allow_nan=False)  # ASCII: its length is its size in bytes
    except (TypeError, ValueError):
        log.error("%s returned a result that is not strict JSON", action.route)
        raise ActionFailed(f"{action.route} returned a result that cannot be sent as JSON.", page_id) from None
    if len(encoded) > settings.RESULT_MAX_BYTES:
        log.warning("%s answered %d bytes of JSON, past RESULT_MAX_BYTES", action.route, len(encoded))
        raise ResultTooLarge(
            f"{action.route} answered {len(encoded)} bytes of JSON, more than RESULT_MAX_BYTES "
            f"({settings.RESULT_MAX_BYTES}); nothing of it was kept. Ask for less, or for files.",
            page_id,
        )
    return result


# A selector the browser cannot parse is the caller's mistake (400), not a
# failure of the browser (502): Playwright's selector parser, or the DOM's.
BAD_SELECTOR = re.compile(r"while parsing (?:css )?selector|is not a valid (?:selector|XPath expression)")


async def run_claimed(
    pages: PageRegistry, claim: Claim, action: Action, params: dict[str, Any], ctx: Context | None = None
) -> Outcome:
    """Run the action on the claimed page and release the page, whatever happens.

    The page's tab is ready first (a browser relaunch waited for up to
    PAGE_WAIT_S, a crashed tab replaced). A tab lost under the action (its
    renderer crashed, the browser stopped) ends the action at once, at its
    next await, and answers 502 naming the loss, whatever the action made of
    the errors it met: never the client's fault.
    """
    page = claim.page
    ctx = ctx or Context(page_id=page.name)
    ran = False
    recorder: Recorder | None = None
    try:
        try:
            tab = await pages.ensure_tab(claim, settings.PAGE_WAIT_S)
        except DomainError as error:  # the browser is down, or no tab opens
            return refused(error, page.name, time.time(), 0.0)
        generation = page.tab_generation  # no await since the tab was checked
        page.on_tab_lost = ctx.end_now
        page.refused = None
        ran = True
        if ctx.debug:
            recorder = Recorder(ctx.debug, tab, f"{action.route} on page {page.name}", pages.tracing, pages.tasks)
            recorder.start()
            await recorder.start_trace()
        try:
            outcome = await run_action(action, tab, params, ctx)
        finally:
            if page.on_tab_lost == ctx.end_now:  # a cancelled job's plugin may end after the page moved on
                page.on_tab_lost = None
        if page.tab_generation != generation:
            outcome = refused(TabLost(page.fault), page.name, outcome.started_at, outcome.duration_s)
        elif page.refused is not None:  # BROWSER_REFUSE_PRIVATE: whatever the action made of the 403 page
            outcome = refused(NavigationRefused(page.refused), page.name, outcome.started_at, outcome.duration_s)
        if recorder is not None:  # the page as the action left it, before anyone else may use it
            await recorder.finish(outcome.status, outcome.body, ctx.put_media, ctx.revealed)
        return outcome
    finally:
        if recorder is not None and not recorder.done:  # cancelled: the trace is stopped, nothing kept
            dropping = pages.tasks.spawn(recorder.discard(), about=f"dropping {action.route}'s debug recording on page {page.name}")
            with contextlib.suppress(BaseException):  # a second cancel leaves it to finish alone
                await asyncio.shield(dropping)
        pages.broker.release(claim)
        if ran:  # a call the browser ran counts toward a recycle, and its cookies are read
            pages.call_ended()


def refused(error: DomainError, page_id: str, started_at: float, duration_s: float) -> Outcome:
    """The outcome of a call the domain refused: its status, the envelope, and whether it may pass."""
    return Outcome.refused(error, page_id, started_at, duration_s)


async def run_plain(
    pages: PageRegistry, page: ManagedPage, action: Action, params: dict[str, Any], lease_id: str | None,
    debug: str | None = None, on_credential_use: Callable[[dict[str, Any]], None] | None = None,
) -> Outcome:
    """A plain call: wait in line for the page (up to PAGE_WAIT_S; a client
    that goes away leaves the line), then run the action to its end even if
    the client goes away meanwhile (its answer is then lost), so the page is
    never left half-driven."""
    # A browser being launched again is waited for first, so the calls queued
    # behind the page answer 503 after PAGE_WAIT_S if it does not come back
    # (or at once if it failed), as a call arriving during a relaunch should.
    deadline = time.monotonic() + settings.PAGE_WAIT_S
    await pages.wait_for_browser(page.name, settings.PAGE_WAIT_S)
    claim = await pages.broker.acquire(page.name, wait_s=max(0.0, deadline - time.monotonic()), lease_id=lease_id)
    ctx = Context(page_id=page.name, debug=debug, on_credential_use=on_credential_use)
    return await asyncio.shield(pages.tasks.spawn(run_claimed(pages, claim, action, params, ctx), about=f"{action.route} on page {page.name}"))


async def run_anywhere(
    pages: PageRegistry, action: Action, params: dict[str, Any], debug: str | None = None,
    on_credential_use: Callable[[dict[str, Any]], None] | None = None,
) -> Outcome:
    """A plain call on `any`: on the first free page (or a pool page opened
    for it), else on the first page that frees within PAGE_WAIT_S, then 409.
    The answer's `page_id` names the page that ran it."""
    await pages.wait_for_browser(ANY, settings.PAGE_WAIT_S)
    claim = await pages.broker.acquire(ANY, wait_s=settings.PAGE_WAIT_S)
    page = claim.page
    ctx = Context(page_id=page.name, debug=debug, on_credential_use=on_credential_use)
    return await asyncio.shield(pages.tasks.spawn(run_claimed(pages, claim, action, params, ctx), about=f"{action.route} on page {page.name} (any)"))
