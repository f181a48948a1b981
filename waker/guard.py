"""Wrong keys answered slowly: each waits CONSOLE_REFUSAL_S for its refusal,
and the refusals of one address wait their turn, so a guesser gets one
guess a delay however many connections it opens. (Other addresses are not
held up: an operator can sign in while someone else guesses.)"""

from __future__ import annotations

import asyncio

from django.conf import settings


class KeyGuard:
    def __init__(self) -> None:
        self._turns: dict[str, asyncio.Lock] = {}
        self._waiting: dict[str, int] = {}

    async def refuse(self, address: str) -> None:
        """Return once this wrong key from `address` has waited its turn and its delay."""
        turn = self._turns.setdefault(address, asyncio.Lock())
        self._waiting[address] = self._waiting.get(address, 0) + 1
        try:
            async with turn:
                await asyncio.sleep(settings.CONSOLE_REFUSAL_S)
        finally:
            self._waiting[address] -= 1
            if not self._waiting[address]:  # nobody else waits: forget the address
                del self._waiting[address], self._turns[address]

    def waiting(self) -> int:
        return sum(self._waiting.values())
