"""`web/fill-credential`: a sign-in form filled from one of the persona's
credentials, whose values the client never holds and nothing records.

The credential must belong to the page's current origin, and so must the
document each value is typed into: the page's, or that of the iframe
`frame_selector` names. plugins/signing_in.py says how the values are typed,
how each is checked, and why nothing records them.
The selectors are CSS selectors: the fields are found in the page without
one of Playwright's recorded actions.
"""

from __future__ import annotations

from typing import Any

from playwright.async_api import Page
from rest_framework import serializers

from core.shapes import Text
from plugins.framework import Context, PluginError
from plugins.signing_in import CredentialOffOrigin, fill_form
from plugins.web.base import family

NAME = r"[a-z0-9_-]{1,64}"


class FillCredentialParams(serializers.Serializer):
    credential = Text(pattern=NAME, max_length=64, invalid="a credential's name is 1 to 64 of a-z, 0-9, '_' and '-'.",
                      help_text="The credential's name (PUT /api/v1/credentials/{name}).")  # fmt: skip
    username_selector = Text(max_length=1000, required=False, help_text="CSS selector of the username field.")
    password_selector = Text(max_length=1000, required=False, help_text="CSS selector of the password field.")
    totp_selector = Text(max_length=1000, required=False, help_text="CSS selector of the one-time code field.")
    submit_selector = Text(max_length=1000, required=False, help_text="CSS selector of the button that submits the form.")
    frame_selector = Text(max_length=1000, required=False, help_text=(
        "CSS selector of the iframe whose document holds the form, when the page's own does not; "
        "the frame must be on the credential's origin too."
    ))  # fmt: skip

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if not any(data.get(f"{kind}_selector") for kind in ("username", "password", "totp")):
            raise serializers.ValidationError("give at least one of username_selector, password_selector and totp_selector.")
        return data


@family.action("fill-credential", params=FillCredentialParams, timeout_s=30)
async def fill_credential(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Fill the sign-in form on the current page from credential `credential`
    (its username, password and current one-time code, each where a selector
    is given) and press `submit_selector` when given; in the document of
    the iframe `frame_selector` names, when given. Only on the credential's
    own origin, the page's and the form's document's (403 elsewhere).
    Answers `{credential, filled, submitted, left_the_form, url}`: what was
    typed, never a value; a form still on the page after it is emptied
    again."""
    name = params["credential"]
    revealed = await ctx.credential(name)
    fields = {kind: params.get(f"{kind}_selector") for kind in ("username", "password", "totp")}
    try:
        submit, frame = params.get("submit_selector"), params.get("frame_selector")
        done = await fill_form(page, revealed, fields, submit, frame=frame)
    except CredentialOffOrigin as refused:
        raise PluginError(403, str(refused), ctx.page_id, retry=False) from None
    except (LookupError, ValueError) as error:
        raise PluginError(422, f"fill-credential with {name}: {error}.", ctx.page_id, retry=False) from None
    return {"credential": name, **done, "url": page.url}
