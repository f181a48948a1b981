"""The browser's processes as Linux's /proc shows them: their memory
(resident, and charged: the proportional set size) and a stale profile lock
left by a Chromium that was killed."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from core.procfs import command_name, descendants, pss, rss

log = logging.getLogger("penelope.browser")


def profile_holder(profile_dir: Path) -> int | None:
    """The live process that holds the profile open (Chromium's
    `SingletonLock`, a symlink to `host-pid`), or None: a running worker's
    browser, or a shell's (`manage.py run_action --profile`)."""
    try:
        target = os.readlink(profile_dir / "SingletonLock")
    except OSError:
        return None
    pid_text = target.rpartition("-")[2]
    return int(pid_text) if pid_text.isdigit() and _process_alive(int(pid_text)) else None


def clear_stale_profile_lock(profile_dir: Path) -> None:
    """Remove Chromium's singleton lock when the process that held it is gone.

    A worker killed with SIGKILL leaves `SingletonLock` behind
    (a symlink to `host-pid`); a live holder is left alone.
    """
    lock = profile_dir / "SingletonLock"
    try:
        target = os.readlink(lock)
    except OSError:
        return
    pid_text = target.rpartition("-")[2]
    if pid_text.isdigit() and _process_alive(int(pid_text)):
        return
    for name in ("SingletonLock", "SingletonSocket", "SingletonCookie"):
        try:
            os.unlink(profile_dir / name)
        except OSError:
            pass
    log.info("removed a stale profile lock left by process %s", pid_text)


def _process_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def resident_bytes() -> int:
    """The resident memory of the worker's browser processes, in bytes (Linux
    /proc): a read of every process's stat, so callers off the loop may prefer
    a thread."""
    return sum(rss(pid) for pid in descendants(os.getpid()) if is_browser(pid))


def charged_bytes() -> int:
    """The memory the browser's processes are charged for, in bytes: the sum
    of their proportional set sizes (Linux /proc/PID/smaps_rollup), where a
    page shared by N processes counts 1/N in each. The sum of resident sizes
    counts Chromium's shared pages once per process, about three times over."""
    return sum(pss(pid) for pid in descendants(os.getpid()) if is_browser(pid))


def is_browser(pid: int) -> bool:
    name = command_name(pid)
    return "chrom" in name or name == "headless_shell"
