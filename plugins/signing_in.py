"""A persona's credentials in a flow: the origin rule, the request log's row
of each use, and a sign-in form filled without the secrets being recorded.

`ctx.credential(name)` (plugins/framework.py) answers the credential's
values only while the page is on the credential's own origin, so no flow can
type one site's password into another. `fill_form` types them through a
CDP session of the worker's own (Playwright's public `CDPSession.send`):
Playwright's trace (X-Debug) records every call on the page and its context
with its arguments and, before each recorded action, a snapshot of the page
that holds every field's value (`__playwright_value_`, a password field's
too), but not a CDP session's messages (tests/test_fill_credential.py
searches every trace member for the secrets). So nothing it records runs
while a secret sits in a field: the focus, the typing and the submit go
through the session, and a form that stays on the page after its submit has
its fields emptied before the flow goes on. Without a submit the values stay in
the form for the flow's next step, which Playwright records as any step.

Each value goes into the form's document only, checked as it is typed
(`Filling`). The page's origin is not enough: a keystroke goes to whichever
document has the focus, and a frame of another origin, or a document that
replaced the form's, may have it by the time the keys arrive. So nothing is
sent as a key. Each value is inserted by one script (`document.execCommand`),
run in a world of the worker's own in the form's document (the page's
scripts share its DOM, not its functions), which first checks in the same
step that the document is still on the credential's origin, that no
navigation has begun to take it away since its field was focused, and that
the field still has the focus. The browser's own report of such a navigation
refuses at once too: Chromium holds a page's calls to its renderer while its
main frame navigates to another document. The text can land in that
document only, never in a frame: an element that holds another document (an
iframe, frame, object or embed) is refused as a field, and a form inside a
frame is reached by naming the frame, which must itself be on the
credential's origin.

One module, past the 400-line rule (docs/design/LAYOUT.md): the origin rule,
the fill, the checked typing and the scripts it runs are one guarantee, that
a credential's values reach its own origin's form and no record; they were
three modules only for the line count.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from playwright.async_api import Error as PlaywrightError

from core.db_thread import on_db_thread
from credentials.selectors import credential_shown
from credentials.services import areveal_credential

if TYPE_CHECKING:
    from playwright.async_api import Page

    from credentials.services import Revealed

# How long a submitted form may take to leave its page before its fields are emptied.
SUBMIT_SETTLE_S = 5.0
# How long a call to the form's document is waited for once its page or
# frame is navigating away: Chromium holds a call to a page whose main frame
# navigates until the navigation ends. Tidying up (emptying the fields,
# detaching the session) needs no answer; a value's insertion that has not
# answered by then is refused (Filling._unless_leaving).
LEAVING_WAIT_S = 1.0
# What the browser reports of a navigation of the page or the form's frame:
# from its start the form's document is leaving (same-document navigations,
# a fragment or `history.pushState`, keep it; a new tab leaves it in place).
LEAVING_EVENTS = {
    "Page.frameRequestedNavigation",
    "Page.frameStartedNavigating",
    "Page.frameNavigated",
    "Page.frameDetached",
}
SAME_DOCUMENT = {"sameDocument", "historySameDocument"}
# The world the worker's scripts run in, in the form's document.
WORLD = "penelope-credential"


@dataclass(frozen=True)
class Remote:
    """An object of the worker's world in the form's document, held by reference."""

    object_id: str


@dataclass(frozen=True)
class Form:
    """Where the form is: its frame, the world the worker's scripts run in
    there, and the document's origin as the browser writes it."""

    frame_id: str
    context: int
    origin: str


class CredentialOffOrigin(Exception):
    """A credential asked for off its origin, or about to be typed into a
    document off it (or leaving); the message names the credential's origin
    and where the page, the frame or the document is."""


def origin_of(url: str) -> str:
    """`scheme://host[:port]` of a URL, the port only where it is not the scheme's own."""
    parts = urlsplit(url or "")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return parts.scheme + ":" if parts.scheme else "none"
    default = {"http": 80, "https": 443}[parts.scheme]
    port = f":{parts.port}" if parts.port and parts.port != default else ""
    return f"{parts.scheme}://{parts.hostname}{port}"


# --- the scripts run in the form's document, in the worker's world -------------------

# Elements that hold another document: what is focused in one is that
# document's, so no value is ever typed into one.
HOLDERS = ["iframe", "frame", "object", "embed", "fencedframe", "portal"]

# Each script answers a word the Python side turns into the sentence; one
# that finds an element answers it by reference.
FRAME_JS = """function (selector) {
  let frame;
  try { frame = document.querySelector(selector); } catch (error) { return "not a CSS selector"; }
  if (!frame) return "missing";
  return ["iframe", "frame"].includes(frame.localName) ? frame : "not an iframe";
}"""
ORIGIN_JS = "function () { return self.origin; }"
# A navigation that would replace the document (same-document ones, a
# fragment or `history.pushState`, keep it) marks the watch, at its start.
WATCH_JS = """function () {
  const watch = {left: null};
  if (self.navigation) {
    navigation.addEventListener("navigate", (event) => {
      if (event.destination.sameDocument) return;
      let to = "another document";
      try { to = new URL(event.destination.url).origin; } catch (error) {}
      watch.left = watch.left || to;
    });
  }
  return watch;
}"""
FOCUS_JS = """function (selector, holders) {
  let field;
  try { field = document.querySelector(selector); } catch (error) { return "not a CSS selector"; }
  if (!field) return "missing";
  if (holders.includes(field.localName)) return "holder:" + field.localName;
  field.focus();
  if (typeof field.select === "function") field.select();
  return document.activeElement === field ? field : "not focusable";
}"""
# Called on the field: every check and the insertion in one step of the
# document's, so nothing of the page's runs between them.
TYPE_JS = """function (text, origin, watch) {
  if (watch.left !== null) return "left:" + watch.left;
  if (self.origin !== origin) return "origin:" + self.origin;
  if (this.ownerDocument !== document || document.activeElement !== this) return "moved";
  return document.execCommand("insertText", false, text) ? "typed" : "takes no text";
}"""
CLICK_JS = """function (selector) {
  let button;
  try { button = document.querySelector(selector); } catch (error) { return "not a CSS selector"; }
  if (!button) return "missing";
  button.click();
  return "clicked";
}"""
EMPTY_JS = """function (selectors) {
  for (const selector of selectors) {
    let field = null;
    try { field = document.querySelector(selector); } catch (error) {}
    if (field && "value" in field) field.value = "";
  }
}"""


# --- the origin rule and the fill -------------------------------------------------


async def reveal_for(name: str, page_url: str) -> Revealed:
    """The credential `name`'s values, for a page at `page_url`: refused
    (CredentialOffOrigin) when the page is not on the credential's origin, and
    then nothing is revealed or marked used. An unknown name raises NoSuchCredential (404)."""
    public = await on_db_thread(credential_shown)(name)
    here, theirs = origin_of(page_url), origin_of(public["url"])
    if here != theirs:
        raise CredentialOffOrigin(
            f"Credential {name} belongs to {theirs}; the page is on {here}, so it is not used there."
        )
    return await areveal_credential(name)


async def fill_form(
    page: Page, revealed: Revealed, fields: dict[str, str | None], submit: str | None, *, frame: str | None = None
) -> dict[str, Any]:
    """Type the credential's values into the form on `page` and submit it.

    `fields` maps "username", "password" and "totp" to a CSS selector (None:
    not filled); `frame`, a CSS selector of the iframe whose document holds
    the form, when the page's own does not. Answers what was filled, whether
    it was submitted, and whether the form's document was left (a
    navigation); the values themselves never leave this function.
    LookupError names a field or button that is not there or takes no text;
    CredentialOffOrigin, a form or frame off the credential's origin, or a
    document that began to leave after its field was focused. Either way
    the fields typed so far are emptied."""
    typed = {kind: _value_of(revealed, kind) for kind, selector in fields.items() if selector is not None}
    filling = Filling(page, await page.context.new_cdp_session(page), revealed)
    try:
        return await filling.fill(typed, fields, submit, frame)
    finally:
        await filling.settle(filling.session.detach())


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


# --- the checked typing -----------------------------------------------------------


class Filling:
    """One `fill_form`: its DevTools session, the form's document, and
    whether that document (or the page holding it) has begun to leave."""

    def __init__(self, page: Page, session: Any, revealed: Revealed) -> None:
        self.page = page
        self.session = session
        self.revealed = revealed
        self.theirs = origin_of(revealed.url)
        self.form: Form | None = None
        # The page's main frame and the form's: a navigation of either
        # takes the form's document away.
        self.frames: set[str] = set()
        # Set at the start of such a navigation, as the browser reports it,
        # with the origin it is bound for when the browser says.
        self.leaving = asyncio.Event()
        self.bound_for = "another document"
        self.navigated = asyncio.Event()  # the form's frame committed another document, or went

    async def fill(
        self, typed: dict[str, str], fields: dict[str, str | None], submit: str | None, frame: str | None
    ) -> dict[str, Any]:
        filled: list[str] = []
        try:
            self.form = await self._find_form(frame)
            watch = await _call(self.session, self.form.context, WATCH_JS, by_value=False)
            for kind, value in typed.items():
                await self._type(self.form, watch, kind, fields[kind] or "", value)
                filled.append(kind)
            left = False
            pressed = submit is not None and not self.leaving.is_set()
            if submit is not None and not pressed:
                # What was typed already took the form away (a code field
                # that submits itself): nothing to press, and a page that
                # is navigating would hold the press until it is gone.
                left = await self._left_in_time()
            if submit is not None and pressed:
                self.navigated.clear()  # what counts is the submit's
                try:
                    clicked = await _call(self.session, self.form.context, CLICK_JS, submit)
                except PlaywrightError:
                    if self.page.is_closed():
                        raise
                    raise LookupError(f"the submit button ({submit}) went away with the form's document") from None
                if clicked != "clicked":
                    raise LookupError(f"the submit button ({submit}) is {_missing(clicked)}")
                left = await self._left_in_time()
            if submit is not None and not left:
                await self._empty(fields)  # the values stay out of what the flow's next steps record
            return {"filled": filled, "submitted": pressed, "left_the_form": left}
        except (LookupError, CredentialOffOrigin):
            if filled:
                await self._empty(fields)
            raise

    async def _left_in_time(self) -> bool:
        """Whether the form's frame left the form within SUBMIT_SETTLE_S."""
        try:
            await asyncio.wait_for(self.navigated.wait(), SUBMIT_SETTLE_S)
        except TimeoutError:
            return False
        return True

    async def settle(self, call: Awaitable[Any]) -> None:
        """Wait for `call`, a step that only tidies up; while the form's
        document is leaving, at most LEAVING_WAIT_S. Chromium holds a page's
        DevTools calls to its renderer while its main frame navigates to
        another document, and answers them once the navigation ends; the
        call is on its way by then, and ends without the flow."""
        try:
            if self.leaving.is_set():
                await asyncio.wait_for(call, LEAVING_WAIT_S)
            else:
                await call
        except (PlaywrightError, LookupError, TimeoutError):
            pass  # a document gone holds nothing more to tidy

    async def _find_form(self, frame: str | None) -> Form:
        """The form's document: the page's, or that of the iframe `frame`
        names; CredentialOffOrigin when it is not on the credential's origin.
        From here on, the navigations of the page and of the form's frame
        are watched."""
        session = self.session
        tree = await session.send("Page.getFrameTree", {})
        frame_id = tree["frameTree"]["frame"]["id"]
        self.frames.add(frame_id)
        for method in LEAVING_EVENTS:
            session.on(method, functools.partial(self._note, method))
        await session.send("Page.enable", {})
        context = await _world(session, frame_id)
        where = "the page"
        if frame is not None:
            found = await _call(session, context, FRAME_JS, frame, by_value=False)
            if not isinstance(found, Remote):
                raise LookupError(f"the frame ({frame}) is {_missing(found)}")
            described = await session.send("DOM.describeNode", {"objectId": found.object_id})
            frame_id = described["node"].get("frameId") or ""
            self.frames.add(frame_id)
            where = f"the frame {frame}"
            try:
                context = await _world(session, frame_id)
            except PlaywrightError:
                # Not a frame of the page's own process: the browser gives a
                # frame of another site, and a sandboxed one, a process of its own.
                raise CredentialOffOrigin(
                    f"Credential {self.revealed.name} belongs to {self.theirs}; {where} is on another site or in a "
                    "sandbox (a process of its own), so nothing is typed there."
                ) from None
        here = await _call(session, context, ORIGIN_JS)
        if not isinstance(here, str) or origin_of(here) != self.theirs:
            shown = "an opaque origin (a sandbox's)" if here == "null" else here
            raise CredentialOffOrigin(
                f"Credential {self.revealed.name} belongs to {self.theirs}; {where} is on {shown}, so nothing is typed there."
            )
        self.navigated.clear()
        return Form(frame_id=frame_id, context=context, origin=here)

    async def _type(self, form: Form, watch: Remote, kind: str, selector: str, value: str) -> None:
        """Focus the field `selector` of the form's document and insert
        `value`, checking in the same step as the insertion that the
        document is still the form's, on its origin, not leaving, and with
        the focus still in that field."""
        what = f"the {kind} field ({selector})"
        refused = f"Credential {self.revealed.name} belongs to {self.theirs}; the document of {what} "
        field = await self._unless_leaving(
            lambda: _call(self.session, form.context, FOCUS_JS, selector, HOLDERS, by_value=False), refused
        )
        if not isinstance(field, Remote):
            if isinstance(field, str) and field.startswith("holder:"):
                tag = field.removeprefix("holder:")
                article = "an" if tag[0] in "aeiou" else "a"
                raise LookupError(
                    f"{what} is {article} {tag}, which holds another document: a credential is typed only into a "
                    "field of the form's own document (frame_selector names the iframe a form is in)"
                )
            raise LookupError(f"{what} is {_missing(field)}")
        done = await self._unless_leaving(
            lambda: _call(self.session, field, TYPE_JS, value, form.origin, watch), refused
        )
        if done == "typed":
            return
        if isinstance(done, str) and done.startswith("left:"):
            raise CredentialOffOrigin(refused + self._began_to_leave(done.removeprefix("left:")))
        if isinstance(done, str) and done.startswith("origin:"):
            raise CredentialOffOrigin(refused + f"is on {done.removeprefix('origin:')}, so nothing is typed there.")
        if done == "moved":
            raise LookupError(f"{what} lost the focus before it was typed into")
        raise LookupError(f"{what} takes no text")

    async def _unless_leaving(self, call: Callable[[], Awaitable[Any]], refused: str) -> Any:
        """`call()`'s answer, unless the form's document is leaving before
        it is sent, or is gone when it runs: then CredentialOffOrigin, whose
        sentence `refused` begins. A closed page is the action's own failure.

        The script's own checks decide what is typed; this only keeps the
        flow from waiting on a page that navigates. Chromium holds a call
        to a page whose main frame is navigating until the navigation ends,
        and then it runs in a document gone, or, if the navigation stopped,
        finds the watch set: nothing is typed either way. So when the
        browser reports a navigation while a call is on its way, its answer
        is waited for LEAVING_WAIT_S more (it comes at once if the document
        ran the call before the navigation began: a code field that submits
        its form as its last digit is typed), and then the call is left to
        the browser."""
        if self.leaving.is_set():
            raise CredentialOffOrigin(refused + self._began_to_leave())
        answer = asyncio.ensure_future(call())
        left = asyncio.ensure_future(self.leaving.wait())
        try:
            await asyncio.wait({answer, left}, return_when=asyncio.FIRST_COMPLETED)
            if not answer.done():
                await asyncio.wait({answer}, timeout=LEAVING_WAIT_S)
        finally:
            left.cancel()
            if not answer.done():
                answer.cancel()
            await asyncio.gather(answer, left, return_exceptions=True)
        if answer.cancelled():
            raise CredentialOffOrigin(refused + self._began_to_leave())
        try:
            return answer.result()
        except PlaywrightError:
            if self.page.is_closed():
                raise
            raise CredentialOffOrigin(
                refused + "went away before it was typed into, so nothing is typed there."
            ) from None

    def _began_to_leave(self, bound_for: str | None = None) -> str:
        return f"began to navigate to {bound_for or self.bound_for} while the form was filled, so nothing more is typed there."

    async def _empty(self, fields: dict[str, str | None]) -> None:
        """Empty the form's fields again (a document already gone holds nothing)."""
        if self.form is not None:
            selectors = [selector for selector in fields.values() if selector]
            await self.settle(_call(self.session, self.form.context, EMPTY_JS, selectors))

    def _note(self, method: str, params: dict[str, Any] | None) -> None:
        """A navigation of the page or of the form's frame: from its start
        the form's document is leaving; once the form's frame commits
        another document (or goes to another process, another site's), the
        form was left."""
        params = params or {}
        frame_id = params.get("frameId") or (params.get("frame") or {}).get("id")
        if frame_id not in self.frames:
            return
        if method == "Page.frameRequestedNavigation" and params.get("disposition", "currentTab") != "currentTab":
            return  # a new tab or window: this document stays
        if method == "Page.frameStartedNavigating" and params.get("navigationType") in SAME_DOCUMENT:
            return
        if method in LEAVING_EVENTS and not self.leaving.is_set():
            if params.get("url"):
                self.bound_for = origin_of(params["url"])
            self.leaving.set()
        if (
            method in ("Page.frameNavigated", "Page.frameDetached")
            and self.form is not None
            and frame_id == self.form.frame_id
        ):
            self.navigated.set()


async def _world(session: Any, frame_id: str) -> int:
    answer = await session.send("Page.createIsolatedWorld", {"frameId": frame_id, "worldName": WORLD})
    return answer["executionContextId"]


async def _call(session: Any, where: int | Remote, function: str, *arguments: Any, by_value: bool = True) -> Any:
    """`function` called in the form's world (`where`: its context, or an
    object of it as `this`), with `arguments` (a Remote by reference).
    Answers its value, or with `by_value=False` a Remote for an object and
    the value for anything else."""
    target = {"objectId": where.object_id} if isinstance(where, Remote) else {"executionContextId": where}
    passed = [
        {"objectId": argument.object_id} if isinstance(argument, Remote) else {"value": argument}
        for argument in arguments
    ]
    result = await session.send("Runtime.callFunctionOn", {
        "functionDeclaration": function, **target, "arguments": passed, "returnByValue": by_value,
    })  # fmt: skip
    if "exceptionDetails" in result:  # never said back: the arguments may hold a secret
        raise LookupError("the form's document refused the worker's script")
    returned = result["result"]
    if not by_value and returned.get("type") == "object" and returned.get("objectId"):
        return Remote(returned["objectId"])
    return returned.get("value")


def _missing(answer: Any) -> str:
    """A script's word for a selector that found nothing usable, as said in an error."""
    return "not a CSS selector" if answer == "not a CSS selector" else f"{answer} on the page"
