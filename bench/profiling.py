"""Optional py-spy profiles of the worker process, one per benchmark phase.

`python -m bench.run --profile DIR` records each phase's samples (py-spy's
raw collapsed stacks, one `frame;frame;... count` a line) in DIR/<phase>.txt;
`python -m bench.profiling DIR/<phase>.txt` prints the heaviest frames.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def profiled(pid: int, directory: Path | None, phase: str, rate: int = 500) -> Iterator[None]:
    """Sample `pid` with py-spy while the block runs (nothing when `directory` is None)."""
    if directory is None:
        yield
        return
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    directory.mkdir(parents=True, exist_ok=True)
    recorder = subprocess.Popen(
        [spy, "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw", "--nonblocking",
         "--threads", "--output", str(directory / f"{phase}.txt")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        recorder.send_signal(signal.SIGINT)  # py-spy writes its file on Ctrl-C
        try:
            recorder.wait(30)
        except subprocess.TimeoutExpired:
            recorder.kill()
            recorder.wait()


def heaviest(path: Path, top: int = 40, contains: str = "") -> str:
    """The frames with the most samples on their stack (inclusive), and the
    busiest threads, as text."""
    inclusive: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = stack.split(";")
        threads[frames[0]] += count
        for frame in set(frames):
            inclusive[frame] += count
    lines = [f"{path.name}: {total} samples"]
    lines += [f"  thread {count:6d}  {name}" for name, count in threads.most_common(6)]
    shown = [(frame, count) for frame, count in inclusive.most_common() if contains in frame][:top]
    lines += [f"  {count:6d} {100 * count / max(total, 1):5.1f}%  {frame}" for frame, count in shown]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description="Print the heaviest frames of a py-spy raw profile.")
    parser.add_argument("profile", type=Path)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--contains", default="", help="only frames whose text contains this")
    args = parser.parse_args()
    print(heaviest(args.profile, args.top, args.contains))


if __name__ == "__main__":
    main()
