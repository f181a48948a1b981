"""`run_action`: the one code path that turns an action's run into an answer
(status and body); a plain call, a job and `run_action` in a shell all use it."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from core.api import MAY_PASS, first_line, refusal
from core.errors import ActionFailed, ActionTimedOut, BadAction, BrowserStepFailed, Refusal, ResultTooLarge
from plugins.framework import Action, Context

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
        # In this task (asyncio.wait_for would start another one per call).
        async with asyncio.timeout(limit) as ctx._deadline:
            result = await action.run(page, params, ctx)
    except Refusal:
        raise  # the action's own refusal (a PluginError), or one of the page's
    except (TimeoutError, PlaywrightTimeoutError) as error:
        if isinstance(error, PlaywrightTimeoutError):
            raise ActionTimedOut(f"{action.route} timed out on the page: {first_line(error.message)}", page_id) from None
        raise ActionTimedOut(f"{action.route} ran past its time limit of {limit:g} s.", page_id) from None
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
    finally:
        ctx._deadline = None
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
