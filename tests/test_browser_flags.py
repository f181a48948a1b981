"""The browser's flags and its driver's options, as a real worker launches
them: Playwright's own disabled features kept (Chromium takes only the last
`--disable-features`), the address bar's WebUI popups not built, and the
driver's young generation sized (docs/BENCHMARKS.md, issue 46), and the
driver tap loaded into the driver alone."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from browser.flags import CHROMIUM_ARGS, DRIVER_NODE_OPTIONS, MEMORY_FEATURES_OFF, PLAYWRIGHT_DISABLED_FEATURES
from browser.tap import HOOK, SOCKET_ENV
from core.procfs import command_line, command_name, descendants
from tests.support.faults import real_chromium

ROOT_ARGS = ["--no-sandbox"] if os.geteuid() == 0 else []


def disabled_features(arguments: list[str]) -> list[set[str]]:
    """Each `--disable-features` of a command line, in order."""
    return [set(argument.partition("=")[2].split(",")) for argument in arguments if argument.startswith("--disable-features=")]


def environment(pid: int) -> dict[str, str]:
    pairs = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(pair.decode(errors="replace").partition("=")[::2] for pair in pairs if b"=" in pair)


def test_the_worker_s_browser_keeps_playwright_s_features_off_and_its_driver_is_sized(make_worker):
    worker = make_worker({"NODE_OPTIONS": "--max-old-space-size=512"})
    tree = descendants(worker.process.pid)
    browser = next(pid for pid in tree if "chrom" in command_name(pid) and not any(
        argument.startswith("--type=") for argument in command_line(pid)))
    lists = disabled_features(command_line(browser))
    playwright_s, effective = lists[0], lists[-1]  # Playwright's come first; Chromium keeps the last
    assert playwright_s <= effective, f"Playwright disables {playwright_s - effective} that the worker's flags turn back on"
    assert set(PLAYWRIGHT_DISABLED_FEATURES) == playwright_s, "Playwright's list changed: update PLAYWRIGHT_DISABLED_FEATURES"
    assert set(MEMORY_FEATURES_OFF) <= effective
    driver = next(pid for pid in tree if command_name(pid).startswith("node"))
    assert environment(driver)["NODE_OPTIONS"].split() == ["--max-old-space-size=512", DRIVER_NODE_OPTIONS, "--require", f'"{HOOK}"']
    # The tap (browser/tap.cjs) keeps itself and its socket out of Chromium's environment.
    assert environment(browser)["NODE_OPTIONS"].split() == ["--max-old-space-size=512", DRIVER_NODE_OPTIONS]
    assert SOCKET_ENV in environment(driver) and SOCKET_ENV not in environment(browser)


@pytest.mark.parametrize("flags, popups", [(CHROMIUM_ARGS, False), ([], True)], ids=["the worker's flags", "without them"])
def test_the_address_bar_s_webui_popups_are_not_built(flags, popups):
    executable = real_chromium()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=[*flags, *ROOT_ARGS])
        try:
            page = browser.new_page()
            page.goto("data:text/html,<p>a page</p>")
            session = browser.new_browser_cdp_session()
            targets = session.send("Target.getTargets")["targetInfos"]
        finally:
            browser.close()
    assert any(target["type"] == "browser_ui" for target in targets) is popups, targets
