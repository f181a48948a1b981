"""The start line's clock (core/start_clock.py) counts from the command's
own start: a script that sets things up and then `exec`s into the worker
(scripts/serve.sh) marks the moment, and its set-up is not counted as
Python's start (issue 58: a first start read `Python, Django and the apps
118.618 s`, most of it pip)."""

from __future__ import annotations

import json
import subprocess
import sys

from harness.worker import ROOT

SET_UP_S = 2  # the script's own work before its exec
REPORT = (
    "import json, os; from core.start_clock import StartClock; clock = StartClock('python');"
    "print(json.dumps([clock.parts[0][1], os.environ.get('PENELOPE_EXEC_AT')]))"
)


def first_part(mark: bool) -> tuple[float, str | None]:
    """Run a script that works SET_UP_S, then execs into Python, as serve.sh does."""
    marking = "export PENELOPE_EXEC_AT=$EPOCHREALTIME; " if mark else ""
    script = f"sleep {SET_UP_S}; {marking}exec {sys.executable} -c \"$REPORT\""
    done = subprocess.run(["bash", "-c", script], cwd=ROOT, env={"REPORT": REPORT, "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60, check=True)
    seconds, left = json.loads(done.stdout)
    return seconds, left


def test_the_clock_starts_at_the_exec_a_script_marks():
    seconds, left = first_part(mark=True)
    assert seconds < SET_UP_S  # Python's start alone, not the script's set-up
    assert left is None  # taken out of the environment: the worker's children do not inherit it


def test_without_a_mark_it_counts_from_the_process_start():
    seconds, _ = first_part(mark=False)
    assert seconds >= SET_UP_S


def test_serve_sh_marks_its_exec():
    lines = (ROOT / "scripts" / "serve.sh").read_text().splitlines()
    exec_at = next(i for i, line in enumerate(lines) if line.startswith("exec "))
    assert lines[exec_at - 1] == "export PENELOPE_EXEC_AT=${EPOCHREALTIME:-}"
