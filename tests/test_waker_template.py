"""The worker template (worker/template.py, waker/template.py): workers
forked from a process that has imported what they import, through a real
waker; started on their own where the template cannot serve them."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from core.procfs import command_line, command_name, descendants
from harness.waker import WakerProcess
from harness.worker import ROOT, wait_until
from tests.conftest import TEST_PLUGINS
from waker.template import WorkerTemplate, forkable

ENV = {"PENELOPE_PLUGINS": TEST_PLUGINS, "WAKER_POLL_S": "0.2"}


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])


def is_template(pid: int) -> bool:
    return command_line(pid)[-2:] == ["-m", "worker.template"]


def driver_environ(worker: int) -> list[str]:
    """The worker's environment as its Playwright driver was started with it."""
    [driver] = [child for child in descendants(worker) if command_name(child).startswith("node")]
    return Path(f"/proc/{driver}/environ").read_bytes().decode().split("\0")


def test_a_start_only_variable_of_the_persona_s_own_means_a_worker_of_its_own():
    template = {"PATH": "/bin", "PYTHONUNBUFFERED": "1", "LANG": "C.UTF-8"}
    assert forkable({**template, "PENELOPE_STORE": "/s", "MAX_PAGES": "3"}, template)
    assert not forkable({**template, "MALLOC_ARENA_MAX": "2"}, template)
    assert not forkable({**template, "PYTHONHASHSEED": "0"}, template)
    assert not forkable({**template, "LANG": "de_DE.UTF-8"}, template)
    assert not forkable({name: value for name, value in template.items() if name != "LANG"}, template)


def test_a_template_that_ends_before_it_is_ready_is_given_up(tmp_path):
    """Started where there is no worker/template.py to run, it exits at once:
    it is not started again at each wake, and every worker is started on its own."""

    async def ask() -> tuple[object, bool]:
        template = WorkerTemplate(dict(os.environ), tmp_path)
        await template.start()
        forked = await template.fork(["manage.py", "serve"], dict(template.env), tmp_path / "worker.log")
        again = await template.fork(["manage.py", "serve"], dict(template.env), tmp_path / "worker.log")
        await template.close()
        return (forked, again), template.given_up

    assert asyncio.run(ask()) == ((None, None), True)


def test_what_the_template_imports_needs_no_settings_and_starts_no_thread_or_event_loop():
    """A fork of the template must share nothing live: no thread, no event
    loop (Twisted's reactor makes one), and no Django settings read."""
    checked = subprocess.run(
        [sys.executable, "-c", (
            "import asyncio, json, sys, threading\n"
            "from worker.template import preload\n"
            "preload()\n"
            "from django.conf import settings\n"
            "print(json.dumps({'threads': threading.active_count(), 'configured': settings.configured,\n"
            "  'reactor': 'twisted.internet.reactor' in sys.modules,\n"
            "  'loop': asyncio.get_event_loop_policy()._local._loop is not None, 'modules': len(sys.modules)}))"
        )],
        cwd=ROOT, env={name: value for name, value in os.environ.items() if name != "DJANGO_SETTINGS_MODULE"},
        capture_output=True, text=True, timeout=60,
    )
    assert checked.returncode == 0, checked.stderr
    found = json.loads(checked.stdout)
    assert found.pop("modules") > 1000
    assert found == {"threads": 1, "configured": False, "reactor": False, "loop": False}


def test_workers_are_forked_from_the_template_and_end_with_it(tmp_path):
    """The worker's parent is the template; its environment is its persona's;
    when the template dies, its workers end, and the next wake forks from a
    new one."""
    waker = WakerProcess(tmp_path, [{"name": "alice", "mode": "sleepy", "env": {"MAX_PAGES": "4"}}], env=ENV).start()
    try:
        first = waker.start_persona("alice")["pid"]
        template = parent_of(first)
        assert is_template(template) and parent_of(template) == waker.process.pid
        assert "MAX_PAGES=4" in driver_environ(first)
        with waker.through("alice") as via:
            assert via.get("/pages").json()["max_pages"] == 4

        os.kill(template, signal.SIGKILL)
        ended = waker.wait_for("alice", lambda body: body["state"] == "stopped")
        assert ended["last_exit"]["pid"] == first and ended["unexpected_exits"] == 1
        wait_until(lambda: not Path(f"/proc/{first}").exists() or None, what="the orphaned worker to end")

        second = waker.start_persona("alice")["pid"]
        assert is_template(parent_of(second)) and parent_of(second) != template
    finally:
        assert waker.stop() == []


def test_off_or_with_a_start_only_variable_a_worker_is_its_own_process(tmp_path):
    personas = [
        {"name": "plain", "mode": "sleepy"},
        {"name": "arena", "mode": "sleepy", "env": {"MALLOC_ARENA_MAX": "2"}},
    ]
    waker = WakerProcess(tmp_path / "on", personas, env=ENV).start()
    try:
        arena = waker.start_persona("arena")["pid"]
        assert parent_of(arena) == waker.process.pid
        assert "MALLOC_ARENA_MAX=2" in Path(f"/proc/{arena}/environ").read_bytes().decode().split("\0")
        assert is_template(parent_of(waker.start_persona("plain")["pid"]))
    finally:
        assert waker.stop() == []

    off = WakerProcess(tmp_path / "off", personas[:1], env={**ENV, "WAKER_FORK_WORKERS": "0"}).start()
    try:
        plain = off.start_persona("plain")["pid"]
        assert parent_of(plain) == off.process.pid
        assert not any(is_template(pid) for pid in descendants(off.process.pid))
    finally:
        assert off.stop() == []
