"""A plugin that asks a person: `await ctx.ask_human(reason=..., timeout_s=...)`.

The question belongs to the page the job runs on (one at a time: one job
holds a page). Asking makes a control link for it, valid as long as the
question may wait; every viewer of the page sees the reason, and those with
control see **Done** and **Give up**. The first answer wins; the link is
revoked when the question ends, however it ends (an answer, its time, the
job's cancel or end).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from browser.pages import ManagedPage
    from live.links import Links
    from live.screencast import Casts

DONE, GAVE_UP, TIMEOUT = "done", "gave_up", "timeout"
ANSWERS = (DONE, GAVE_UP)
MAX_REASON = 1000  # characters; a longer reason is cut


@dataclass(eq=False)
class Question:
    reason: str
    asked_at: float
    expires_at: float
    live_url: str
    answer: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    def shown(self) -> dict[str, Any]:
        """What a job's poll shows under `human`."""
        return {
            "reason": self.reason, "live_url": self.live_url,
            "asked_at": round(self.asked_at, 3), "expires_at": round(self.expires_at, 3),
        }


class Questions:
    """The question each page's job waits on, by page; a person answers it
    on the page's live view (`links`, `casts`)."""

    def __init__(self, links: Links, casts: Casts) -> None:
        self.links = links
        self.casts = casts
        self.asking: dict[int, tuple[ManagedPage, Question]] = {}

    def question_of(self, page: ManagedPage) -> Question | None:
        held = self.asking.get(id(page))
        return held[1] if held is not None and held[0] is page else None

    def answer(self, page: ManagedPage, given: str) -> bool:
        """A viewer's answer to the page's question; False when there is none
        (answered already, or never asked)."""
        question = self.question_of(page)
        if question is None or question.answer.done() or given not in ANSWERS:
            return False
        cast = self.casts.watching(page)
        if cast is not None:  # before its link goes: the person sees their answer taken, not a dead link
            cast.tell({"answered": given})
        question.answer.set_result(given)
        return True

    def shown_to_viewers(self, page: ManagedPage) -> dict[str, Any] | None:
        question = self.question_of(page)
        return {"reason": question.reason, "expires_at": round(question.expires_at, 3)} if question else None

    async def ask(self, page: ManagedPage, reason: str, timeout_s: float, on_asked: Any) -> str:
        """Ask a person on the page's live view; `on_asked(shown | None)` hears
        of the question and of its end. Answers "done", "gave_up" or "timeout"."""
        if self.question_of(page) is not None:
            raise RuntimeError("this page's job already waits for a person")
        token, link = self.links.create(page, ttl=timeout_s, control=True, question=True)
        now = time.time()
        question = Question(reason=reason[:MAX_REASON], asked_at=now, expires_at=now + timeout_s, live_url=f"/live/{token}")
        self.asking[id(page)] = (page, question)
        try:
            self._tell(page)
            on_asked(question.shown())
            try:
                async with asyncio.timeout(timeout_s):
                    return await asyncio.shield(question.answer)
            except TimeoutError:
                if question.answer.done():
                    return question.answer.result()
                return TIMEOUT
        finally:
            if self.asking.get(id(page), (None, None))[1] is question:
                del self.asking[id(page)]
            self.links.revoke(link)
            self._tell(page)
            on_asked(None)

    def _tell(self, page: ManagedPage) -> None:
        cast = self.casts.watching(page)
        if cast is not None:
            cast.tell({"human": self.shown_to_viewers(page)})
