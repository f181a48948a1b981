"""Fixtures: a loopback web site, real worker processes, and a check that no
Chromium outlives the suite; and the plugin authors' test kit
(harness/plugin_kit.py: `penelope`, `call`, `job`, `fixture_site`), which the
project's own tests use as an author's would."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from harness.worker import WorkerProcess, chromium_processes
from tests.support.site import Site

pytest_plugins = ["harness.plugin_kit", "tests.support.runtime"]

TEST_PLUGINS = os.environ.get("TEST_PLUGINS", "plugins.web,plugins.demo,tests.support.testing_plugins")


def worker_env(**overrides: str) -> dict[str, str]:
    return {"PENELOPE_PLUGINS": TEST_PLUGINS, "PAGE_WAIT_S": "2", "MAX_PAGES": "3", **overrides}


@pytest.fixture(scope="session", autouse=True)
def no_chromium_left(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    # This process's own folder, with its slash: under xdist each process
    # checks its own (popen-gw1 is not a prefix of popen-gw10's paths), and
    # another engineer's run (pytest-7 beside pytest-70) is not this one's.
    root = str(tmp_path_factory.getbasetemp()) + os.sep
    yield
    left = [line for line in chromium_processes() if root in line]
    assert not left, f"Chromium processes outlived the suite: {left}"


@pytest.fixture(scope="session")
def site() -> Iterator[Site]:
    with Site() as running:
        yield running


@pytest.fixture
def make_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """Start workers with their own store and settings; all stopped at the end."""
    started: list[WorkerProcess] = []

    def make(env: dict[str, str] | None = None, start: bool = True, **kwargs) -> WorkerProcess:
        store = tmp_path_factory.mktemp("store")
        worker = WorkerProcess(store, env=worker_env(**(env or {})), **kwargs)
        started.append(worker)
        return worker.start() if start else worker

    yield make
    for worker in started:
        worker.stop()


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    """One worker shared by a module's tests; tests leave its pages as they found them."""
    running = WorkerProcess(tmp_path_factory.mktemp("store"), env=worker_env()).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def person() -> Iterator:
    """A second Chromium: a person who opens a live link (tests/test_live.py)."""
    from playwright.sync_api import sync_playwright

    from tests.support.faults import real_chromium

    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    executable = real_chromium()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=args)
        yield browser
        browser.close()


@pytest.fixture
def api(worker: WorkerProcess):
    with worker.client() as client:
        yield client
