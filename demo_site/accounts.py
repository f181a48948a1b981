"""The demo site's accounts, computed from their handles.

There is no database: every fact about an account (whether it exists, its
name, its counts, whom it follows) is derived from a sha256 of its handle, so
the same handle shows the same profile in every worker and every test can
predict what a page will hold.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

# Lowercase letters, digits, `_` and `.`; not dots alone, which a browser
# would read as a relative path.
HANDLE_RE = re.compile(r"(?!\.+$)[a-z0-9_.]{1,30}")

# Handles that never exist, so a newcomer can see a 404 without guessing.
MISSING_HANDLES = frozenset({"ghost"})
# Besides those, a handle whose digest starts with a byte below this is
# missing too: about 3 % of all handles, as on a real site where accounts go.
MISSING_BELOW = 8

MIN_FOLLOWING = 20
MAX_FOLLOWING = 2000

FIRST_NAMES = (
    "ada", "amir", "ana", "bea", "carlos", "chen", "dara", "elena", "emeka", "farah",
    "felix", "greta", "hana", "ivan", "jonas", "kemal", "lena", "luca", "maria", "mei",
    "nadia", "noor", "omar", "pablo", "priya", "quinn", "rosa", "sami", "sofia", "tariq",
    "una", "vera", "wei", "yara", "yusuf", "zoe",
)
LAST_NAMES = (
    "abara", "berg", "costa", "dubois", "eriksen", "fischer", "garcia", "haddad", "ito",
    "jensen", "kowalski", "lopez", "mensah", "novak", "okafor", "petrov", "quispe",
    "rossi", "santos", "tanaka", "umar", "varga", "weber", "xu", "yilmaz", "zhang",
)


@dataclass(frozen=True)
class Account:
    handle: str
    name: str
    followers: int
    following: int


def valid_handle(handle: str) -> bool:
    return HANDLE_RE.fullmatch(handle) is not None


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def _number(digest: bytes, start: int, end: int) -> int:
    return int.from_bytes(digest[start:end], "big")


def exists(handle: str) -> bool:
    if not valid_handle(handle) or handle in MISSING_HANDLES:
        return False
    return _digest(handle)[0] >= MISSING_BELOW


def display_name(handle: str) -> str:
    """A name that reads like the handle: `maria_lopez17` is Maria Lopez; a
    single word gets a surname picked by the digest."""
    words = [word for word in re.split(r"[^a-z]+", handle) if word]
    if not words:
        return f"User {handle}"
    if len(words) == 1:
        words.append(LAST_NAMES[_number(_digest(handle), 12, 14) % len(LAST_NAMES)])
    return " ".join(word.capitalize() for word in words)


def account(handle: str) -> Account | None:
    """The account of `handle`, or None when it does not exist."""
    if not exists(handle):
        return None
    digest = _digest(handle)
    # Followers spread over orders of magnitude, 10 to about 100 000, like a
    # real network; following stays within what one person follows.
    spread = _number(digest, 4, 8) / 2**32
    followers = int(10 ** (1 + 4 * spread))
    following = MIN_FOLLOWING + _number(digest, 8, 12) % (MAX_FOLLOWING - MIN_FOLLOWING + 1)
    return Account(handle=handle, name=display_name(handle), followers=followers, following=following)


def followed_handle(handle: str, position: int) -> str:
    """The handle at `position` (from 0) in `handle`'s following list.

    The position's number ends the handle, so one list never repeats itself.
    """
    digest = _digest(f"{handle}/following/{position}")
    first = FIRST_NAMES[_number(digest, 0, 4) % len(FIRST_NAMES)]
    last = LAST_NAMES[_number(digest, 4, 8) % len(LAST_NAMES)]
    return f"{first}_{last}{position + 1}"


def following(account: Account, offset: int, count: int) -> list[str]:
    """The handles `account` follows, from `offset`, at most `count` of them."""
    end = min(account.following, offset + count)
    return [followed_handle(account.handle, position) for position in range(offset, end)]


# The one account that signs in with a password and a one-time code from an
# authenticator (RFC 6238, 30-second steps), as most sites ask. Its secrets
# are the demo's own, written here and in docs/guides/CREDENTIALS.md, so
# anyone can keep them as a credential and watch `demo/sign-in` pass alone.
SECURE_HANDLE = "carol"
SECURE_PASSWORD = "correct horse battery staple"
SECURE_TOTP_SECRET = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"
