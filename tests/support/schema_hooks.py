"""Schemathesis hooks for the schema fuzz run (tests/test_schema.py), loaded
through SCHEMATHESIS_HOOKS: whatever the fuzzer generates, the worker never
reaches beyond loopback, no call holds the page for long, and the one rule
between headers that OpenAPI 3.0 cannot state is applied.

An `X-Callback-Url` the worker would accept is rewritten to the discard port
on loopback (nothing listens: refused at once); one it refuses is sent as
generated, so the header's validation is fuzzed too, and answers 400 before
any traffic. Any `url` parameter (web/open, primitive/goto) is rewritten the
same way (one the worker refuses is left as it is, to be refused), and the fuzz worker runs its browser behind a dead loopback proxy,
so a navigation the fuzzer finds some other way fails too.

Each action's own operation (`x-fuzz-params` lists its parameters) gets
short waits: a time parameter the schema allows is cut to a few hundred
milliseconds, and one left out (whose default is up to 60 s) is given so.
Only values the schema allows are cut, so an invalid value stays invalid.

`Idempotency-Key` is checked on job starts only; a plain call ignores it,
whatever its value (the header's description says so). A key the worker
would refuse, sent without a job header, gets `X-Result-Ttl: 1`, so it is
fuzzed where it is checked.
"""

from __future__ import annotations

from typing import Any

import schemathesis
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from rest_framework import serializers

from core.errors import BadJobHeader
from core.shapes import NavigationUrl
from jobs.options import CALLBACK_HEADER, IDEMPOTENCY_HEADER, TTL_HEADER, parse_callback, parse_idempotency_key

# What may surround a JSON value (RFC 8259): all an empty body holds.
JSON_WHITESPACE = b" \t\n\r"
NOWHERE = "http://127.0.0.1:9/"  # the discard port: nothing listens, refused at once
URL_PARAMETERS = ("url",)
NAVIGATIONS = ("/web/open", "/primitive/goto")  # their `url` is a NavigationUrl
# Time parameters: (the most the schema allows, the most a fuzz call waits).
SHORT = {
    "timeout_ms": (600_000, 300),
    "ms": (600_000, 300),
    "max_seconds": (3600, 0.5),
    "scroll_pause_ms": (60_000, 0),
    "pause_ms": (10_000, 0),
    "limit": (100_000, 10),
}


def accepted(parse: Any, value: Any) -> bool:
    try:
        parse(str(value))
    except BadJobHeader:
        return False
    return True


def accepted_url(value: Any, *, navigation: bool = False) -> bool:
    """Whether the worker takes `value` for a `url`: a navigation's
    (web/open, primitive/goto: core.shapes.NavigationUrl, which takes more
    hosts) or any other's (Django's URLValidator)."""
    try:
        if navigation:
            NavigationUrl().run_validation(value)
        else:
            URLValidator()(value)
    except (ValidationError, serializers.ValidationError):
        return False
    return True


def shorten(container: dict[str, Any], declared: set[str]) -> None:
    for name, (most, short) in SHORT.items():
        value = container.get(name)
        if name not in container and name in declared:
            container[name] = short
        elif isinstance(value, int | float) and not isinstance(value, bool) and short < value <= most:
            container[name] = short
    wait = container.get("wait_for")
    if isinstance(wait, dict):
        shorten(wait, {"timeout_ms"})


@schemathesis.hook
def before_call(context: schemathesis.HookContext, case: schemathesis.Case, kwargs: dict[str, Any]) -> None:
    headers = case.headers if case.headers is not None else {}
    for name, value in list(headers.items()):
        if name.lower() == CALLBACK_HEADER.lower() and accepted(parse_callback, value):
            headers[name] = NOWHERE
    names = {name.lower(): name for name in headers}
    key = names.get(IDEMPOTENCY_HEADER.lower())
    job = TTL_HEADER.lower() in names or CALLBACK_HEADER.lower() in names
    if key is not None and not job and not accepted(parse_idempotency_key, headers[key]):
        headers[TTL_HEADER] = "1"
    raw = case.body.encode() if isinstance(case.body, str) else case.body
    if isinstance(raw, bytes) and not raw.strip(JSON_WHITESPACE):
        # A body of JSON's whitespace only is no parameters, `{}` (API.md;
        # tests/test_empty_body.py), where the fuzzer sent it as random bytes
        # to be refused: a form feed (not JSON's whitespace) is, with 422.
        case.body = b"\x0c"
    declared = set(case.operation.definition.raw.get("x-fuzz-params", ()))
    navigation = case.operation.path.endswith(NAVIGATIONS)
    for container in (case.query, case.body):
        if isinstance(container, dict):
            for name in URL_PARAMETERS:
                if name in container and accepted_url(container[name], navigation=navigation):
                    container[name] = NOWHERE
            if declared:
                shorten(container, declared)
