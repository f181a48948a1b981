"""Loaded into a worker by PYTHONPATH (tests/test_job_core_walk.py): with
WALK_TRACE_DIR set, every Python call in every thread is watched, and from
SIGUSR1 (which writes `armed` there) to SIGUSR2 (which writes `seen`) the
source file of each function that runs is kept, once."""

import os
import signal
import sys
import threading
from pathlib import Path

TRACE_DIR = os.environ.get("WALK_TRACE_DIR")

if TRACE_DIR:
    seen: set[str] = set()
    armed = False

    def watch(frame, event, arg):
        if armed and event == "call":
            seen.add(frame.f_code.co_filename)

    def arm(signum, frame):
        global armed
        seen.clear()
        armed = True
        Path(TRACE_DIR, "armed").touch()

    def dump(signum, frame):
        global armed
        armed = False
        seen.discard(__file__)  # this very handler
        Path(TRACE_DIR, "seen.part").write_text("\n".join(sorted(seen)))
        Path(TRACE_DIR, "seen.part").rename(Path(TRACE_DIR, "seen"))

    sys.setprofile(watch)
    threading.setprofile(watch)
    signal.signal(signal.SIGUSR1, arm)
    signal.signal(signal.SIGUSR2, dump)
