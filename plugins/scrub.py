"""A run's secrets taken out of what X-Debug keeps of it.

A credential a flow used (`ctx.credential`) is typed where Playwright's
trace does not record it (plugins/signing_in.py), but a form's submit still
sends it: the trace's network log keeps each request's body, and a page may
show or log it. So before the artifacts are stored, every value the run
revealed is replaced in each of them (in every member of the trace's zip),
in the forms a request or a page carries it: as it is, URL-encoded (a form's
body, a query), JSON-escaped and HTML-escaped.
"""

from __future__ import annotations

import html
import io
import json
import zipfile
from collections.abc import Collection
from urllib.parse import quote, quote_plus

HIDDEN = b"[a credential's value]"


def forms_of(value: str) -> set[bytes]:
    """The byte strings `value` may be found as."""
    forms = {value, quote(value, safe=""), quote_plus(value), json.dumps(value)[1:-1], html.escape(value)}
    return {form.encode() for form in forms if form}


def scrubbed(data: bytes, content_type: str, values: Collection[str]) -> bytes:
    """`data` (a whole artifact) with every form of every value replaced."""
    forms = sorted({form for value in values if value for form in forms_of(value)}, key=len, reverse=True)
    if not forms:
        return data
    if content_type == "application/zip":
        return _zip_scrubbed(data, forms)
    return _replaced(data, forms)


def _replaced(data: bytes, forms: list[bytes]) -> bytes:
    for form in forms:
        data = data.replace(form, HIDDEN)
    return data


def _zip_scrubbed(data: bytes, forms: list[bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for member in source.infolist():
            target.writestr(member, _replaced(source.read(member), forms))
    return out.getvalue()
