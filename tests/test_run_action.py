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

from harness.worker import ROOT, chromium_processes

PLUGINS = "plugins.web,plugins.demo,tests.support.testing_plugins"


def run_action(tmp_path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PENELOPE_STORE": str(tmp_path / "store"), "PENELOPE_PLUGINS": PLUGINS, **(env or {})}
    return subprocess.run([sys.executable, "manage.py", "run_action", *args], cwd=ROOT, env=environment,
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
    events = zipfile.ZipFile(trace).read("trace.trace").decode()
    assert f"{site.url}/index.html" in events and "playwright show-trace" in done.stderr
    assert not any((tmp_path / "store").iterdir())


@pytest.mark.parametrize(
    "args, env, says",
    [
        (("web/nope",), {}, "The family web has no action 'nope'; it has"),
        (("shop/list",), {}, "No action shop/list: the families loaded (PENELOPE_PLUGINS) are demo, testing, web"),
        (("web/text",), {}, "Invalid parameter 'selector': This field is required."),
        (("web/text", "--param", "selector"), {}, "--param takes key=value, as in a query string; got 'selector'."),
        (("web/text", "--json", "[1]"), {}, "--json must be a JSON object"),
        (("web/text", "--json", "{"), {}, "--json is not JSON"),
        (("web/state", "--headed"), {"DISPLAY": "", "WAYLAND_DISPLAY": ""}, "--headed needs a display"),
    ],
)
def test_refusals_say_why_and_start_no_browser(tmp_path, args, env, says):
    before = set(chromium_processes())
    began = time.monotonic()
    done = run_action(tmp_path, *args, env=env)
    assert done.returncode != 0 and says in done.stderr, done.stderr
    assert done.stdout == ""
    assert set(chromium_processes()) <= before  # none was started (a launch leaves a child behind while it runs)
    assert time.monotonic() - began < 30


def test_the_profile_of_a_running_worker_is_refused(tmp_path, make_worker):
    worker = make_worker()
    done = run_action(tmp_path, "web/state", "--profile", env={"PENELOPE_STORE": str(worker.store)})
    assert done.returncode != 0
    assert "is in use by process" in done.stderr and "a running worker" in done.stderr, done.stderr
