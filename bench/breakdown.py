"""A persona's memory by process: its worker (Python), Playwright's driver
(Node), and each of Chromium's processes by the type Chromium gives it on
its command line (the browser itself, GPU, network, storage, renderers,
zygotes). Two figures each: the proportional set size (shared pages split
between the processes that map them, so it shifts with whatever else runs)
and the anonymous memory (heaps and stacks: what one more such process
adds, whatever else runs on the host)."""

from __future__ import annotations

from dataclasses import dataclass

from core.procfs import command_line, command_name, descendants, rollup

MB = 1024 * 1024
# In the order the table shows them.
KINDS = ("worker", "driver", "browser", "gpu", "network", "storage", "utility", "renderer", "zygote", "other")
UTILITY_KINDS = {"network.mojom.NetworkService": "network", "storage.mojom.StorageService": "storage"}


@dataclass
class KindMemory:
    processes: int = 0
    pss_mb: float = 0.0
    anonymous_mb: float = 0.0


def kind_of(pid: int, root: int) -> str:
    if pid == root:
        return "worker"
    name = command_name(pid)
    if name.startswith("node"):
        return "driver"
    if "chrom" not in name and name != "headless_shell":
        return "other"
    arguments = command_line(pid)
    kind = next((argument.partition("=")[2] for argument in arguments if argument.startswith("--type=")), "")
    if kind == "utility":
        sub = next((argument.partition("=")[2] for argument in arguments if argument.startswith("--utility-sub-type=")), "")
        return UTILITY_KINDS.get(sub, "utility")
    return {"": "browser", "gpu-process": "gpu"}.get(kind, kind if kind in KINDS else "other")


def by_kind(root: int, *, with_root: bool = True, excluding: int | None = None) -> dict[str, KindMemory]:
    """Every process under `root` (and `root` itself unless told), by kind;
    without `excluding` and what runs under it."""
    kinds = {kind: KindMemory() for kind in KINDS}
    left_out = {excluding, *descendants(excluding)} if excluding else set()
    for pid in [pid for pid in ([root] if with_root else []) + descendants(root) if pid not in left_out]:
        totals = rollup(pid)
        if not totals:
            continue  # gone meanwhile
        each = kinds[kind_of(pid, root if with_root else -1)]
        each.processes += 1
        each.pss_mb += totals.get("Pss", 0) / MB
        each.anonymous_mb += totals.get("Anonymous", 0) / MB
    return {kind: memory for kind, memory in kinds.items() if memory.processes}


def total(kinds: dict[str, KindMemory]) -> KindMemory:
    return KindMemory(
        sum(each.processes for each in kinds.values()),
        sum(each.pss_mb for each in kinds.values()),
        sum(each.anonymous_mb for each in kinds.values()),
    )


def described(kinds: dict[str, KindMemory]) -> str:
    """`worker 103/60 MB, driver ...`: PSS/anonymous per kind, with counts above one."""
    return ", ".join(
        f"{kind}{f' ×{each.processes}' if each.processes > 1 else ''} {each.pss_mb:.0f}/{each.anonymous_mb:.0f} MB"
        for kind, each in kinds.items()
    )
