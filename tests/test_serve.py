"""`manage.py serve` as a process: key, clean stop, crash and restart, missing browser."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx

from tests.support.worker import ROOT, WorkerProcess, chromium_processes


def browsers_of(worker: WorkerProcess) -> list[str]:
    return [line for line in chromium_processes() if str(worker.store) in line]


def test_a_generated_key_is_printed_kept_and_reused(make_worker):
    worker = make_worker(key="")
    key = (worker.store / "key").read_text().strip()
    assert len(key) >= 32
    assert f"Generated PENELOPE_KEY (kept in {worker.store / 'key'}): {key}" in worker.log()
    assert oct((worker.store / "key").stat().st_mode & 0o777) == "0o600"
    worker.key = key
    with worker.client() as api:
        assert api.get("/pages").status_code == 200
    assert worker.stop() == 0
    worker.start()
    with worker.client() as api:
        assert api.get("/pages").status_code == 200
    assert worker.log().count("Generated PENELOPE_KEY") == 1


def test_sigterm_stops_cleanly_and_leaves_no_chromium(make_worker):
    worker = make_worker()
    assert browsers_of(worker)
    assert worker.stop() == 0
    assert browsers_of(worker) == []
    assert "browser closed" in worker.log()


def test_a_killed_worker_starts_again_on_its_profile(make_worker, site):
    worker = make_worker()
    with worker.client() as api:
        api.get("/main/plugin/web/open", params={"url": site.url + "/index.html"})
    worker.kill()
    assert os.path.islink(worker.store / "profile" / "SingletonLock")  # the crash left it
    worker.start()
    with worker.client() as api:
        assert api.get("/main/plugin/web/open", params={"url": site.url + "/second.html"}).status_code == 200
    assert worker.stop() == 0
    assert browsers_of(worker) == []


def serve_until_exit(tmp_path, **env_overrides: str) -> subprocess.CompletedProcess:
    """Run `serve` expecting it to fail at start."""
    env = {
        **os.environ,
        "PENELOPE_STORE": str(tmp_path / "store"),
        "PENELOPE_KEY": "k",
        "PENELOPE_PLUGINS": "plugins.web",
        **env_overrides,
    }
    return subprocess.run(
        [sys.executable, "manage.py", "serve"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def test_a_missing_browser_is_one_clear_sentence(tmp_path):
    nowhere = dict(PATH=os.path.dirname(sys.executable), PLAYWRIGHT_BROWSERS_PATH=str(tmp_path / "no-browsers"))
    done = serve_until_exit(tmp_path, PENELOPE_BROWSER="", **nowhere)
    assert done.returncode != 0
    assert "No Chromium found (tried Playwright's Chromium at" in done.stderr
    assert "Traceback" not in done.stderr

    done = serve_until_exit(tmp_path, PENELOPE_BROWSER=str(tmp_path / "nothing-here"), **nowhere)
    assert done.returncode != 0
    assert f"PENELOPE_BROWSER is set to {tmp_path / 'nothing-here'}, which is not an executable file." in done.stderr


def test_a_port_in_use_fails_the_start(make_worker, tmp_path):
    first = make_worker()
    done = serve_until_exit(tmp_path, PENELOPE_PORT=str(first.port))
    assert done.returncode != 0
    assert f"Could not listen on 127.0.0.1:{first.port}." in done.stderr
    assert [line for line in chromium_processes() if str(tmp_path) in line] == []
    assert httpx.get(first.base_url + "/api/v1/health").status_code == 200
