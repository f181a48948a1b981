"""The full key's reserved share of the caps a read key can fill.

A read key (PENELOPE_READ_KEYS) opens event sockets and long-polls as the
full key does, so a dashboard that opens many could leave the worker's own
clients none. The last tenth of MAX_EVENT_SOCKETS and of MAX_WAITERS (at
least one place) is kept for the full key: a read key is refused once the
count reaches the cap less that share, with the cap's own answer. Live
links need no share: a read key makes none (403), so every one of a page's
links is the full key's.

Each cap counts and takes its place in one step on the event loop (no await
between), so the share holds when requests arrive together as well.
"""

from __future__ import annotations

import math

from core.auth import READ

# The part of a cap kept for the full key.
FULL_KEY_SHARE = 0.1


def full_key_reserve(cap: int) -> int:
    """Places of `cap` that only the full key may take: a tenth, rounded up, at least one."""
    return max(1, math.ceil(cap * FULL_KEY_SHARE))


def limit_for(role: str | None, cap: int) -> int:
    """How many places may be taken when a key of `role` asks for one more."""
    return cap - full_key_reserve(cap) if role == READ else cap


def has_room(role: str | None, taken: int, cap: int) -> bool:
    """Whether a key of `role` may take one more place when `taken` of `cap` are taken."""
    return taken < limit_for(role, cap)


def kept_for_full_key(role: str | None, cap: int) -> str:
    """What a read key's refusal adds after the cap's name: the places kept for the full key."""
    return f", the last {full_key_reserve(cap)} kept for the full key" if role == READ else ""
