"""WAKER_API.md's blocks run, in order, as the one session the document is:
it writes its personas file, starts a real waker in the background (which
starts the personas' real workers), calls each route and stops the waker.
JSON answers are compared by shape (tests/support/docs.py); shown text (the
waker's output, its errors, its metrics) line by line, with `…` where a value
varies."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

from harness.worker import ROOT, free_port
from tests.support.docs import MORE, DocRun, Ran, read_blocks, run_document

DOC = ROOT / "docs" / "reference" / "WAKER_API.md"


def run_recording(doc: Path, tmp: Path, monkeypatch: pytest.MonkeyPatch, **kwargs) -> tuple[Ran, dict[int, str]]:
    """`run_document`, and what each shell block printed, by its line."""
    printed: dict[int, str] = {}
    shell = DocRun.shell

    def recorded(self: DocRun, block, where: str) -> str:
        printed[block.line] = shell(self, block, where)
        return printed[block.line]

    monkeypatch.setattr(DocRun, "shell", recorded)
    return run_document(doc, tmp, **kwargs), printed


def check_shown_text(doc: Path, printed: dict[int, str], addresses: dict[str, str]) -> int:
    """Each plain shown output is what its run printed, line by line and in
    order: the document's addresses mapped, `…` in a line standing for any
    value, and a line that is only `…` for any lines (an excerpt; without one
    the run printed those lines and no others). Answers how many blocks."""
    compared = 0
    for block in read_blocks(doc):
        if block.output_of is None or block.lang:
            continue
        lines = printed[block.output_of.line].splitlines()
        shown = block.code.splitlines()
        at = 0
        for line in shown:
            if line == MORE:
                continue
            for theirs, ours in addresses.items():
                line = line.replace(theirs, ours)
            pattern = re.compile(".*".join(re.escape(part) for part in line.split(MORE)))
            while at < len(lines) and not pattern.fullmatch(lines[at]):
                at += 1
            assert at < len(lines), f"{block.where(doc)}: the run printed no {line!r} here:\n" + "\n".join(lines)
            at += 1
        if MORE not in shown:
            assert len(lines) == len(shown), f"{block.where(doc)}: the run printed more:\n" + "\n".join(lines)
        compared += 1
    return compared


def processes_in(folder: Path) -> dict[int, bytes]:
    """pid -> command line of every live process working in `folder`."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if Path(os.readlink(f"/proc/{entry}/cwd")) != folder.resolve():
                continue
            with open(f"/proc/{entry}/stat") as stat:
                if stat.read().rpartition(")")[2].split()[0] == "Z":
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                found[int(entry)] = cmdline.read()
        except OSError:
            continue
    return found


def stop_what_the_document_left(folder: Path, timeout: float = 60) -> list[bytes]:
    """The document stops its waker itself; when it failed before that, stop
    it here (SIGTERM: it stops its workers first). Answers the processes that
    were still there after the waker (none, unless a bug), killed."""
    for pid, cmdline in processes_in(folder).items():
        if b"manage.py\0waker" in cmdline:
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(b"manage.py\0waker" in cmdline for cmdline in processes_in(folder).values()):
        assert time.monotonic() < deadline, "the waker did not stop"
        time.sleep(0.2)
    left = processes_in(folder)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return list(left.values())


def test_every_block_of_the_waker_api_runs(tmp_path, monkeypatch):
    monkeypatch.delenv("WAKER_KEY", raising=False)  # the document's waker generates its own
    place = tmp_path / "home" / "checkout"  # the run's folder, the document's /srv/penelope
    waker, alice, bob = free_port(), free_port(), free_port()
    addresses = {
        "127.0.0.1:5100": f"127.0.0.1:{waker}",
        '"port": 5001': f'"port": {alice}',
        '"port": 5002': f'"port": {bob}',
        "the port 5001": f"the port {alice}",
        "/srv/penelope": str(place),
    }
    # The policy read every 0.2 s rather than 2 s; the demo family's pauses short.
    env = {"WAKER_PORT": str(waker), "WAKER_POLL_S": "0.2", "DEMO_PAUSE_MS": "50", "WAKER_STOP_GRACE_S": "10"}
    (tmp_path / "store").mkdir()
    try:
        done, printed = run_recording(
            DOC, tmp_path, monkeypatch, store=tmp_path / "store", env=env, addresses=addresses
        )
    finally:
        left = stop_what_the_document_left(place)
    assert left == [], f"processes outlived the document's waker: {left}"
    texts = check_shown_text(DOC, printed, addresses)
    assert (len(done.ran), len(done.not_run), done.compared, texts) == (13, 0, 12, 4)
