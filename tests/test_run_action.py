"""`manage.py run_action`: one action on a browser of its own, from a
terminal, against the loopback site; and its refusals, made before any
browser starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile

import pytest

from core.store_lock import is_held
from harness.worker import ROOT, free_port, wait_until

PLUGINS = "plugins.web,plugins.demo,tests.support.testing_plugins"


def shell_env(tmp_path, env: dict[str, str] | None = None, drop: tuple[str, ...] = ()) -> dict[str, str]:
    environment = {**os.environ, "PENELOPE_STORE": str(tmp_path / "store"), "PENELOPE_PLUGINS": PLUGINS, **(env or {})}
    return {name: value for name, value in environment.items() if name not in drop}


def run_action(tmp_path, *args: str, env: dict[str, str] | None = None, drop: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", "run_action", *args], cwd=ROOT, env=shell_env(tmp_path, env, drop),
                          capture_output=True, text=True, timeout=120)


def answered(done: subprocess.CompletedProcess) -> tuple[int, dict]:
    """The status it printed and the JSON answer."""
    status = int(done.stderr.split("status: ")[1].split()[0])
    return status, json.loads(done.stdout)


def test_an_action_runs_on_a_page_and_prints_its_answer(tmp_path, site):
    done = run_action(tmp_path, "web/text", "--url", f"{site.url}/index.html", "--param", "selector=h1")
    assert done.returncode == 0, done.stderr
    status, body = answered(done)
    assert status == 200 and body["success"] is True and body["page_id"] == "shell"
    assert body["text"] == "Hello, Penelope"
    assert done.stdout == '{"success": true, "page_id": "shell", "text": "Hello, Penelope"}\n'  # one line, as the docs show
    assert not any((tmp_path / "store").iterdir())  # nothing written into the worker's store


def test_json_parameters_keep_their_types_and_a_param_overrides_them(tmp_path):
    body = '{"expression": "(arg) => [typeof arg, arg]", "arg": 41}'
    status, answer = answered(run_action(tmp_path, "web/evaluate", "--json", body))
    assert (status, answer["value"]) == (200, ["number", 41])
    status, answer = answered(run_action(tmp_path, "web/evaluate", "--json", body, "--param", "expression=6*7"))
    assert (status, answer["value"]) == (200, 42)


def test_a_failed_action_prints_its_envelope_and_exits_1(tmp_path):
    done = run_action(tmp_path, "testing/refuse")
    assert done.returncode == 1
    assert answered(done) == (418, {"success": False, "error": "The testing plugin refuses.", "page_id": "shell"})
    crashed = run_action(tmp_path, "testing/crash")
    assert crashed.returncode == 1 and answered(crashed)[0] == 500


def test_a_trace_is_written_and_files_go_to_the_media_folder(tmp_path, site):
    trace, media = tmp_path / "trace.zip", tmp_path / "files"
    done = run_action(tmp_path, "web/screenshot", "--url", f"{site.url}/index.html", "--trace", str(trace),
                      "--media-dir", str(media))
    assert done.returncode == 0, done.stderr
    _, body = answered(done)
    picture = body["media"] if "media" in body else next(v for v in body.values() if isinstance(v, dict) and "url" in v)
    assert picture["url"].startswith("file://") and picture["content_type"] == "image/png"
    files = list(media.iterdir())
    assert len(files) == 1 and files[0].read_bytes().startswith(b"\x89PNG") and files[0].stat().st_size == picture["size"]
    archive = zipfile.ZipFile(trace)
    assert {"trace.trace", "trace.network"} <= set(archive.namelist())
    assert any(name.startswith("resources/") for name in archive.namelist())  # the screenshots and snapshots
    assert f"{site.url}/index.html" in archive.read("trace.trace").decode()
    assert f"trace: {trace} (open it with `playwright show-trace" in done.stderr
    assert not any((tmp_path / "store").iterdir())  # no database, no media folder


def test_a_page_that_does_not_open_is_said_and_its_trace_kept(tmp_path):
    trace, closed = tmp_path / "traces" / "failed.zip", f"http://127.0.0.1:{free_port()}/"
    done = run_action(tmp_path, "web/state", "--url", closed, "--trace", str(trace))
    assert done.returncode == 1 and done.stdout == ""
    assert f"--url {closed} did not open, so the action did not run: Page.goto: net::ERR_CONNECTION_REFUSED" in done.stderr
    assert "trace.trace" in zipfile.ZipFile(trace).namelist() and f"trace: {trace}" in done.stderr


@pytest.mark.parametrize(
    "args, env, says",
    [
        (("web/nope",), {}, "The family web has no action 'nope'; it has"),
        (("shop/list",), {}, "No action shop/list: the families loaded (PENELOPE_PLUGINS) are demo, testing, web"),
        (("web/text",), {}, "Invalid parameter 'selector': This field is required."),
        (("web/text", "--param", "selector"), {}, "--param takes key=value, as in a query string; got 'selector'."),
        (("web/text", "--json", "[1]"), {}, "--json must be a JSON object"),
        (("web/text", "--json", "{"), {}, "--json is not JSON"),
        (("web/state", "--headed"), {}, "--headed needs a display, and neither DISPLAY nor WAYLAND_DISPLAY is set"),
    ],
)
def test_refusals_say_why_and_start_no_browser(tmp_path, args, env, says):
    # The "browser" records that it was started: a refusal must never get that far.
    launched = tmp_path / "launched"
    browser = tmp_path / "chromium"
    browser.write_text(f"#!/bin/sh\ntouch {launched}\nexit 1\n")
    browser.chmod(0o755)
    began = time.monotonic()
    done = run_action(tmp_path, *args, env={"PENELOPE_BROWSER": str(browser), **env}, drop=("DISPLAY", "WAYLAND_DISPLAY"))
    assert done.returncode != 0 and says in done.stderr, done.stderr
    assert done.stdout == "" and "Traceback" not in done.stderr
    assert not launched.exists()
    assert time.monotonic() - began < 30


def test_no_chromium_is_said_in_a_sentence(tmp_path):
    done = run_action(tmp_path, "web/state", env={"PENELOPE_BROWSER": str(tmp_path / "no-such-chromium")})
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert f"PENELOPE_BROWSER is set to {tmp_path / 'no-such-chromium'}, which is not an executable file." in done.stderr


def test_the_profile_of_a_running_worker_is_refused(tmp_path, make_worker):
    worker = make_worker()
    done = run_action(tmp_path, "web/state", "--profile", env={"PENELOPE_STORE": str(worker.store)})
    assert done.returncode != 0 and done.stdout == ""
    assert f"A worker (pid {worker.process.pid}) is using the persona's profile" in done.stderr, done.stderr
    assert "stop it, or drop --profile" in done.stderr


def holder(store) -> str:
    """What the store's lock file says of its holder (core/store_lock.py)."""
    try:
        return (store / "worker.lock").read_text()
    except FileNotFoundError:
        return ""


def test_the_profile_is_held_while_the_shell_uses_it(tmp_path):
    """A lock a killed browser left on the profile is cleared; the store is the
    shell's while it runs, so no worker (nor recover_jobs) takes it meanwhile."""
    store = tmp_path / "store"
    (store / "profile").mkdir(parents=True)
    gone = subprocess.Popen(["true"])
    gone.wait()
    (store / "profile" / "SingletonLock").symlink_to(f"elsewhere-{gone.pid}")
    shell = subprocess.Popen(
        [sys.executable, "manage.py", "run_action", "testing/sleep", "--param", "seconds=4", "--profile"],
        cwd=ROOT, env=shell_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        # Read, not tried: trying takes the lock for a moment, and the shell would be refused.
        wait_until(lambda: holder(store) == f"{shell.pid} run_action", what="the shell to hold the store")
        recover = subprocess.run([sys.executable, "manage.py", "recover_jobs"], cwd=ROOT, env=shell_env(tmp_path),
                                 capture_output=True, text=True, timeout=60)
        assert shell.poll() is None, "the shell ended before recover_jobs was refused: " + shell.communicate()[1]
        assert recover.returncode != 0
        assert f"is in use by run_action (pid {shell.pid})" in recover.stderr, recover.stderr
        out, err = shell.communicate(timeout=120)
    finally:
        shell.kill()
        shell.wait()
    assert shell.returncode == 0, err
    assert json.loads(out)["tag"] == "" and "status: 200" in err
    assert not (store / "profile" / "SingletonLock").is_symlink()  # Chromium's own, removed as it closed
    assert not is_held(store / "worker.lock")
