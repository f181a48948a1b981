"""What a credential may be, checked before anything is stored or sealed.

A refusal is `InvalidCredential` naming the field, in a sentence that never
holds what was sent: a value may be a secret (a password sent as the url, a
url with its user-info), so none is ever echoed.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pyotp

from core.errors import InvalidCredential

NAME_PATTERN = "^[a-z0-9_-]{1,64}$"
NAME = re.compile(NAME_PATTERN.strip("^$"))
FIELDS = ("url", "username", "password", "totp_secret", "notes")
# A sent name that may be said back in a refusal (the project's own rule for
# parameters: plugins/declared.py); another is "a field".
SAYABLE_FIELD = re.compile(r"[A-Za-z0-9_.-]{1,64}")

MAX_URL = 300  # Credential.url's column
MAX_LENGTH = {"username": 1024, "password": 1024, "totp_secret": 256, "notes": 10_000}
SCHEMES = {"http": 80, "https": 443}
HOST_NAME = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*\.?")
# Base32 as sites show a TOTP secret: A-Z and 2-7, read with spaces and in
# lower case, its padding optional.
BASE32 = re.compile(r"[A-Z2-7]+")


class SiteTotp(pyotp.TOTP):
    """RFC 6238 codes for a site's secret. pyotp refuses secrets under 112
    bits (NIST's advice to a verifier); many sites hand out 80 (16 base32
    characters), and the worker is the site's client, not its verifier."""

    min_secret_length_bits = 80


@dataclass(frozen=True)
class Cleaned:
    """A credential's fields, checked: the secrets as `sealing.seal` takes them."""

    url: str
    username: str
    secrets: dict[str, str | None]


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise InvalidCredential("name", "1 to 64 of a-z, 0-9, '_' and '-'.", "Invalid credential name: 1 to 64 of a-z, 0-9, '_' and '-'.")
    return name


def clean(name: Any, body: Any) -> Cleaned:
    """The credential `name` as `body` describes it (a PUT's whole body), or
    InvalidCredential for the first field that is not valid."""
    check_name(name)
    if not isinstance(body, dict):
        raise InvalidCredential("body", "must be a JSON object.", "A credential is a JSON object of url, username, password, totp_secret and notes.")
    unknown = sorted(set(body) - set(FIELDS), key=str)
    if unknown:
        sayable = isinstance(unknown[0], str) and SAYABLE_FIELD.fullmatch(unknown[0])
        said = f"'{unknown[0]}'" if sayable else "a field"
        more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
        raise InvalidCredential(
            unknown[0] if sayable else "(unknown)", "not a field of a credential.",
            f"Unknown parameter {said}{more} for a credential, which takes {', '.join(FIELDS)}.",
        )
    url = origin(body.get("url"))
    texts = {field: text(field, body.get(field)) for field in ("username", "password", "totp_secret", "notes")}
    totp_secret = texts["totp_secret"] and totp_secret_of(texts["totp_secret"])
    return Cleaned(
        url=url,
        username=texts["username"] or "",
        secrets={"password": texts["password"] or None, "totp_secret": totp_secret or None, "notes": texts["notes"] or None},
    )


def text(field: str, value: Any) -> str | None:
    """An optional string field: None (null or not sent), or the string as
    sent; an empty one is the same as none."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidCredential(field, "must be a string, or null.")
    if len(value) > MAX_LENGTH[field]:
        raise InvalidCredential(field, f"at most {MAX_LENGTH[field]} characters.")
    if "\x00" in value:
        raise InvalidCredential(field, "must not hold the NUL character.")
    return value


# What `origin` may take, as the document states it (a superset: the host
# and the port are checked besides): http or https in any case, a netloc
# without spaces, controls or user-info, and `/` at most after it.
ORIGIN_PATTERN = "[hH][tT][tT][pP][sS]?://[^\\u0000-\\u0020\\u007f/?#@]+/?"


def origin(value: Any) -> str:
    """The site's origin as a browser writes it: `scheme://host[:port]`, the
    scheme and host in lower case, a default port left out."""
    why = "the site's origin, http(s)://host[:port], with no path, query, fragment or user-info."
    if value is None:
        raise InvalidCredential("url", f"required: {why}")
    if not isinstance(value, str):
        raise InvalidCredential("url", f"must be a string: {why}")
    if len(value) > MAX_URL:
        raise InvalidCredential("url", f"at most {MAX_URL} characters: {why}")
    if not value.isprintable() or " " in value:
        raise InvalidCredential("url", f"no spaces or control characters: {why}")
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        raise InvalidCredential("url", f"not a URL: {why}") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise InvalidCredential("url", f"the scheme must be http or https: {why}")
    if "@" in parts.netloc:
        raise InvalidCredential("url", f"no user-info (user:password@): {why}")
    if parts.path not in ("", "/") or "?" in value or "#" in value:
        raise InvalidCredential("url", f"an origin only: {why}")
    host = host_of(parts.hostname or "", bracketed=parts.netloc.startswith("["))
    if host is None:
        raise InvalidCredential("url", f"no valid host: {why}")
    if port == 0:
        raise InvalidCredential("url", f"port 0 is no port: {why}")
    shown_port = f":{port}" if port is not None and port != SCHEMES[scheme] else ""
    return f"{scheme}://{host}{shown_port}"


def host_of(hostname: str, *, bracketed: bool) -> str | None:
    """The host as an origin writes it (IPv6 in brackets, a name in its ASCII
    form), None when it is none."""
    if bracketed:
        try:
            return f"[{ipaddress.IPv6Address(hostname).compressed}]"
        except ValueError:
            return None
    try:
        ascii_host = hostname.encode("idna").decode("ascii").lower()
    except UnicodeError:
        return None
    if not ascii_host or len(ascii_host) > 253 or not HOST_NAME.fullmatch(ascii_host):
        return None
    return ascii_host


def totp_secret_of(value: str) -> str:
    """A TOTP secret as sites show it (`jbsw y3dp ehpk 3pxp`): spaces, padding
    and case taken away, and checked by making a code with it."""
    secret = re.sub(r"[\s-]", "", value).upper().rstrip("=")
    why = "a base32 secret (A-Z and 2-7, at least 16 characters), as the site showed it."
    if not BASE32.fullmatch(secret):
        raise InvalidCredential("totp_secret", why)
    try:
        SiteTotp(secret).now()
    except ValueError:  # base64's Error (a ValueError) and pyotp's refusal of a short secret
        raise InvalidCredential("totp_secret", why) from None
    return secret
