"""`manage.py serve` as a process: key, clean stop, crash and restart, missing browser."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sqlite3
import stat
import subprocess
import sys

import httpx
import pytest

from harness.worker import ROOT, WorkerProcess, chromium_processes


def browsers_of(worker: WorkerProcess) -> list[str]:
    return [line for line in chromium_processes() if str(worker.store) in line]


def test_a_generated_key_is_kept_said_where_never_printed_and_reused(make_worker):
    worker = make_worker(key="")
    key = (worker.store / "key").read_text().strip()
    assert len(key) >= 32
    key_file = worker.store / "key"
    assert f"Generated PENELOPE_KEY: it is kept in {key_file} (readable by its owner only); read it with: cat {key_file}" in worker.log()
    assert key not in worker.log()
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
    # A crash of the whole host, Chromium first: a Chromium that outlives its
    # worker a moment sees its pipe close and removes its lock itself.
    for line in browsers_of(worker):
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(line.split()[0]), signal.SIGKILL)
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
    # Said before the browser starts, naming both ways to choose another port.
    assert f"Could not listen on 127.0.0.1:{first.port}: Address already in use." in done.stderr
    assert f"PENELOPE_PORT={first.port + 1} or --port {first.port + 1}" in done.stderr
    assert "browser started" not in done.stdout + done.stderr
    assert [line for line in chromium_processes() if str(tmp_path) in line] == []
    assert httpx.get(first.base_url + "/api/v1/health").status_code == 200


def test_serve_port_is_the_port_its_own_urls_use(make_worker):
    """The demo family builds URLs to this worker: from `--port`, not from a
    PENELOPE_PORT where another worker listens."""
    other = make_worker()
    worker = make_worker(env={"PENELOPE_PORT": str(other.port)}, start=False)
    worker.args = ("--port", str(worker.port))
    worker.start()
    with worker.client() as api:
        assert api.get("/main/plugin/demo/open-account", params={"handle": "alice"}).status_code == 200
        assert api.get("/main").json()["url"].startswith(f"http://127.0.0.1:{worker.port}/demo/")


def test_a_fresh_store_signs_with_a_secret_derived_from_its_new_key(make_worker):
    from django.core import signing

    from penelope_site.settings import secret_key_from

    worker = make_worker(key="")
    key = (worker.store / "key").read_text().strip()
    env = {**os.environ, "PENELOPE_STORE": str(worker.store), "DJANGO_SUPERUSER_PASSWORD": "pw"}
    subprocess.run(
        [sys.executable, "manage.py", "createsuperuser", "--noinput", "--username", "op", "--email", "op@example.com"],
        cwd=ROOT, env=env, check=True, capture_output=True, timeout=60,
    )
    with httpx.Client(base_url=worker.base_url) as browser:
        form = browser.get("/admin/login/").text
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
        login = {"username": "op", "password": "pw", "csrfmiddlewaretoken": token, "next": "/admin/"}
        assert browser.post("/admin/login/", data=login).status_code == 302
        assert browser.get("/admin/jobs/job/").status_code == 200
    # The admin's own connections are expected, and said so without alarm.
    assert "database connection opened for an admin page, on Django's request thread" in worker.log()
    assert "outside the database thread" not in worker.log()
    with sqlite3.connect(worker.store / "penelope.db") as db:
        (session_data,) = db.execute("select session_data from django_session").fetchone()
    salt = "django.contrib.sessions.SessionStore"
    assert signing.loads(session_data, key=secret_key_from(key), salt=salt)["_auth_user_id"]
    with pytest.raises(signing.BadSignature):
        signing.loads(session_data, key="penelope-unset", salt=salt)


def modes(store) -> dict[str, str]:
    paths = [store, store / "penelope.db", store / "penelope.db-wal", store / "key", store / "media"]
    paths += sorted((store / "media").iterdir())
    return {str(path.relative_to(store)): oct(stat.S_IMODE(path.stat().st_mode)) for path in paths}


def test_the_store_is_private_to_its_user(make_worker):
    worker = make_worker(key="")
    worker.key = (worker.store / "key").read_text().strip()
    with worker.client() as api:
        stored = api.get("/main/plugin/testing/media", params={"size": 10})
        assert stored.status_code == 200
    private = modes(worker.store)
    assert private.pop(".") == private.pop("media") == "0o700"
    assert set(private.values()) == {"0o600"} and len(private) == 4, private
    assert worker.stop() == 0

    # A store made before: open to every local user. The next start closes it.
    for path in (worker.store, worker.store / "media"):
        path.chmod(0o755)
    for path in [worker.store / "penelope.db", worker.store / "key", *(worker.store / "media").iterdir()]:
        path.chmod(0o644)
    worker.start()
    assert modes(worker.store) == {".": "0o700", "media": "0o700", **private}
