"""Processes as Linux's /proc shows them: a process's descendants and their
memory, resident and charged (the proportional set size, where a page
shared by N processes counts 1/N in each). Reads of small files, so a
caller on an event loop with many to read may prefer a thread."""

from __future__ import annotations

import os


def parent_pid(pid: int) -> int | None:
    """The pid of the process's parent; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def descendants(root: int) -> list[int]:
    """Every live process under `root`, at any depth."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (ppid := parent_pid(int(entry))) is not None:
            children.setdefault(ppid, []).append(int(entry))
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def rollup(pid: int) -> dict[str, int]:
    """The process's memory totals from /proc/PID/smaps_rollup, in bytes
    (`Pss`, `Anonymous`, `Private_Dirty`, ...); empty when it is gone."""
    totals = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as lines:
            for line in lines:
                name, _, value = line.partition(":")
                parts = value.split()
                if len(parts) == 2 and parts[1] == "kB":
                    totals[name] = int(parts[0]) * 1024
    except (OSError, ValueError):
        pass
    return totals


def pss(pid: int) -> int:
    """The process's proportional set size in bytes; 0 when it is gone."""
    return rollup(pid).get("Pss", 0)


def anonymous(pid: int) -> int:
    """The process's anonymous memory in bytes (its heaps and stacks, no file's
    pages): what each more process of the kind adds, whatever else runs."""
    return rollup(pid).get("Anonymous", 0)


def rss(pid: int) -> int:
    """The process's resident size in bytes; 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def command_line(pid: int) -> list[str]:
    """The process's arguments (Chromium rewrites its own into one string: split on spaces too)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode(errors="replace").split()
    except OSError:
        return []


def command_name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as comm:
            return comm.read().strip()
    except OSError:
        return ""


def tree_charged_bytes(root: int) -> int:
    """The memory charged to `root` and every process under it: a worker with
    its Playwright driver and its browser."""
    return sum(pss(pid) for pid in [root, *descendants(root)])
