"""A persona's Django admin through a real waker, `/w/{persona}/admin/`
(waker/admin_forward.py): the worker writes the prefix into its pages and
redirects (the `Daphne-Root-Path` the waker sends, penelope_site/asgi.py),
its static files come through `/w/{persona}/static/`, its cookies are moved
under the prefix, a sign-in passes the CSRF check over plain HTTP, and a
request without a key never wakes a sleeping worker."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from harness.waker import WakerProcess
from harness.worker import ROOT
from tests.test_waker import WAKER_ENV


@pytest.fixture(scope="module")
def waker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WakerProcess]:
    """`desk` runs (started here, with an operator in its store); `nap` is
    never started by anything but a test that means to."""
    running = WakerProcess(
        tmp_path_factory.mktemp("waker"),
        [{"name": "desk", "mode": "sleepy", "idle_timeout_s": 600}, {"name": "nap", "mode": "sleepy"}],
        env=WAKER_ENV,
    ).start()
    try:
        running.start_persona("desk")  # its store migrated, so the operator can be made
        env = {**os.environ, "PENELOPE_STORE": str(running.store("desk")), "DJANGO_SUPERUSER_PASSWORD": "pw"}
        subprocess.run(
            [sys.executable, "manage.py", "createsuperuser", "--noinput", "--username", "op", "--email", "op@example.com"],
            cwd=ROOT, env=env, check=True, capture_output=True, timeout=60,
        )
        yield running
    finally:
        left = running.stop()
    assert left == [], "workers outlived their waker"


def admin_of(waker: WakerProcess, name: str) -> httpx.Client:
    """A browser of the persona's admin through the waker: no key, its own cookies."""
    return httpx.Client(base_url=f"{waker.base_url}/w/{name}", timeout=30)


def written_urls(page: str) -> list[str]:
    """Every root-relative URL a page writes: links, scripts, styles, form actions."""
    return re.findall(r'(?:href|src|action)="(/[^"]*)"', page)


def cookie_path(response: httpx.Response, name: str) -> str:
    (cookie,) = [value for value in response.headers.get_list("set-cookie") if value.startswith(name + "=")]
    return re.search(r";\s*Path=([^;]*)", cookie, re.IGNORECASE).group(1)


def csrf_token(page: str) -> str:
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)


def test_the_admin_signs_in_and_lists_jobs_under_the_persona_s_prefix(waker):
    with admin_of(waker, "desk") as browser:
        first = browser.get("/admin/")
        assert (first.status_code, first.headers["location"]) == (302, "/w/desk/admin/login/?next=/w/desk/admin/")
        form = browser.get(waker.base_url + first.headers["location"])  # a path from the waker's root
        assert form.status_code == 200
        assert '<form action="/w/desk/admin/login/?next=/w/desk/admin/" method="post"' in form.text
        urls = written_urls(form.text)
        assert "/w/desk/static/admin/css/base.css" in urls
        assert [url for url in urls if not url.startswith("/w/desk/")] == []
        # The CSRF cookie is the persona's alone: another persona's admin on
        # this waker (or the console) never gets it.
        assert cookie_path(form, "csrftoken") == "/w/desk/"
        style = browser.get("/static/admin/css/base.css")
        assert style.status_code == 200 and style.headers["content-type"].startswith("text/css")
        assert "body" in style.text

        # A sign-in as a browser posts it: the cookie, the form's token, and
        # the Origin of the page, which is the waker's, on plain HTTP.
        login = {"username": "op", "password": "pw", "csrfmiddlewaretoken": csrf_token(form.text), "next": "/w/desk/admin/"}
        signed_in = browser.post(
            "/admin/login/?next=/w/desk/admin/", data=login, headers={"Origin": waker.base_url, "Referer": str(form.url)}
        )
        assert signed_in.status_code == 302, signed_in.text[:2000]
        assert signed_in.headers["location"] == "/w/desk/admin/"
        assert cookie_path(signed_in, "sessionid") == "/w/desk/"

        listing = browser.get("/admin/jobs/job/")
        assert listing.status_code == 200 and "Select job to view" in listing.text
        urls = written_urls(listing.text)
        assert {"/w/desk/admin/", "/w/desk/admin/jobs/job/", "/w/desk/admin/logout/", "/w/desk/api/v1/health"} <= set(urls)
        assert [url for url in urls if not url.startswith("/w/desk/")] == []
        # "View site" is the worker's health, which the waker answers without a key.
        assert browser.get("/api/v1/health").status_code == 200


def test_a_sign_in_without_its_csrf_token_is_still_refused(waker):
    with admin_of(waker, "desk") as browser:
        browser.get("/admin/login/")  # the CSRF cookie, but no token in the form
        refused = browser.post(
            "/admin/login/", data={"username": "op", "password": "pw"}, headers={"Origin": waker.base_url}
        )
        assert refused.status_code == 403 and "sessionid" not in refused.headers.get("set-cookie", "")


def test_the_worker_s_own_admin_is_as_it_was_and_ignores_a_root_path_that_is_no_path(waker):
    worker = f"http://127.0.0.1:{waker.personas['desk']['port']}"
    with httpx.Client(base_url=worker, timeout=30) as browser:
        form = browser.get("/admin/login/")
        assert form.status_code == 200 and '<form action="/admin/login/" method="post"' in form.text
        assert "/static/admin/css/base.css" in written_urls(form.text)
        assert cookie_path(form, "csrftoken") == "/"
        # A client that reaches the worker can send the header the waker
        # sends; one that would lead a redirect to another host is dropped.
        elsewhere = browser.get("/admin/", headers={"Daphne-Root-Path": "//elsewhere.example"})
        assert elsewhere.headers["location"] == "/admin/login/?next=/admin/"
        # And off the admin it is dropped whatever it says: the static files
        # are served from the path as it came, and no path under it reaches the API.
        assert browser.get("/static/admin/css/base.css", headers={"Daphne-Root-Path": "/w/desk"}).status_code == 200
        assert browser.get("/w/desk/api/v1/health", headers={"Daphne-Root-Path": "/w/desk"}).status_code == 404


def test_a_sleeping_persona_s_admin_answers_503_and_is_not_woken(waker):
    assert waker.persona("nap")["state"] == "stopped"
    with admin_of(waker, "nap") as browser:
        for asleep in (
            browser.get("/admin/"),
            browser.get("/admin/login/"),
            browser.post("/admin/login/", data={"username": "op", "password": "pw"}),
            browser.get("/static/admin/css/base.css"),
        ):
            assert asleep.status_code == 503
            assert asleep.headers["content-type"] == "text/html; charset=utf-8"
            assert "Persona nap is asleep (its worker is stopped)" in asleep.text
            assert '<a href="/console/p/nap/">' in asleep.text and "POST /api/v1/personas/nap/start" in asleep.text
    assert waker.persona("nap")["state"] == "stopped" and waker.workers("nap") == []


def test_the_admin_s_routes_take_no_dot_segments_and_only_its_methods(waker):
    with admin_of(waker, "desk") as browser:
        for path in ("/admin/%2E%2E/api/v1/pages", "/static/%2E%2E/admin/", "/admin/%2e/login/", "/admin/..%2Fdemo/"):
            refused = browser.get(path)
            assert refused.status_code == 404 and refused.json()["error"].startswith("No route /w/desk/"), path
        assert browser.get("/demo/").status_code == 404  # the rest of the worker stays out of reach
        put = browser.put("/admin/login/")
        assert (put.status_code, put.headers["allow"]) == (405, "GET, HEAD, POST")
        posted = browser.post("/static/admin/css/base.css")
        assert (posted.status_code, posted.headers["allow"]) == (405, "GET, HEAD")
    # None of it woke the sleeping persona either.
    with admin_of(waker, "nap") as browser:
        assert browser.get("/admin/%2E%2E/api/v1/pages").status_code == 404
    assert waker.persona("nap")["state"] == "stopped"
