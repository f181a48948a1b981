"""Faults injected into a real worker's real Chromium, the way they happen in
production: the browser's main process killed (the OOM killer, a crash), a
page's renderer killed, a launch that fails. Used by the tests and the soak
(`scripts/soak.sh`)."""

from __future__ import annotations

import os
import shutil
import signal
import stat
from pathlib import Path

from harness.worker import chromium_processes, wait_until


def browser_pids(store: Path) -> list[int]:
    """The main Chromium process(es) of the worker on `store` (its profile is in the command line)."""
    profile = f"--user-data-dir={Path(store).resolve() / 'profile'}"
    return [int(line.split()[0]) for line in chromium_processes() if profile in line and "--type=" not in line]


def renderer_pids(store: Path) -> list[int]:
    """The renderer processes of that browser: its children run with `--type=renderer`."""
    main = set(browser_pids(store))
    found = []
    for line in chromium_processes():
        if "--type=renderer" not in line:
            continue
        pid = int(line.split()[0])
        if _ancestors(pid) & main:
            found.append(pid)
    return found


def _ancestors(pid: int) -> set[int]:
    seen: set[int] = set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as stat_file:
                pid = int(stat_file.read().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return seen


def kill_browser(store: Path) -> int:
    """SIGKILL the browser's main process, as the OOM killer would; answers its pid."""
    pid = wait_until(lambda: browser_pids(store), timeout=10, what="the worker's browser process")[0]
    os.kill(pid, signal.SIGKILL)
    return pid


def kill_renderers(store: Path) -> list[int]:
    """SIGKILL every renderer of the worker's browser: each page's renderer crashes."""
    pids = wait_until(lambda: renderer_pids(store), timeout=10, what="the browser's renderer processes")
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pids


def real_chromium() -> str:
    """The Chromium the worker would launch by itself: Playwright's own when installed, else the system's."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        own = playwright.chromium.executable_path
    if own and os.access(own, os.X_OK):
        return own
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    raise RuntimeError("no Chromium to wrap")


class ChromiumWrapper:
    """An executable for PENELOPE_BROWSER that runs the real Chromium, unless
    told otherwise by a file beside it: `broken` makes every launch fail
    (exit 1), `slow` makes a launch wait that many seconds first."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / "chromium"
        self.path.write_text(
            "#!/bin/sh\n"
            f'here="{self.directory}"\n'
            'if [ -f "$here/broken" ]; then echo "chromium wrapper: broken on purpose" >&2; exit 1; fi\n'
            'if [ -f "$here/slow" ]; then sleep "$(cat "$here/slow")"; fi\n'
            f'exec "{real_chromium()}" "$@"\n'
        )
        self.path.chmod(self.path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)

    def break_launches(self, broken: bool = True) -> None:
        marker = self.directory / "broken"
        if broken:
            marker.write_text("1")
        else:
            marker.unlink(missing_ok=True)

    def slow_launches(self, seconds: float | None) -> None:
        marker = self.directory / "slow"
        if seconds:
            marker.write_text(f"{seconds:g}")
        else:
            marker.unlink(missing_ok=True)
