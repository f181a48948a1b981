"""A memory cgroup of the benchmark's own, so that a worker (or a waker and
its workers) is measured as the kernel charges it: what a container's memory
limit, or Kubernetes' eviction, counts.

Made under the cgroup this process is in: cgroup v2 where the memory
controller is on the unified hierarchy, else v1's memory hierarchy. Root
(or a delegated cgroup) is needed to make one; without it the run says so
and reports the other columns only.
"""

from __future__ import annotations

import os
from pathlib import Path

V2_ROOT = Path("/sys/fs/cgroup")
V1_ROOT = Path("/sys/fs/cgroup/memory")


class MemoryCgroup:
    def __init__(self, path: Path, v2: bool) -> None:
        self.path = path
        self.v2 = v2

    @classmethod
    def make(cls, name: str) -> MemoryCgroup | None:
        """A new, empty cgroup named `name` under this process's own, or None
        where the machine does not let this process make one."""
        for v2, root, controller in ((True, V2_ROOT, ""), (False, V1_ROOT, "memory")):
            own = _own_cgroup(controller)
            if own is None:
                continue
            parent = root / own.lstrip("/")
            if v2 and "memory" not in _read(parent / "cgroup.subtree_control").split():
                continue
            if not v2 and not (parent / "memory.usage_in_bytes").exists():
                continue
            path = parent / f"{name}-{os.getpid()}"
            try:
                path.mkdir()
            except OSError:
                continue
            return cls(path, v2)
        return None

    @property
    def procs(self) -> Path:
        """The file a process joins the cgroup through (its children follow it)."""
        return self.path / "cgroup.procs"

    def join(self) -> None:
        """Put the calling process in the cgroup: for a child between fork and exec."""
        self.procs.write_text(str(os.getpid()))

    def charged_bytes(self) -> int:
        """The memory charged to the cgroup: its processes' anonymous memory,
        the page cache they brought in and the kernel's memory for them."""
        return int(_read(self.path / ("memory.current" if self.v2 else "memory.usage_in_bytes")))

    def working_set_bytes(self) -> int:
        """The charge less the page cache the kernel may drop at once (inactive
        files): what Kubernetes compares with a pod's limit to evict it."""
        stats = dict(line.split() for line in _read(self.path / "memory.stat").splitlines() if " " in line)
        inactive = int(stats.get("inactive_file" if self.v2 else "total_inactive_file", 0))
        return max(0, self.charged_bytes() - inactive)

    def remove(self) -> None:
        """Remove the cgroup once its processes ended (its charge goes to the parent)."""
        try:
            self.path.rmdir()
        except OSError:
            pass


def _own_cgroup(controller: str) -> str | None:
    """This process's cgroup path: v2's (`0::/path`) when `controller` is "",
    else v1's for that controller."""
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        _number, controllers, path = line.split(":", 2)
        if (controller == "" and controllers == "") or controller in controllers.split(","):
            return path
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def drop_page_cache() -> bool:
    """Ask the kernel to drop the clean page cache (root only), so that the
    files a worker reads next (Chromium, Python, the code) are charged to its
    cgroup as they would be in a fresh container; a file cached by another
    cgroup is charged to that one. Answers whether it could."""
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("1")
        return True
    except OSError:
        return False
