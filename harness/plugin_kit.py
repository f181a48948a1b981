"""The plugin authors' test kit: a pytest plugin that runs a family's tests
against a real Penelope worker and a loopback site of fixture pages.

Load it from the family's `conftest.py` (`manage.py startfamily` writes one):

    sys.path.insert(0, "/path/to/penelope")  # the checkout, for `harness`
    pytest_plugins = ["harness.plugin_kit"]

    @pytest.fixture(scope="session")
    def penelope_plugins():
        return ["plugins.web", "shop"]          # what the worker loads

    @pytest.fixture(scope="session")
    def penelope_pythonpath():
        return ["/path/to/families"]            # where it imports `shop` from

    @pytest.fixture(scope="session")
    def penelope_pages():
        return Path(__file__).parents[1] / "pages"

and write tests with its fixtures:

    def test_items(call, fixture_site):
        answer = call("shop/get-items", url=fixture_site.url("index.html"))
        assert answer.ok, answer                # the repr shows status and body
        assert answer["count"] == 3

    def test_items_as_a_job(job, fixture_site):
        ended = job("shop/get-items", url=fixture_site.url("index.html"))
        assert (ended["state"], ended["status"]) == ("done", 200), ended

The fixtures:
- `penelope_plugins` (session): the module paths of the families the worker
  loads; the ini option `penelope_plugins` (space or comma separated), else
  `["plugins.web"]`.
- `penelope_pythonpath` (session): folders put on the worker's PYTHONPATH
  (before any PYTHONPATH already set); the ini option `penelope_pythonpath`,
  relative to the rootdir, else none.
- `penelope_settings` (session): more of the worker's environment
  (`{"ACTION_TIMEOUT_S": "20", "SHOP_URL": ...}`); `{"PAGE_WAIT_S": "5"}`.
- `penelope_pages` (session): the folder `fixture_site` serves; override it.
- `fixture_site` (session): that folder on loopback; `.url("a.html")`, and
  `.requests`, the paths asked so far (with their query strings).
- `penelope` (session): the worker (`Penelope`): `base_url`, `key`,
  `client()`, `call(...)`, `job(...)`, `log()`.
- `call` and `job`: `penelope.call` and `penelope.job`.

Each worker is real: `manage.py serve` with a real Chromium and a throwaway
store, so a test sees what a client of the family will see. A worker that
does not start fails the tests with its log. The test process loads
Penelope's settings too (with a throwaway store of its own), so the family's
module imports there: pytest imports it when the tests are inside its package.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.worker import WorkerProcess

DEFAULT_PLUGINS = ["plugins.web"]
DEFAULT_SETTINGS = {"PAGE_WAIT_S": "5"}
LIVE_STATES = ("queued", "running")  # a job in these has not ended
POLL_WAIT_S = 30  # each long-poll of a job
CALL_TIMEOUT_S = 600  # past the longest action time limit a test is likely to give


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("penelope_plugins", "Families the test worker loads (module paths, space or comma separated).")
    parser.addini("penelope_pythonpath", "Folders on the test worker's PYTHONPATH, relative to the rootdir.")


def pytest_configure(config: pytest.Config) -> None:
    configure_django(config)


def configure_django(config: pytest.Config) -> None:
    """Penelope's settings in this process too, so that a family imports here:
    pytest imports a package's `__init__.py` (the family's, when its tests
    are inside it) to set it up, and a test may import the family's helpers.
    This process's store is a throwaway folder; the worker has its own."""
    import django
    from django.apps import apps

    if apps.ready:  # the project's own tests: pytest-django set it up
        return
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "penelope_site.settings")
    if os.environ.get("PENELOPE_STORE"):
        django.setup()
        return
    store = tempfile.mkdtemp(prefix="penelope-kit-")
    config.add_cleanup(lambda: shutil.rmtree(store, ignore_errors=True))
    os.environ["PENELOPE_STORE"] = store  # read once, as the settings load
    try:
        django.setup()
    finally:
        del os.environ["PENELOPE_STORE"]


def ini_list(config: pytest.Config, name: str) -> list[str]:
    return [word for word in re.split(r"[\s,]+", config.getini(name) or "") if word]


# --- answers ------------------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class Answer:
    """A plain call's answer: `answer.status`, `answer.body`, `answer["key"]`."""

    status: int
    body: dict[str, Any]

    @property
    def ok(self) -> bool:
        return self.status == 200

    def __getitem__(self, key: str) -> Any:
        try:
            return self.body[key]
        except KeyError:
            raise KeyError(f"{key!r} is not in {self!r}") from None

    def __repr__(self) -> str:
        shown = json.dumps(self.body, ensure_ascii=False)
        if len(shown) > 4000:
            shown = shown[:4000] + " ..."
        return f"Answer(status={self.status}, body={shown})"


def split_route(route: str) -> tuple[str, str]:
    family, slash, action = route.partition("/")
    if not (family and slash and action) or "/" in action:
        raise ValueError(f"A route is 'family/action', e.g. 'web/state'; got {route!r}.")
    return family, action


def body_of(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {"text": response.text}
    return body if isinstance(body, dict) else {"value": body}


class Penelope:
    """A running worker: what the `penelope` fixture yields."""

    def __init__(self, worker: WorkerProcess) -> None:
        self.worker = worker
        self.http = worker.client(timeout=CALL_TIMEOUT_S)

    @property
    def base_url(self) -> str:
        return self.worker.base_url

    @property
    def key(self) -> str:
        return self.worker.key

    def client(self, **kwargs: Any) -> httpx.Client:
        """A client of `/api/v1` with the key; close it (`with penelope.client() as client:`)."""
        return self.worker.client(**kwargs)

    def log(self) -> str:
        """The end of the worker's log."""
        return self.worker.log()

    def call(self, route: str, page: str = "main", **params: Any) -> Answer:
        """A plain call of `family/action` on `page`, its parameters sent as a
        JSON body (so their types are kept): the answer, whatever its status."""
        family, action = split_route(route)
        response = self.http.post(f"/{page}/plugin/{family}/{action}", json=params)
        return Answer(response.status_code, body_of(response))

    def job(
        self,
        route: str,
        page: str = "main",
        *,
        ttl: int = 600,
        timeout: float = 300,
        headers: dict[str, str] | None = None,
        **params: Any,
    ) -> dict[str, Any]:
        """Start `family/action` on `page` as a polled job (X-Result-Ttl: `ttl`,
        more job headers in `headers`), wait up to `timeout` seconds for it to
        end, and answer its poll's body (`state`, `status`, `result`, ...)."""
        family, action = split_route(route)
        sent = {"X-Result-Ttl": str(ttl), **(headers or {})}
        response = self.http.post(f"/{page}/plugin/{family}/{action}", json=params, headers=sent)
        assert response.status_code == 202, f"{route} did not start as a job: {response.status_code} {response.text}"
        job_id = response.json()["job_id"]
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            wait = max(1, min(POLL_WAIT_S, int(left)))
            polled = self.http.get(f"/jobs/{job_id}", params={"wait": wait})
            assert polled.status_code == 200, f"polling job {job_id}: {polled.status_code} {polled.text}"
            body = polled.json()
            if body["state"] not in LIVE_STATES:
                return body
            if time.monotonic() >= deadline:
                self.http.post(f"/jobs/{job_id}/cancel")  # the page is free for the next test
                raise AssertionError(f"job {job_id} ({route}) did not end within {timeout:g} s: {body}")

    def close(self) -> None:
        self.http.close()


@contextmanager
def running_penelope(
    store: Path, *, plugins: list[str], pythonpath: list[str], settings: dict[str, str]
) -> Iterator[Penelope]:
    """A worker with `store` loading `plugins`, stopped on the way out; a start
    that fails ends the test with the worker's log."""
    if isinstance(plugins, str):
        raise TypeError("penelope_plugins is a list of module paths, e.g. ['plugins.web', 'shop'].")
    path = [str(folder) for folder in pythonpath]
    if os.environ.get("PYTHONPATH"):
        path.append(os.environ["PYTHONPATH"])
    env = {**{name: str(value) for name, value in settings.items()}, "PENELOPE_PLUGINS": ",".join(plugins)}
    if path:
        env["PYTHONPATH"] = os.pathsep.join(path)
    worker = WorkerProcess(store, env=env)
    try:
        worker.start()
        failure = None
    except RuntimeError as error:  # its message ends with the worker's log
        failure = str(error)
    if failure is not None:
        pytest.fail(
            f"The Penelope worker did not start with PENELOPE_PLUGINS={env['PENELOPE_PLUGINS']} and "
            f"PYTHONPATH={env.get('PYTHONPATH', '(none)')}: {failure}",
            pytrace=False,
        )
    penelope = Penelope(worker)
    try:
        yield penelope
    finally:
        penelope.close()
        worker.stop()


# --- the fixture site ---------------------------------------------------------------------


class PagesHandler(SimpleHTTPRequestHandler):
    """Serves the site's folder; notes each path asked; never lets the browser cache."""

    def do_GET(self) -> None:
        self.server.requests.append(self.path)
        super().do_GET()

    def end_headers(self) -> None:
        # A test that counts the site's requests sees every fetch.
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, *args: Any) -> None:
        pass


class FixtureSite:
    """A folder of pages on loopback (a thread of this process)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), partial(PagesHandler, directory=str(self.folder)))
        self.server.daemon_threads = True
        self.server.requests = []
        self.thread = threading.Thread(target=self.server.serve_forever, name="fixture-site", daemon=True)

    @property
    def requests(self) -> list[str]:
        """The paths asked so far, in order, with their query strings."""
        return self.server.requests

    def url(self, path: str = "") -> str:
        """The absolute address of `path` on the site: `url("a.html?x=1")`."""
        return f"http://127.0.0.1:{self.server.server_address[1]}/{path.lstrip('/')}"

    def start(self) -> FixtureSite:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# --- the fixtures -------------------------------------------------------------------------


@pytest.fixture(scope="session")
def penelope_plugins(pytestconfig: pytest.Config) -> list[str]:
    return ini_list(pytestconfig, "penelope_plugins") or list(DEFAULT_PLUGINS)


@pytest.fixture(scope="session")
def penelope_pythonpath(pytestconfig: pytest.Config) -> list[str]:
    return [str(pytestconfig.rootpath / folder) for folder in ini_list(pytestconfig, "penelope_pythonpath")]


@pytest.fixture(scope="session")
def penelope_settings() -> dict[str, str]:
    return dict(DEFAULT_SETTINGS)


@pytest.fixture(scope="session")
def penelope_pages() -> Path | None:
    return None


@pytest.fixture(scope="session")
def fixture_site(penelope_pages: Path | str | None) -> Iterator[FixtureSite]:
    if penelope_pages is None:
        pytest.fail(
            "fixture_site serves the folder of pages that penelope_pages names, and it names none: override "
            "penelope_pages in your conftest.py (a session-scoped fixture answering the folder).",
            pytrace=False,
        )
    folder = Path(penelope_pages)
    if not folder.is_dir():
        pytest.fail(f"penelope_pages is {folder}, which is not a folder.", pytrace=False)
    site = FixtureSite(folder).start()
    yield site
    site.stop()


@pytest.fixture(scope="session")
def penelope(
    tmp_path_factory: pytest.TempPathFactory,
    penelope_plugins: list[str],
    penelope_pythonpath: list[str],
    penelope_settings: dict[str, str],
) -> Iterator[Penelope]:
    with running_penelope(
        tmp_path_factory.mktemp("penelope"),
        plugins=penelope_plugins,
        pythonpath=penelope_pythonpath,
        settings=penelope_settings,
    ) as running:
        yield running


@pytest.fixture
def call(penelope: Penelope):
    """`call("family/action", page="main", **params)`: a plain call's `Answer`."""
    return penelope.call


@pytest.fixture
def job(penelope: Penelope):
    """`job("family/action", page="main", ttl=600, timeout=300, headers=None, **params)`:
    the ended job's poll body."""
    return penelope.job
