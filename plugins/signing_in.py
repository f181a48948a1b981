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
Each value goes into the form's document only, checked as it is typed
(plugins/form_typing.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from core.db_thread import on_db_thread
from credentials.selectors import credential_shown
from credentials.services import areveal_credential
from plugins.form_typing import CredentialOffOrigin, Filling, origin_of

if TYPE_CHECKING:
    from playwright.async_api import Page

    from credentials.services import Revealed

# What plugins and the framework take from here; the refusal and origin_of
# are plugins/form_typing.py's, which checks each value as it is typed.
__all__ = ["CredentialOffOrigin", "fill_form", "origin_of", "reveal_for"]


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
