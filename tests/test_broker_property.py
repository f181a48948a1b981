"""The page broker's invariants (browser/broker.py) under random
interleavings, in-process: callers join lines for named pages and for
`any`, with priorities; holders release; waiters are cancelled, run out of
time or are abandoned by their callers; pages are leased, freed, opened and
closed under their waiters. `check()` runs after every step, and every
caller's outcome is checked against what happened to it. One interleaving
always runs: room freed by a close while a caller waits on `any` (issue 57),
which `check()` sees as free room while `any` waits unless a pool page is
opened for it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from django.test import override_settings
from hypothesis import example, given, settings
from hypothesis import strategies as st

from browser.broker import WaitCancelled
from browser.pages import Claim, Waiter
from core.errors import LeaseRequired, PageNotOpen
from core.routes import ANY
from tests.support.broker_pages import Pages

TARGETS = ["main", "p1", "p2", ANY]
ENDINGS = (TimeoutError, WaitCancelled, PageNotOpen, LeaseRequired, asyncio.CancelledError)

JOIN = st.tuples(st.just("join"), st.sampled_from(TARGETS), st.integers(0, 3), st.booleans())
steps = st.lists(
    st.one_of(
        JOIN,
        JOIN,  # as many callers as everything else together
        st.tuples(st.just("release"), st.integers(0, 20)),
        st.tuples(st.just("cancel"), st.integers(0, 20)),
        st.tuples(st.just("expire"), st.integers(0, 20)),
        st.tuples(st.just("abandon"), st.integers(0, 20)),
        st.tuples(st.just("close"), st.sampled_from(["p1", "p2", "pool-1"])),
        st.tuples(st.just("open"), st.sampled_from(["p1", "p2"])),
        st.tuples(st.just("lease"), st.sampled_from(["main", "p1"])),
        st.tuples(st.just("unlease"), st.sampled_from(["main", "p1"])),
    ),
    max_size=40,
)


@dataclass
class Caller:
    waiter: Waiter
    task: asyncio.Task
    cancel: asyncio.Future
    stopped: bool = False  # cancelled, expired or abandoned while it still waited
    released: bool = False


async def play(script: list[tuple]) -> None:
    pages = Pages("main", "p1")
    broker = pages.broker
    callers: list[Caller] = []

    def waiting() -> list[Caller]:
        return [caller for caller in callers if not caller.task.done()]

    def holding() -> list[Caller]:
        return [
            caller
            for caller in callers
            if caller.task.done()
            and not caller.task.cancelled()
            and isinstance(caller.task.result(), Claim)
            and not caller.released
        ]

    async def settle() -> None:
        for _ in range(6):
            await asyncio.sleep(0)

    async def take(waiter: Waiter, cancel: asyncio.Future) -> Claim | BaseException:
        try:
            return await broker.wait(waiter, cancel=cancel)
        except ENDINGS[:-1] as ended:
            return ended

    for step in script:
        kind = step[0]
        if kind == "join":
            _, target, priority, as_job = step
            try:
                waiter = broker.join(target, priority=priority, job_id=f"job{len(callers)}" if as_job else None)
            except (PageNotOpen, LeaseRequired):
                continue
            cancel = asyncio.get_running_loop().create_future()
            callers.append(Caller(waiter, asyncio.create_task(take(waiter, cancel)), cancel))
        elif kind == "release" and holding():
            caller = holding()[step[1] % len(holding())]
            broker.release(caller.task.result())
            caller.released = True
        elif kind in ("cancel", "expire", "abandon") and waiting():
            caller = waiting()[step[1] % len(waiting())]
            # A page handed before the deadline is its caller's; a cancel or an abandon wins over it.
            caller.stopped = caller.waiter.waiting or kind != "expire"
            if kind == "cancel":
                caller.cancel.set_result(None)
            elif kind == "expire":
                broker.expire(caller.waiter)  # what the deadline's timer calls
            else:
                caller.task.cancel()
        elif kind == "close" and step[1] in pages.pages:
            pages.close(step[1])
        elif kind == "open" and step[1] not in pages.pages:
            page = pages.reserve(step[1])
            await pages.open_tab_of(page)
            broker.opened(page)
        elif kind == "lease" and step[1] in pages.pages and pages.pages[step[1]].lease is None:
            broker.take_lease(pages.pages[step[1]], 3600, None)
        elif kind == "unlease" and step[1] in pages.pages and pages.pages[step[1]].lease is not None:
            broker.release_lease(pages.pages[step[1]], None, force=True)
        await settle()
        broker.check()
        for caller in callers:
            # Its cancel or its deadline took it out of its line at once.
            assert not caller.stopped or not caller.waiter.waiting, caller
            if caller.stopped and caller.task.done() and not caller.task.cancelled():
                # A caller stopped while it waited never got a claim.
                assert not isinstance(caller.task.result(), Claim), caller
    for caller in waiting():
        caller.task.cancel()
    await settle()
    broker.check()
    assert not broker.handed


# main busy, p1 idle but leased, pool-1 opened for a first caller on `any`, a
# second one waiting; p1 closed: its room must go to the second.
ROOM_FREED_WHILE_ANY_WAITS = [
    ("join", "main", 0, False),
    ("lease", "p1"),
    ("join", ANY, 0, True),
    ("join", ANY, 1, True),
    ("close", "p1"),
]


@settings(max_examples=500, deadline=None, database=None)
@given(steps)
@example(ROOM_FREED_WHILE_ANY_WAITS)
def test_random_interleavings_keep_the_brokers_invariants(script):
    with override_settings(MAX_PAGES=3):
        asyncio.run(play(script))
