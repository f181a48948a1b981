"""The upper bound on held jobs that spares a job start its count: it answers
as an exact count would, counting only near MAX_JOBS."""

from __future__ import annotations

import pytest

from jobs.services import HeldJobsBound


@pytest.fixture(autouse=True)
def max_jobs(settings):
    settings.MAX_JOBS = 3


class Store:
    """Held jobs as the store would count them."""

    def __init__(self, held: int = 0):
        self.held = held
        self.counts = 0

    def count(self) -> int:
        self.counts += 1
        return self.held


def start(bound: HeldJobsBound, store: Store) -> bool:
    if bound.reserve(store.count):
        store.held += 1
        return True
    return False


def test_counts_once_then_only_at_the_limit():
    bound, store = HeldJobsBound(), Store()
    assert [start(bound, store) for _ in range(3)] == [True, True, True]
    assert store.counts == 1  # the first start only
    assert start(bound, store) is False  # the bound reached MAX_JOBS: counted, and full
    assert store.counts == 2


def test_room_made_elsewhere_is_found_by_the_count_at_the_limit():
    bound, store = HeldJobsBound(), Store()
    for _ in range(3):
        start(bound, store)
    store.held = 1  # two expired, were delivered or were swept
    assert start(bound, store) is True
    assert start(bound, store) is True
    assert start(bound, store) is False


def test_a_start_whose_job_was_not_stored_leaves_the_bound_safe():
    bound, store = HeldJobsBound(), Store(held=2)
    assert bound.reserve(store.count) is True  # reserved, but the insert failed: held stays 2
    assert start(bound, store) is True  # the bound (3) reached the limit: counted 2, room for one
    assert store.held == 3 and store.counts == 2
    assert start(bound, store) is False


def test_a_full_store_at_start_refuses():
    bound, store = HeldJobsBound(), Store(held=3)
    assert start(bound, store) is False
    assert start(bound, store) is False
    assert store.counts == 2  # full: every start counts, as before the bound
