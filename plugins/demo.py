"""The `demo` family: flows on the demo site this worker serves under /demo/.

It drives the site through the browser the way a plugin for a real social
site would (open a profile, scroll a following list), so a newcomer can try a
minutes-long job with no internet. It knows the site only by its markup, not
by its code.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from playwright.async_api import Page
from playwright.async_api import TimeoutError as PlaywrightTimeoutError
from rest_framework import serializers

from core.api import MAY_PASS
from core.db_thread import on_db_thread
from core.shapes import Text
from credentials.selectors import credential_shown
from plugins.framework import Context, Family, PluginError
from plugins.signing_in import CredentialOffOrigin, fill_form

family = Family("demo")

# 1 to 30 (max_length) of a-z, 0-9, _ and ., not dots only.
HANDLE_PATTERN = r"[a-z0-9_.]*[a-z0-9_][a-z0-9_.]*"
# How long one scroll may take to bring new entries, beyond the page's delay.
LOAD_WAIT_MS = 15_000
# Hosts a server listens on that a browser cannot dial.
WILDCARD_HOSTS = {"", "0.0.0.0", "::"}


def demo_url(path: str = "") -> str:
    """The address of a demo page on this worker, e.g. `demo_url("alice/")`."""
    host = settings.PENELOPE_HOST
    if host in WILDCARD_HOSTS:
        host = "127.0.0.1"
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    return f"http://{host}:{settings.PENELOPE_PORT}/demo/{path}"


class HandleParams(serializers.Serializer):
    handle = Text(pattern=HANDLE_PATTERN, max_length=30, invalid="A handle is 1 to 30 of a-z, 0-9, '_' and '.'.")


class FollowingParams(HandleParams):
    limit = serializers.IntegerField(min_value=1, max_value=10_000, default=50)
    pause_ms = serializers.IntegerField(min_value=0, max_value=10_000, default=settings.DEMO_PAUSE_MS)


# Reads what kind of demo page is shown, and the following list if there is one.
READ_PAGE_JS = """() => {
    const body = document.body;
    const list = document.getElementById("following");
    return {
        kind: (body && body.dataset.demoPage) || null,
        handle: (body && body.dataset.handle) || null,
        handles: list ? Array.from(list.querySelectorAll("li.following"), li => li.dataset.handle) : [],
        total: list ? Number(list.dataset.total) : null,
        complete: list ? list.dataset.complete === "true" : false,
    };
}"""

# True once the list holds more than `count` entries, or has reached its end.
MORE_ENTRIES_JS = """(count) => {
    const list = document.getElementById("following");
    return !list || list.dataset.complete === "true" || list.querySelectorAll("li.following").length > count;
}"""


async def open_demo_page(page: Page, path: str, *, handle: str, expected_kind: str) -> dict[str, Any]:
    """Go to a demo page and answer what it shows; 404 for a missing account."""
    if not settings.PENELOPE_DEMO:
        raise PluginError(503, "The demo site is off on this worker (PENELOPE_DEMO=0).")
    response = await page.goto(demo_url(path), wait_until="domcontentloaded")
    shown = await page.evaluate(READ_PAGE_JS)
    if shown["kind"] == "missing":
        raise PluginError(404, f"Account {handle} does not exist.")
    if shown["kind"] != expected_kind:
        status = response.status if response else "nothing"
        raise PluginError(502, f"The demo site answered {status} without the {expected_kind} page of {handle}.")
    return shown


@family.action("open-account", params=HandleParams)
async def open_account(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """The profile of an account: `{handle, name, followers, following}`."""
    handle = params["handle"]
    await open_demo_page(page, f"{handle}/", handle=handle, expected_kind="profile")
    profile = page.locator(".profile")
    return {
        "handle": handle,
        "name": (await profile.locator(".name").inner_text()).strip(),
        "followers": int(await profile.locator(".followers").get_attribute("data-count")),
        "following": int(await profile.locator(".following").get_attribute("data-count")),
    }


def following_time_limit(params: dict[str, Any]) -> float:
    # Each batch of ten costs the page's delay plus our pause (both pause_ms),
    # with two seconds of slack for the browser.
    batches = params["limit"] / 10
    return 60 + batches * (2 * params["pause_ms"] / 1000 + 2)


def report_following(ctx: Context, loaded: int, limit: int, total: int) -> None:
    goal = min(limit, total)
    ctx.progress(done=min(loaded, goal), total=goal, message=f"{min(loaded, goal)} of {goal} handles")


@family.action("get-following", params=FollowingParams, timeout_s=following_time_limit)
async def get_following(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Scroll an account's following list like a person: to the bottom, wait
    for the next entries, pause; until `limit` handles or the end of the list.
    Answers `{handle, following: [handles], count, total}`."""
    handle, limit, pause_ms = params["handle"], params["limit"], params["pause_ms"]
    # The page waits pause_ms before each batch too, like a slow network.
    shown = await open_demo_page(
        page, f"{handle}/following/?delay_ms={pause_ms}", handle=handle, expected_kind="following"
    )
    while len(shown["handles"]) < limit and not shown["complete"]:
        loaded = len(shown["handles"])
        report_following(ctx, loaded, limit, shown["total"])
        await page.evaluate("() => window.scrollTo(0, document.documentElement.scrollHeight)")
        await page.wait_for_function(MORE_ENTRIES_JS, arg=loaded, timeout=pause_ms + LOAD_WAIT_MS)
        await page.wait_for_timeout(pause_ms)
        shown = await page.evaluate(READ_PAGE_JS)
    following = shown["handles"][:limit]
    report_following(ctx, len(following), limit, shown["total"])
    return {"handle": handle, "following": following, "count": len(following), "total": shown["total"]}


# How long a Confirm pressed just before Done may take to land.
CONFIRM_WAIT_MS = 5_000


class SignInParams(HandleParams):
    wait_s = serializers.IntegerField(
        min_value=1, max_value=3600, default=600, help_text="Seconds a person has to pass the checkpoint."
    )
    credential = Text(
        pattern=r"[a-z0-9_-]{1,64}", max_length=64, required=False,
        invalid="a credential's name is 1 to 64 of a-z, 0-9, '_' and '-'.",
        help_text=(
            "A credential of the persona's for the demo site (its password and authenticator secret): the action "
            "signs in with them on /demo/sign-in/password/, and no person is asked."
        ),
    )


@family.action("sign-in", params=SignInParams, timeout_s=60)
async def sign_in(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Sign in to the demo site as `handle`. The site stops at a checkpoint
    (a code sent to the account's inbox): the action asks a person to pass
    it through the page's live view, then checks that it is signed in.
    Answers `{handle, signed_in: true, asked_human}`; 409 when the person gave
    up or the checkpoint was not passed, 504 when nobody answered in time.
    With `credential` (the persona's, for the demo site's origin), it signs
    in with that credential's password and one-time code instead, and asks
    no one: `asked_human` is false."""
    handle, wait_s = params["handle"], params["wait_s"]
    if not settings.PENELOPE_DEMO:
        raise PluginError(503, "The demo site is off on this worker (PENELOPE_DEMO=0).")
    if params.get("credential"):
        return await sign_in_unattended(page, handle, params["credential"], ctx)
    await page.goto(demo_url("sign-in/"), wait_until="domcontentloaded")
    await page.fill("#handle", handle)
    async with page.expect_navigation(wait_until="domcontentloaded"):
        await page.click("#sign-in")
    shown = await page.evaluate(READ_PAGE_JS)
    if shown["kind"] == "sign-in":
        raise PluginError(404, f"Account {handle} does not exist.")
    asked = shown["kind"] == "checkpoint"
    if asked:
        answer = await ctx.ask_human(
            reason=(
                f"The demo site wants a code for @{handle}. Open its inbox, /demo/mail-inbox/{handle}/ on this "
                "worker, in your own browser; type the code into the page's Code field here, press Confirm, "
                "then Done."
            ),
            timeout_s=wait_s,
        )
        if answer == "gave_up":
            raise PluginError(409, f"A person gave up the checkpoint of {handle}.", retry=False)
        if answer == "timeout":
            raise PluginError(504, f"No one passed the checkpoint of {handle} within {wait_s} s.", retry=False)
        try:  # the person's Confirm may still be on its way
            await page.wait_for_url("**/demo/signed-in/", wait_until="domcontentloaded", timeout=CONFIRM_WAIT_MS)
        except PlaywrightTimeoutError:
            pass  # not signed in: the page says what it shows instead
        shown = await page.evaluate(READ_PAGE_JS)
    if shown["kind"] != "signed-in":
        raise PluginError(409, f"The checkpoint of {handle} was not passed: the page shows {shown['kind']}.", retry=False)
    return {"handle": handle, "signed_in": True, "asked_human": asked}


async def sign_in_unattended(page: Page, handle: str, name: str, ctx: Context) -> dict[str, Any]:
    """Sign in with the password and one-time code of credential `name`,
    typed where nothing records them (plugins/signing_in.py)."""
    if (await on_db_thread(credential_shown)(name))["username"] != handle:  # before any use: nothing revealed
        raise PluginError(422, f"Credential {name} is not @{handle}'s: its username is another.", retry=False)
    await page.goto(demo_url("sign-in/password/"), wait_until="domcontentloaded")
    revealed = await ctx.credential(name)
    fields = {"username": "#username", "password": "#password", "totp": "#code"}
    try:
        await fill_form(page, revealed, fields, "#sign-in")
    except CredentialOffOrigin as refused:
        raise PluginError(403, str(refused), retry=False) from None
    except (LookupError, ValueError) as error:
        raise PluginError(422, f"Signing in with {name}: {error}.", retry=False) from None
    await page.wait_for_load_state("domcontentloaded")
    shown = await page.evaluate(READ_PAGE_JS)
    if shown["kind"] != "signed-in":
        raise PluginError(409, f"The demo site did not take the password and code of credential {name}.", retry=False)
    return {"handle": handle, "signed_in": True, "asked_human": False}


@family.action("state")
async def state(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """The family's state reader: which account the page shows, whether it is
    the following list and how many entries it has loaded. Changes nothing."""
    shown = await page.evaluate(READ_PAGE_JS)
    kind = shown["kind"]
    on_list = kind == "following"
    return {
        "url": page.url,
        "view": kind,
        "handle": shown["handle"] if kind in ("profile", "following", "checkpoint", "signed-in", "inbox") else None,
        "on_following_list": on_list,
        "loaded": len(shown["handles"]),
        "total": shown["total"] if on_list else None,
        "complete": shown["complete"],
    }


class FlakyParams(serializers.Serializer):
    fail_times = serializers.IntegerField(
        min_value=0, max_value=10, default=1, help_text="How many attempts fail before one succeeds."
    )
    status = serializers.ChoiceField(
        choices=sorted(MAY_PASS), default=503, help_text="The status each failing attempt answers."
    )


@family.action("flaky", params=FlakyParams, timeout_s=10)
async def flaky(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Fail on purpose, the way a site fails now and then, to see a retry
    (X-Retry) at work: each of a job's first `fail_times` attempts answers
    `status`, a failure that may pass; the next one answers `{attempt}`.
    It counts with the job's own attempt number, so no two jobs share a
    count; a plain call is a first attempt. It neither uses nor needs the
    page or the demo site."""
    fail_times, status = params["fail_times"], params["status"]
    if ctx.attempt <= fail_times:
        raise PluginError(
            status, f"demo/flaky fails attempt {ctx.attempt} on purpose (fail_times={fail_times}).", retry=True
        )
    return {"attempt": ctx.attempt}
