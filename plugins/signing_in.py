"""A persona's credentials in a flow: the origin rule, the request log's row
of each use, and a sign-in form filled without the secrets being recorded.

`ctx.credential(name)` (plugins/framework.py) answers the credential's
values only while the page is on the credential's own origin, so no flow can
type one site's password into another. `fill_form` types them through a
CDP session of the worker's own, as internal calls: Playwright's trace
(X-Debug) records every API call with its arguments and, before each
recorded action, a snapshot of the page that holds every field's value
(`__playwright_value_`, a password field's too). So nothing it records runs
while a secret sits in a field: the focus, the typing and the submit are
internal calls, and a form that stays on the page after its submit has its
fields emptied before the flow goes on. Without a submit the values stay in
the form for the flow's next step, which Playwright records as any step.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from core.db_thread import on_db_thread
from core.seams import on_cdp_events, send_cdp
from credentials import store

if TYPE_CHECKING:
    from playwright.async_api import Page

    from credentials.store import Revealed

# How long a submitted form may take to leave its page before its fields are emptied.
SUBMIT_SETTLE_S = 5.0

FOCUS_JS = """(selector) => {
  const field = document.querySelector(selector);
  if (!field) return "missing";
  field.focus();
  if (typeof field.select === "function") field.select();
  return document.activeElement === field ? "focused" : "not focusable";
}"""
CLICK_JS = """(selector) => {
  const button = document.querySelector(selector);
  if (!button) return "missing";
  button.click();
  return "clicked";
}"""
EMPTY_JS = """(selectors) => {
  for (const selector of selectors) {
    const field = document.querySelector(selector);
    if (field && "value" in field) field.value = "";
  }
}"""


class CredentialRefused(Exception):
    """A credential asked for off its origin; the message names both origins."""


def origin_of(url: str) -> str:
    """`scheme://host[:port]` of a URL, the port only where it is not the scheme's own."""
    parts = urlsplit(url or "")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return parts.scheme + ":" if parts.scheme else "none"
    default = {"http": 80, "https": 443}[parts.scheme]
    port = f":{parts.port}" if parts.port and parts.port != default else ""
    return f"{parts.scheme}://{parts.hostname}{port}"


async def reveal_for(name: str, page_url: str) -> Revealed:
    """The credential `name`'s values, for a page at `page_url`: refused
    (CredentialRefused) when the page is not on the credential's origin, and
    then nothing is revealed or marked used. Unknown names raise the store's 404."""
    public = await on_db_thread(store.view)(name)
    here, theirs = origin_of(page_url), origin_of(public["url"])
    if here != theirs:
        raise CredentialRefused(f"Credential {name} belongs to {theirs}; the page is on {here}, so it is not used there.")
    return await store.areveal(name)


async def fill_form(page: Page, revealed: Revealed, fields: dict[str, str | None], submit: str | None) -> dict[str, Any]:
    """Type the credential's values into the form on `page` and submit it.

    `fields` maps "username", "password" and "totp" to a CSS selector (None:
    not filled). Answers what was filled, whether it was submitted, and
    whether the page left the form (a navigation); the values themselves
    never leave this function."""
    typed = {kind: _value_of(revealed, kind) for kind, selector in fields.items() if selector is not None}
    session = await page.context.new_cdp_session(page)
    filled: list[str] = []
    try:
        for kind, value in typed.items():
            selector = fields[kind]
            shown = await _call(session, FOCUS_JS, selector)
            if shown != "focused":
                await _empty(session, fields)
                raise LookupError(f"the {kind} field ({selector}) is {shown} on the page")
            await send_cdp(session, "Input.insertText", {"text": value})
            filled.append(kind)
        left = False
        if submit is not None:
            navigated = asyncio.Event()
            on_cdp_events(session, lambda event: _note_navigation(event, navigated))
            await send_cdp(session, "Page.enable", {})
            clicked = await _call(session, CLICK_JS, submit)
            if clicked != "clicked":
                await _empty(session, fields)
                raise LookupError(f"the submit button ({submit}) is {clicked} on the page")
            try:
                await asyncio.wait_for(navigated.wait(), SUBMIT_SETTLE_S)
                left = True
            except TimeoutError:
                left = False
        if submit is not None and not left:
            await _empty(session, fields)  # the values stay out of what the flow's next steps record
        return {"filled": filled, "submitted": submit is not None, "left_the_form": left}
    finally:
        await session.detach()


async def _call(session: Any, function: str, argument: Any) -> Any:
    answer = await send_cdp(session, "Runtime.evaluate", {
        "expression": f"({function})({json.dumps(argument)})", "returnByValue": True,
    })
    return answer["result"]["result"].get("value")


async def _empty(session: Any, fields: dict[str, str | None]) -> None:
    await _call(session, EMPTY_JS, [selector for selector in fields.values() if selector])


def _value_of(revealed: Revealed, kind: str) -> str:
    """What is typed for `kind`, found before anything is typed: ValueError
    when the credential has none, so no field is left half filled."""
    if kind == "totp":
        if not revealed.has_totp:
            raise ValueError(f"credential {revealed.name} has no TOTP secret to make a code from")
        return revealed.totp()
    value = revealed.username if kind == "username" else revealed.password
    if not value:
        raise ValueError(f"credential {revealed.name} has no {kind} to type")
    return value


def _note_navigation(event: dict[str, Any], navigated: asyncio.Event) -> None:
    """The page's main frame committed another document (the submit left the form)."""
    if event.get("method") == "Page.frameNavigated" and not (event.get("params") or {}).get("frame", {}).get("parentId"):
        navigated.set()
