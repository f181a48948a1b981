"""A newcomer's first hour, as the README walks it: each stumble found on a
fresh clone, checked against the real commands and the README's own text."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys

from harness.waker import WakerProcess
from harness.worker import ROOT, WorkerProcess, free_port
from tests.test_operator_commands import manage
from tests.test_serve import serve_until_exit

README = (ROOT / "README.md").read_text()


def readme_block(after: str, language: str) -> str:
    """The first fenced block of `language` after the text `after`."""
    start = README.index(after)
    found = re.search(rf"```{language}\n(.*?)```", README[start:], re.S)
    assert found, f"no {language} block after {after!r}"
    return found.group(1)


def test_setup_says_each_step_as_it_goes():
    done = subprocess.run(["bash", "scripts/setup.sh", "base"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    steps = [line for line in done.stdout.splitlines() if line.startswith("setup: ")]
    assert steps[0].startswith("setup: installing requirements/base.txt into .venv")
    assert "setup: looking for a Chromium" in steps
    assert steps[-1].startswith("setup: Chromium: ")
    assert "serve: starting the worker" in (ROOT / "scripts" / "serve.sh").read_text()


def test_a_bad_plugins_entry_stops_the_start_naming_the_setting(tmp_path):
    done = serve_until_exit(tmp_path, PENELOPE_PLUGINS="plugins.web,plugins.dmeo")
    assert done.returncode != 0
    assert "PENELOPE_PLUGINS lists plugins.dmeo, which cannot be imported (No module named 'plugins.dmeo')" in done.stderr
    assert "browser started" not in done.stdout + done.stderr


def test_the_readme_plugin_example_runs_and_each_of_its_branches_answers(tmp_path):
    (tmp_path / "example.py").write_text(readme_block("## Writing a plugin family", "python"))
    worker = WorkerProcess(
        tmp_path / "store", env={"PENELOPE_PLUGINS": "plugins.web,example", "PYTHONPATH": str(tmp_path)}
    ).start()
    try:
        with worker.client() as api:
            greeted = api.get("/main/plugin/example/greet", params={"name": "Ada"})
            assert greeted.json() == {"success": True, "page_id": "main", "greeting": "Hello Ada"}
            nobody = api.get("/main/plugin/example/greet", params={"name": "nobody"})
            assert (nobody.status_code, nobody.json()["error"]) == (404, "Nobody is here to greet.")
            missing = api.get("/main/plugin/example/greet")
            assert (missing.status_code, missing.json()["error"]) == (400, "Invalid parameter 'name': This field is required.")
    finally:
        worker.stop()
    assert '"greeting":"Hello Ada"' in README  # the answer the README shows


def test_the_readme_waker_example_works_offline_as_written(tmp_path):
    personas = json.loads(readme_block("## Running several personas", "bash").split("<<'JSON'\n")[1].split("\nJSON")[0])
    # As written, on free ports of this machine and in a folder of the test's own.
    listed = [{key: value for key, value in persona.items() if key != "port"} for persona in personas["personas"]]
    assert not any("PENELOPE_PROXY" in persona.get("env", {}) for persona in listed)
    waker = WakerProcess(tmp_path, listed, env={"PENELOPE_PLUGINS": "plugins.web,plugins.demo"}).start()
    try:
        with waker.through("alice") as alice:
            assert alice.get("/pages").status_code == 200
        with waker.through("bob") as bob:
            opened = bob.get("/main/plugin/demo/open-account", params={"handle": "alice"})
            assert opened.status_code == 200 and opened.json()["name"] == "Alice Lopez"
    finally:
        waker.stop()


def test_jobs_shows_one_job_as_a_summary_and_all_of_it_with_full(make_worker):
    worker = make_worker()
    with worker.client() as api:
        response = api.get("/main/plugin/demo/get-following", params={"handle": "alice", "limit": 30, "pause_ms": 0},
                           headers={"X-Result-Ttl": "600"})  # fmt: skip
        job_id = response.json()["job_id"]
        api.get(f"/jobs/{job_id}", params={"wait": 60})
    summary = manage(worker, "jobs", job_id).stdout
    lines = summary.splitlines()
    assert len(lines) <= 12, summary
    assert lines[0].split() == ["job", job_id] and lines[1].split() == ["state", "done"]
    assert "demo/get-following on page main" in summary and "status      200" in summary
    assert re.search(r"result +[\d,]+ bytes of JSON \(success, page_id, handle, following, count, total\); --full shows it", summary)
    assert "dara_ito1" not in summary  # the result itself waits for --full
    full = json.loads(manage(worker, "jobs", job_id, "--full").stdout)
    assert full["result"]["count"] == 30 and full["attempt_log"] == []
    refused = manage(worker, "jobs", "--full", check=False)
    assert refused.returncode != 0 and "--full shows one job: give its JOB_ID." in refused.stderr


def test_the_readme_says_once_how_to_run_management_commands_and_how_long_the_tests_take():
    assert "`.venv/bin/python manage.py <command>`" in README
    assert re.search(r"about \d+ minutes", README.split("```bash\nscripts/test.sh")[0])
    # Every management command the README and the guides show uses the virtual environment.
    for path in ["README.md", *map(str, (ROOT / "docs").rglob("*.md"))]:
        text = (ROOT / path).read_text()
        bare = [line for line in text.splitlines() if re.search(r"(?<![/.\w])python3? manage\.py", line)]
        assert not [line for line in bare if "`python manage.py <command>`" not in line], (path, bare)
    assert sys.executable  # the suite itself runs in .venv


def test_a_busy_waker_port_is_said_at_once_naming_the_setting(tmp_path):
    personas = tmp_path / "personas.json"
    personas.write_text(json.dumps({"personas": [{"name": "alice", "store": "alice", "port": free_port()}]}))
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "manage.py", "waker", "--port", str(port), "--personas", str(personas)],
            cwd=ROOT, capture_output=True, text=True, timeout=60,
        )
    assert done.returncode != 0
    assert f"Could not listen on 127.0.0.1:{port}: Address already in use." in done.stderr
    assert f"WAKER_PORT={port + 1} or --port {port + 1}" in done.stderr


def test_a_busy_worker_port_is_said_before_the_set_up(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = subprocess.run(
            ["bash", "scripts/serve.sh", "--port", str(port)], cwd=ROOT, capture_output=True, text=True, timeout=60,
            env={**os.environ, "PENELOPE_STORE": str(tmp_path / "store")},
        )
    assert done.returncode != 0
    assert f"Could not listen on 127.0.0.1:{port}: Address already in use." in done.stderr
    assert f"PENELOPE_PORT={port + 1} or --port {port + 1}" in done.stderr
    assert "setup:" not in done.stdout  # nothing of the set-up ran
