"""Shapes every route shares: the envelope, success, `true`/`false` fields
and a TTL. They render answers (`core.rest.answer`) and describe them in the
OpenAPI document; each route's own shapes live beside its view."""

from __future__ import annotations

import functools
import re
from typing import Any
from urllib.parse import urlsplit

from django.core.validators import URLValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

JOB_ID_PATTERN = "^[0-9a-f]{16}$"
LEASE_ID_PATTERN = "^[0-9a-f]{32}$"
# Numbers (whole numbers, seconds, times: `WholeNumber`, `Seconds`, `Moment`)
# are in core/numbers.py, which the console's search reads on the waker too,
# without these settings.


@extend_schema_field({"type": "boolean", "enum": [True]})
class TrueField(serializers.BooleanField):
    """`"success": true`."""


@extend_schema_field({"type": "boolean", "enum": [False]})
class FalseField(serializers.BooleanField):
    """`"success": false`."""


class ErrorEnvelope(serializers.Serializer):
    """Every failure: its status says what happened, `error` says it to a person."""

    success = FalseField()
    error = serializers.CharField(help_text="One sentence for a person; branch on the status, not on it.")
    page_id = serializers.CharField(allow_null=True, help_text="The page the request concerns, or null.")


class Success(serializers.Serializer):
    success = TrueField()
    page_id = serializers.CharField(allow_null=True, help_text="The page the answer concerns, or null.")


class PageSuccess(Success):
    page_id = serializers.CharField(help_text="The page the answer concerns.")


# --- string parameters, taken as sent ----------------------------------------------------
#
# Patterns here are read alike by Python's `re` (the server) and by ECMA-262
# and jsonschema-rs (the OpenAPI document and its readers): explicit classes
# and `\uXXXX` escapes only, no `\d`, `\s`, `\w` (Unicode-wide in Python,
# not in ECMA), no lookaround (fuzzers generate from them) and no `\Z`.

NO_NUL = "[^\\u0000]*"  # DRF's CharField refuses NUL (ProhibitNullCharactersValidator)


class FullMatch:
    """A validator: the whole value matches `pattern` (Python's `$` also
    matches before a trailing newline; `fullmatch` does not)."""

    def __init__(self, pattern: str, message: str) -> None:
        self.compiled = re.compile(pattern)
        self.message = message

    def __call__(self, value: str) -> None:
        if not self.compiled.fullmatch(value):
            raise serializers.ValidationError(self.message, code="invalid")


class Text(serializers.CharField):
    """A string parameter taken exactly as the client sent it.

    DRF's CharField trims a value before it checks its length, and
    `str.strip` also strips the controls \\x1c-\\x1f and Unicode spaces: a
    value one character over its `maxLength` passed, and `"\\x1c"` answered
    "may not be blank" under `minLength: 1`. A Text is not trimmed, so its
    length is checked on what was sent, and the browser gets the value as
    sent. Its `pattern` goes into the OpenAPI document (`schema_pattern`, read
    by `plugins.schema.field_schema`); with `invalid`, the field checks it
    (the whole value must match) and answers that sentence, without, the
    serializer does, in a sentence that names more."""

    def __init__(self, *, pattern: str | None = None, invalid: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)
        self.schema_pattern = f"^(?:{pattern or NO_NUL})$"
        if pattern is not None and invalid is not None:
            self.validators.append(FullMatch(pattern, invalid))

    def to_internal_value(self, data: Any) -> str:
        # DRF's CharField takes a number as its digits; the document says string.
        if not isinstance(data, str):
            raise serializers.ValidationError("must be a string.", code="invalid")
        return super().to_internal_value(data)


class Flag(serializers.BooleanField):
    """A true/false parameter: JSON's `true` and `false`, or in a query string
    the words DRF reads (`true`, `1`, `yes`, `on`, …). DRF's BooleanField also
    takes the numbers 1 and 0 in a JSON body, where the document says boolean."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool | str):
            self.fail("invalid", input=data)
        return super().to_internal_value(data)


# What Django's URLValidator (DRF's URLField) accepts, as one pattern: its own
# regular expression with its lookarounds spelled out and IGNORECASE expanded,
# and what it checks besides: \t, \r and \n nowhere, the scheme one of
# http, https, ftp and ftps, urlsplit's refusals (a lone bracket, a netloc
# character whose NFKC form is one of / ? # @ :, a user name opening with ? or #),
# a bracketed host a valid
# IPv6 address. Not in it: a host name of at most 253 characters (said in the
# description), and IPv6 addresses with an embedded IPv4 part (refused here,
# accepted by the server).
MAX_URL_LENGTH = 2048  # django.core.validators.MAX_URL_LENGTH: URLValidator's own limit


def python_spaces() -> str:
    """What Python's `\\s` matches in a str, as escapes for a class."""
    return "".join(f"\\u{code:04x}" for code in range(0x3001) if re.match(r"\s", chr(code)))


def _class_range(low: int, high: int, without: set[int]) -> str:
    """`low`-`high` less `without`, as escaped class ranges."""
    ranges, start = [], None
    for code in range(low, high + 2):
        inside = code <= high and code not in without
        if inside and start is None:
            start = code
        elif not inside and start is not None:
            ranges.append(f"\\u{start:04x}" if start == code - 1 else f"\\u{start:04x}-\\u{code - 1:04x}")
            start = None
    return "".join(ranges)


def _ipv6_pattern() -> str:
    h4 = "[0-9a-fA-F]{1,4}"
    forms = [f"(?:{h4}:){{7}}{h4}"]
    for left in range(8):
        head = f"(?:{h4}:){{{left - 1}}}{h4}" if left else ""
        right = 7 - left
        tail = f"(?:{h4}(?::{h4}){{0,{right - 1}}})?" if right else ""
        forms.append(f"{head}::{tail}")
    return "|".join(forms)


def url_pattern(*, any_name: bool = False) -> str:
    """Django's URLValidator as one pattern; with `any_name`, a host may be
    any name of labels (one or more, with or without a last dot) besides an
    IPv4 address and a bracketed IPv6 one (`NavigationUrl`)."""
    spaces = python_spaces()
    nfkc_bad = {0x2047, 0x2048, 0x2049, 0x2100, 0x2101, 0x2105, 0x2106, 0x2A74,
                0xFE13, 0xFE16, 0xFE55, 0xFE56, 0xFE5F, 0xFE6B, 0xFF03, 0xFF0F, 0xFF1A, 0xFF1F, 0xFF20}  # fmt: skip
    wide = _class_range(0xA1, 0xFFFF, nfkc_bad)  # Django's "\u00a1-\uffff", less what urlsplit refuses
    letter = f"a-zA-Z{wide}"
    name = f"a-zA-Z0-9{wide}"
    label = f"[{name}](?:[{name}-]{{0,61}}[{name}])?"
    tld = f"\\.(?:[{letter}][{letter}-]{{0,61}}[{letter}]|[xX][nN]--[a-zA-Z0-9\\u0130\\u0131\\u017f\\u212a]{{1,59}})\\.?"
    host = f"{label}(?:\\.{label})*{tld}|[lL][oO][cC][aA][lL][hH][oO][sS][tT]"
    octet = "(?:0|25[0-5]|2[0-4][0-9]|1[0-9]?[0-9]?|[1-9][0-9]?)"
    ipv4 = f"{octet}(?:\\.{octet}){{3}}"
    ipv6 = f"\\[(?:{_ipv6_pattern()})\\]"
    hosts = f"{ipv6}|{label}(?:\\.{label})*\\.?" if any_name else f"{ipv4}|{ipv6}|{host}"
    refused = "".join(f"\\u{code:04x}" for code in sorted(nfkc_bad))
    userinfo_char = f"[^{spaces}\\u0000:@/\\[\\]{refused}]"
    # A user name opening with ? or # leaves urlsplit an empty netloc, so no host.
    userinfo_first = f"[^{spaces}\\u0000:@/\\[\\]?#{refused}]"
    scheme = "(?:[hH][tT][tT][pP][sS]?|[fF][tT][pP][sS]?)"
    return (
        f"{scheme}://(?:{userinfo_first}{userinfo_char}*(?::{userinfo_char}*)?@)?"
        f"(?:{hosts})"
        f"(?::[0-9]{{1,5}})?(?:[/?#][^{spaces}\\u0000]*)?"
    )


URL_PATTERN = url_pattern()


class Url(serializers.URLField):
    """A URL parameter, taken as sent (not trimmed), that Django's URLValidator
    accepts: at most 2048 characters whatever `max_length` says, and
    `URL_PATTERN` in the document."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        kwargs["max_length"] = min(kwargs.get("max_length", MAX_URL_LENGTH), MAX_URL_LENGTH)
        super().__init__(**kwargs)
        self.schema_pattern = f"^(?:{URL_PATTERN})$"


# --- a URL the browser goes to ------------------------------------------------------------
#
# Django's URLValidator takes a host name only with a top-level domain of
# letters, and `localhost` alone without one: `http://localhost.:8000/` (the
# same name, fully qualified), `http://127.1:8000/` (127.0.0.1 as browsers
# read it), `http://intranet/` were refused as "Enter a valid URL", though
# the browser opens each. For a navigation, the egress guard
# (BROWSER_REFUSE_PRIVATE) judges the address a host reaches, not the field
# its spelling: the field takes any host a browser takes, a name of labels
# with or without a last dot, and checks only what a browser would refuse
# itself (a host that ends in a number must be an IPv4 address, WHATWG URL's
# IPv4 parser).

NAVIGATION_URL_PATTERN = url_pattern(any_name=True)
INVALID_URL = "Enter a valid URL."  # Django's URLValidator's own sentence, as Url answers it
MAX_HOST_LENGTH = 253


def _ipv4_number(part: str) -> int | None:
    """WHATWG URL's IPv4 number parser: decimal, 0x hexadecimal or 0 octal; None when it is none."""
    radix = 10
    if part[:2].lower() == "0x":
        part, radix = part[2:], 16
    elif len(part) > 1 and part.startswith("0"):
        part, radix = part[1:], 8
    if part == "":
        return 0
    digits = "0123456789abcdef"[:radix]
    if not all(char in digits for char in part.lower()):
        return None
    return int(part, radix)


def ends_in_a_number(host: str) -> bool:
    """WHATWG URL's "ends in a number": the host is then read as an IPv4 address."""
    parts = host.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    last = parts[-1]
    return (last != "" and last.isascii() and last.isdigit()) or (
        last[:2].lower() == "0x" and _ipv4_number(last) is not None
    )


def valid_ipv4(host: str) -> bool:
    """Whether WHATWG URL's IPv4 parser takes `host` (`127.1`, `0x7f.0.0.1`, `2130706433`)."""
    parts = host.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    if len(parts) > 4 or "" in parts:
        return False
    numbers = [_ipv4_number(part) for part in parts]
    if any(number is None for number in numbers):
        return False
    *leading, last = numbers
    return all(number <= 255 for number in leading) and last < 256 ** (5 - len(numbers))


class NavigationUrl(Url):
    """A URL the browser goes to (`web/open`, `primitive/goto`): any host a
    browser takes (`NAVIGATION_URL_PATTERN`), its address left to the egress
    guard. Still refused: what the pattern refuses, a host past 253
    characters, and a host that ends in a number but is no IPv4 address."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators = [v for v in self.validators if not isinstance(v, URLValidator)]
        self.validators.append(navigable)
        self.schema_pattern = f"^(?:{NAVIGATION_URL_PATTERN})$"


@functools.cache
def navigable_pattern() -> re.Pattern[str]:
    # Compiled at the first check, not at import: it takes about 0.1 s, which
    # every start of the worker would pay.
    return re.compile(NAVIGATION_URL_PATTERN)


def navigable(value: str) -> None:
    """A NavigationUrl's check: the pattern, then the host's own rules (its
    length, and an IPv4 address as a browser reads it)."""
    if not navigable_pattern().fullmatch(value):
        raise serializers.ValidationError(INVALID_URL, code="invalid")
    try:
        host = urlsplit(value).hostname or ""
    except ValueError:
        raise serializers.ValidationError(INVALID_URL, code="invalid") from None
    if len(host.rstrip(".")) > MAX_HOST_LENGTH:
        raise serializers.ValidationError(INVALID_URL, code="invalid")
    if ":" not in host and ends_in_a_number(host) and not valid_ipv4(host):
        raise serializers.ValidationError(INVALID_URL, code="invalid")


# --- parameters a shape does not declare ------------------------------------------

# Unknown names listed in one answer, and the characters of each: a body may
# hold thousands of keys, each as long as the body allows.
MAX_NAMED = 5
MAX_NAME = 64


@functools.cache
def declared_fields(shape: type[serializers.Serializer]) -> dict[str, serializers.Field]:
    """The fields `shape` declares, built once: DRF builds a serializer's
    fields anew (a deep copy of each) for every instance, a cost every call
    would pay twice. Only read, never bound to data: the same for every
    call and every worker."""
    return dict(shape().fields)


def unknown_parameters(names: list[str], *, where: str, offer: list[str], owner: str = "") -> str:
    """The one sentence for parameters a route or an action does not declare,
    naming at most MAX_NAMED of them and what it takes instead (in `owner`,
    a nested object, when they are its)."""
    listed = ", ".join(f"'{name[:MAX_NAME]}'" for name in names[:MAX_NAMED])
    if len(names) > MAX_NAMED:
        listed += f" and {len(names) - MAX_NAMED} more"
    noun = "parameter" if len(names) == 1 else "parameters"
    takes = ", ".join(offer) if offer else "no parameters"
    return f"Unknown {noun} {listed} for {where}" + (f": '{owner}' takes {takes}." if owner else f", which takes {takes}.")
