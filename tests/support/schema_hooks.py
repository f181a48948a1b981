"""Schemathesis hooks for the schema fuzz run (tests/test_schema.py), loaded
through SCHEMATHESIS_HOOKS: whatever the fuzzer generates, the worker never
reaches beyond loopback.

An `X-Callback-Url` the worker would accept is rewritten to the discard port
on loopback (nothing listens: refused at once); one it refuses is sent as
generated, so the header's validation is fuzzed too, and answers 400 before
any traffic. Any `url` parameter (web/open, primitive/goto) is rewritten the
same way, and the fuzz worker runs its browser behind a dead loopback proxy,
so a navigation the fuzzer finds some other way fails too.
"""

from __future__ import annotations

from typing import Any

import schemathesis

from core.api import ApiError
from jobs.options import CALLBACK_HEADER, parse_callback

NOWHERE = "http://127.0.0.1:9/"  # the discard port: nothing listens, refused at once
URL_PARAMETERS = ("url",)


def accepted_callback(value: Any) -> bool:
    try:
        parse_callback(str(value))
    except ApiError:
        return False
    return True


@schemathesis.hook
def before_call(context: schemathesis.HookContext, case: schemathesis.Case, kwargs: dict[str, Any]) -> None:
    for name, value in list((case.headers or {}).items()):
        if name.lower() == CALLBACK_HEADER.lower() and accepted_callback(value):
            case.headers[name] = NOWHERE
    for container in (case.query, case.body):
        if isinstance(container, dict):
            for name in URL_PARAMETERS:
                if name in container:
                    container[name] = NOWHERE
