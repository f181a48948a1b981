"""What every `web` action shares: the family, the request controls a call
may set (restored after it), and the wait a reading action applies first."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from django.conf import settings
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page, Route
from playwright.async_api import TimeoutError as PlaywrightTimeoutError
from rest_framework import serializers

from core.api import first_line
from core.shapes import Text
from plugins.framework import ActionFn, Context, Family, PluginError

log = logging.getLogger("penelope.plugins")

family = Family("web")

SELECTOR = Text(max_length=1000)
BLOCKABLE = ["image", "font", "media", "stylesheet"]
# RFC 9110's token: what a header name may be made of.
HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,256}")
MAX_HEADERS = 50
# Headers the browser sets itself, or that belong to one connection: Chromium
# refuses some outright, and none of them is the caller's to send.
BROWSER_HEADERS = frozenset(
    {"host", "content-length", "connection", "keep-alive", "transfer-encoding", "upgrade", "te", "trailer", "expect"}
)
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")
# A header value: one line, a tab the only control character in it.
HEADER_VALUE = "[^\\u0000-\\u0008\\u000a-\\u001f\\u007f]*"


class WaitFor(serializers.Serializer):
    """Either a selector reaching a state, or a JavaScript expression becoming truthy."""

    selector = Text(max_length=1000, required=False, help_text="Not with function.")
    state = serializers.ChoiceField(choices=["attached", "visible", "hidden", "detached"], required=False,
                                    help_text="With selector only (visible when left out).")  # fmt: skip
    function = Text(max_length=100_000, required=False, help_text="Not with selector; give one of the two.")
    timeout_ms = serializers.IntegerField(min_value=0, max_value=600_000, default=30_000)

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if ("selector" in data) == ("function" in data):
            raise serializers.ValidationError("give either selector or function.")
        if "function" in data and "state" in data:
            raise serializers.ValidationError("state goes with a selector, not a function.")
        if "selector" in data:
            data.setdefault("state", "visible")
        return data


class Viewport(serializers.Serializer):
    width = serializers.IntegerField(min_value=1, max_value=10_000)
    height = serializers.IntegerField(min_value=1, max_value=10_000)


class HeaderMap(serializers.DictField):
    """Extra HTTP headers: names are tokens, values one line each."""

    # The value's pattern is in the document; the map checks it, naming the header.
    child = Text(max_length=8192, allow_blank=True, pattern=HEADER_VALUE)
    max_properties = MAX_HEADERS

    def to_internal_value(self, data: Any) -> dict[str, str]:
        headers = super().to_internal_value(data)
        if len(headers) > MAX_HEADERS:
            raise serializers.ValidationError(f"at most {MAX_HEADERS} headers.")
        for name, value in headers.items():
            if not HEADER_NAME.fullmatch(name):
                raise serializers.ValidationError(f"{name[:64]!r} is not a header name.")
            if name.lower() in BROWSER_HEADERS:
                raise serializers.ValidationError(f"{name} is the browser's to set.")
            if CONTROL_CHARACTERS.search(value.replace("\t", "")):
                raise serializers.ValidationError(f"the value of {name} holds a line break or a control character.")
        return headers


class WebParams(serializers.Serializer):
    """The request controls every `web` action that drives the page takes."""

    headers = HeaderMap(
        required=False,
        help_text=(
            f"At most {MAX_HEADERS}. A name is an HTTP token (1 to 256 of A-Z, a-z, 0-9 and !#$%&'*+-.^_`|~); "
            f"{', '.join(sorted(BROWSER_HEADERS))} are the browser's and refused."
        ),
    )
    user_agent = Text(pattern="[^\\u0000-\\u001f\\u007f]+", max_length=1000, required=False,
                      invalid="a user agent is one line without control characters.")  # fmt: skip
    viewport = Viewport(required=False)
    block = serializers.ListField(child=serializers.ChoiceField(choices=BLOCKABLE), max_length=len(BLOCKABLE), required=False)


class ReadParams(WebParams):
    """A reading action's parameters: the controls, and a wait before it reads."""

    wait_for = WaitFor(required=False)


def action(
    name: str, *, params: type[serializers.Serializer], timeout_s: float | Callable[[dict[str, Any]], float] | None = None
) -> Callable[[ActionFn], ActionFn]:
    """Register a `web` action that runs under the call's request controls.
    Its time limit (its own, or ACTION_TIMEOUT_S) grows by its `wait_for`'s
    timeout, so a long wait ends in the wait's own 408."""

    def time_limit(params: dict[str, Any]) -> float:
        own = settings.ACTION_TIMEOUT_S if timeout_s is None else timeout_s(params) if callable(timeout_s) else timeout_s
        return own + (params["wait_for"]["timeout_ms"] / 1000 if params.get("wait_for") else 0)

    def register(fn: ActionFn) -> ActionFn:
        async def run(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
            async with request_controls(page, params):
                return await fn(page, params, ctx)

        run.__doc__ = fn.__doc__
        family.action(name, params=params, timeout_s=time_limit)(run)
        return fn

    return register


# One request control's change or undo in the browser: milliseconds; a tab that
# does not answer in this time (crashed, its browser gone) is not waited for.
CONTROL_STEP_TIMEOUT_S = 10


@contextlib.asynccontextmanager
async def request_controls(page: Page, params: dict[str, Any]) -> AsyncIterator[None]:
    """Apply the call's headers, user agent, viewport and blocked resource
    types to the page, and undo each when the call ends, however it ends, so
    the next call finds the page as the persona left it."""
    undo: list[Callable[[], Awaitable[Any]]] = []
    # The changes go to the browser in a task of their own, awaited whole even
    # when the call is cancelled meanwhile: a change cut off mid-way could
    # still reach the browser after its undo and stay.
    applying = asyncio.ensure_future(apply_controls(page, params, undo))
    try:
        await asyncio.shield(applying)
        yield
    finally:
        if not applying.done():
            await asyncio.wait({applying}, timeout=CONTROL_STEP_TIMEOUT_S)
        await undo_all(page, undo)


async def apply_controls(page: Page, params: dict[str, Any], undo: list[Callable[[], Awaitable[Any]]]) -> None:
    # Each undo is registered before its change is applied: a call
    # cancelled while a change is on its way to the browser still undoes it.
    if params.get("headers"):
        undo.append(lambda: page.set_extra_http_headers({}))
        await page.set_extra_http_headers(params["headers"])
    if params.get("user_agent"):
        # A page-level override through the DevTools protocol: the
        # persistent context fixes its user agent at launch. Detaching
        # the session ends the override.
        session = await page.context.new_cdp_session(page)
        undo.append(session.detach)
        await session.send("Network.setUserAgentOverride", {"userAgent": params["user_agent"]})
    if params.get("viewport"):
        before = page.viewport_size
        if before is not None:
            undo.append(lambda: page.set_viewport_size(before))
        await page.set_viewport_size(params["viewport"])
    if params.get("block"):
        blocked = frozenset(params["block"])

        async def refuse(route: Route) -> None:
            if route.request.resource_type in blocked:
                await route.abort("blockedbyclient")
            else:
                await route.fallback()

        undo.append(lambda: page.unroute("**/*", refuse))
        await page.route("**/*", refuse)


async def undo_all(page: Page, undo: list[Callable[[], Awaitable[Any]]]) -> None:
    """Run every undo step, last first, even when one fails or the call is
    cancelled meanwhile; a cancellation is passed on once all have run."""
    cancelled: asyncio.CancelledError | None = None
    for step in reversed(undo):
        try:
            # Bounded: a crashed tab may never answer, and the page stays locked until this ends.
            await asyncio.wait_for(step(), CONTROL_STEP_TIMEOUT_S)
        except asyncio.CancelledError as error:
            cancelled = error
        except TimeoutError:
            log.warning("restoring a request control took more than %g s; given up", CONTROL_STEP_TIMEOUT_S)
        except PlaywrightError as error:
            if not page.is_closed():  # a closed tab takes its settings with it
                log.warning("restoring a request control failed: %s", error.message)
    if cancelled is not None:
        raise cancelled


async def wait_for(page: Page, spec: dict[str, Any] | None) -> None:
    """Wait as the call's `wait_for` asks (nothing when it asks nothing); a wait
    that runs out answers 408 naming what it waited for."""
    if not spec:
        return
    timeout = spec["timeout_ms"]
    try:
        if "selector" in spec:
            await page.wait_for_selector(spec["selector"], state=spec["state"], timeout=timeout)
        else:
            await page.wait_for_function(spec["function"], timeout=timeout)
    except PlaywrightTimeoutError:
        raise PluginError(408, f"Waited {timeout} ms for {describe_wait(spec)}; it did not happen.") from None
    except PlaywrightError as error:
        if "function" in spec and not page.is_closed():
            raise PluginError(400, f"The wait_for function failed: {first_line(error.message)}") from None
        raise


def describe_wait(spec: dict[str, Any]) -> str:
    if "selector" in spec:
        return f"{spec['selector'][:200]!r} to be {spec['state']}"
    function = spec["function"].strip()
    return f"the function {function[:200] + ('…' if len(function) > 200 else '')!r} to be truthy"


async def first_match(page: Page, selector: str):
    """The first element the selector matches, or 404."""
    locator = page.locator(selector)
    if await locator.count() == 0:
        raise PluginError(404, f"Nothing on the page matches {selector!r}.")
    return locator.first
