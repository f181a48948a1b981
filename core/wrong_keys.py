"""Wrong keys answered slowly: the one rule of every route of the worker and
the waker that takes a key (a Bearer key, the console's sign-in form).

A request that offers a key that matches none waits for its refusal, and
the wrong keys of one address take turns: each is answered KEY_REFUSAL_S
after the one before it from that address. A guesser that opens many
connections at once still gets one wrong answer a turn. A right key is never
made to wait, nor is any other address held up: an operator signs in while
someone else guesses. A request that offers no key waits for nothing (it
guessed nothing).

What is kept is one moment an address: when its last wrong key's refusal is
due. A client that goes away before its answer keeps its turn taken, so
hanging up on a slow refusal does not guess faster. The memory is bounded
twice:
- an address whose wrong keys already wait KEY_REFUSAL_QUEUE turns gets
  429 at once, its key not compared (so a flood learns nothing, right or
  wrong), with Retry-After for when a turn frees up;
- at most MAX_ADDRESSES addresses are remembered; past that, the addresses
  whose turns have passed are forgotten, and while every one of them still
  waits, a new address's key is refused the same way.

A flood is the refusal KeyFlood (core/errors.py): 429 with its
Retry-After wherever it is answered.

Behind a proxy every client has the proxy's address, so they share its
turns: the docs say so (docs/guides/CONSOLE.md).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Mapping
from typing import Any

from django.conf import settings
from django.http import HttpRequest

# A flood's refusal is one of core/errors.py's (429 in core.api's table); the
# routes that judge keys import it from here, with the rule.
from core.errors import KeyFlood

# How many addresses are remembered at most: each one a float.
MAX_ADDRESSES = 4096


def address_of(request: HttpRequest) -> str:
    """The address whose turns a request's wrong key takes: the peer's."""
    return request.META.get("REMOTE_ADDR") or "unknown"


def scope_address(scope: Mapping[str, Any]) -> str:
    """`address_of` for an ASGI scope (a socket's handshake, the waker's
    proxy): its `client`, which Django's REMOTE_ADDR is read from."""
    client = scope.get("client")
    return (client[0] if client else None) or "unknown"


class WrongKeys:
    """The turns of each address's wrong keys (one instance a process: the
    worker's Runtime, the waker's Supervisor, the console's fleet)."""

    def __init__(self) -> None:
        # When each address's last wrong key is answered (time.monotonic()).
        self._due: dict[str, float] = {}

    def judge(self, address: str, matches: Callable[[], bool]) -> float | None:
        """None when `matches()` (a right key), at once. For a wrong key, the
        moment its refusal is due, its turn taken now: await `refusal(due)`
        before answering. KeyFlood, `matches` not called, when the address
        waits KEY_REFUSAL_QUEUE turns already (or too many addresses wait).

        Synchronous from the look-up to the turn taken, so requests that
        arrive together each take their own turn."""
        wait_s = float(settings.KEY_REFUSAL_S)
        now = time.monotonic()
        due = self._due.get(address, now)
        if due <= now:
            due = now
            self._due.pop(address, None)
            if len(self._due) >= MAX_ADDRESSES:
                self._forget_past(now)
                if len(self._due) >= MAX_ADDRESSES:
                    raise KeyFlood(max(1, math.ceil(min(self._due.values()) - now)))
        elif wait_s > 0 and due - now > (settings.KEY_REFUSAL_QUEUE - 1) * wait_s:
            raise KeyFlood(max(1, math.ceil(due - now - (settings.KEY_REFUSAL_QUEUE - 1) * wait_s)))
        if matches():
            return None
        due += wait_s
        if wait_s > 0:
            self._due[address] = due
        return due

    async def refusal(self, address: str, due: float) -> None:
        """Return when a wrong key's refusal is due (`judge`), forgetting the
        address once its last turn has passed."""
        try:
            await asyncio.sleep(max(0.0, due - time.monotonic()))
        finally:
            self.answered(address, due)

    def answered(self, address: str, due: float) -> None:
        """A wrong key's refusal, due at `due` (`judge`), was answered (or
        its client went): forget the address if that was its last turn and it
        has passed. For a refusal awaited some other way than `refusal` (the
        server's, an upload's: media_store/uploads.py)."""
        if self._due.get(address) == due and due <= time.monotonic():
            del self._due[address]

    async def check(self, address: str, matches: Callable[[], bool]) -> bool:
        """`judge` and its wait in one: True for a right key at once, False
        for a wrong one once its turn has come; KeyFlood as `judge`."""
        due = self.judge(address, matches)
        if due is None:
            return True
        await self.refusal(address, due)
        return False

    def remembered(self) -> int:
        """How many addresses are remembered now (their last turn not forgotten yet)."""
        return len(self._due)

    def _forget_past(self, now: float) -> None:
        for address in [address for address, due in self._due.items() if due <= now]:
            del self._due[address]
