"""The web family tested as a family author tests theirs: with the plugin
authors' kit (harness/plugin_kit.py), its `call` and `job` on a real worker
and its `fixture_site` serving tests/support/pages. The rest of the web
family's tests are in test_web_family.py, on the project's own fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.plugin_kit import Answer, running_penelope, split_route
from harness.worker import ROOT


@pytest.fixture(scope="session")
def penelope_pages() -> Path:
    # Session-scoped as the kit's own, so its session-scoped fixture_site may use it.
    return ROOT / "tests" / "support" / "pages"


@pytest.fixture(scope="session")
def penelope_plugins() -> list[str]:
    # The web family, and the suite's own (`testing/export` takes a download as an author's action would).
    return ["plugins.web", "tests.support.testing_plugins"]


@pytest.fixture(scope="module")
def penelope(tmp_path_factory, penelope_plugins, penelope_pythonpath, penelope_settings) -> Iterator:
    """The kit's worker for this module only: its Chromium does not outlive
    these tests through the rest of the suite."""
    with running_penelope(
        tmp_path_factory.mktemp("kit-store"),
        plugins=penelope_plugins,
        pythonpath=penelope_pythonpath,
        settings=penelope_settings,
    ) as running:
        yield running


def test_a_wait_that_runs_out_answers_408_naming_what_it_waited_for(call, fixture_site):
    assert call("web/open", url=fixture_site.url("index.html")).ok
    answer = call("web/wait", selector="#never", timeout_ms=200)
    assert answer.status == 408, answer
    assert answer["error"] == "Waited 200 ms for '#never' to be visible; it did not happen."
    answer = call("web/text", selector="h1", wait_for={"function": "window.never === 1", "timeout_ms": 150})
    assert answer.status == 408, answer
    assert answer["error"] == "Waited 150 ms for the function 'window.never === 1' to be truthy; it did not happen."


def test_evaluate_calls_a_function_with_its_arg_and_awaits_promises(call, fixture_site):
    call("web/open", url=fixture_site.url("index.html"))
    assert call("web/evaluate", expression="([a, b]) => a * b", arg=[6, 7])["value"] == 42
    promised = call("web/evaluate", expression="new Promise(r => setTimeout(() => r(document.title), 20))")
    assert promised["value"] == "Test home"
    not_json = call("web/evaluate", expression="0/0")
    assert (not_json.status, not_json["error"]) == (400, "The expression's value cannot be sent as JSON.")
    thrown = call("web/evaluate", expression="throw new Error('nope')")
    assert thrown.status == 400 and thrown["error"].startswith("The expression failed:")


def test_content_answers_the_pages_html_or_one_elements(call, fixture_site):
    call("web/open", url=fixture_site.url("index.html"))
    whole = call("web/content")
    assert whole["title"] == "Test home" and whole["url"] == fixture_site.url("index.html")
    assert whole["html"].startswith("<!DOCTYPE html>") and '<h1 id="heading">Hello, Penelope</h1>' in whole["html"]
    assert call("web/content", selector="h1")["html"] == '<h1 id="heading">Hello, Penelope</h1>'
    assert call("web/content", selector="ul", inner=True)["html"].startswith('<li class="item">one</li>')
    missing = call("web/content", selector="#none")
    assert (missing.status, missing["error"]) == (404, "Nothing on the page matches '#none'.")


def test_blocked_resource_types_are_not_fetched_during_the_call_only(call, fixture_site):
    def fetched_during(**controls) -> set[str]:
        mark = len(fixture_site.requests)
        assert call("web/open", url=fixture_site.url("assets.html"), wait_until="load", **controls).ok
        return {path.partition("as=")[2] for path in fixture_site.requests[mark:] if "as=" in path}

    assert {"image", "stylesheet"} <= fetched_during()
    assert fetched_during(block=["image", "stylesheet", "font", "media"]) == set()
    assert fetched_during(block=["image"]) >= {"stylesheet"}
    assert "image" not in fetched_during(block=["image"])
    assert "image" in fetched_during()  # undone after the call


def test_next_by_a_button_that_rewrites_the_same_rows_in_place(call, fixture_site):
    call("web/open", url=fixture_site.url("pager.html?pages=3&per=3"))
    answer = call("web/collect", item_selector=".row", next={"selector": "#more"}, scroll_pause_ms=0)
    assert answer["items"] == [f"Row {n}" for n in range(9)]
    assert (answer["pages"], answer["stopped_because"]) == (3, "end")


def test_collect_as_a_job_ends_with_the_plain_calls_answer(call, job, fixture_site):
    params = {"item_selector": ".row", "dedupe": False, "next": {"selector": "#more"}, "scroll_pause_ms": 0}
    call("web/open", url=fixture_site.url("pager.html?pages=2&per=2&mode=append"))
    plain = call("web/collect", **params)
    call("web/open", url=fixture_site.url("pager.html?pages=2&per=2&mode=append"))
    ended = job("web/collect", ttl=60, **params)
    assert (ended["state"], ended["status"]) == ("done", 200), ended
    assert ended["result"] == plain.body and plain["items"] == ["Row 0", "Row 1", "Row 2", "Row 3"]


# --- the kit's own pieces ------------------------------------------------------------------


def test_an_answer_shows_its_status_and_body_when_an_assert_fails():
    answer = Answer(404, {"success": False, "error": "No list here."})
    assert not answer.ok and answer["error"] == "No list here."
    assert repr(answer) == 'Answer(status=404, body={"success": false, "error": "No list here."})'
    with pytest.raises(AssertionError, match=r"Answer\(status=404, body=\{.*No list here"):
        assert answer.ok, answer
    with pytest.raises(KeyError, match=r"items.* is not in Answer\(status=404, body=\{.*No list here"):
        answer["items"]


def test_a_route_is_a_family_and_an_action():
    assert split_route("shop/get-items") == ("shop", "get-items")
    for bad in ("shop", "/get-items", "shop/", "shop/a/b"):
        with pytest.raises(ValueError, match="A route is 'family/action'"):
            split_route(bad)


def test_an_authors_action_keeps_the_download_its_click_starts(call, fixture_site):
    call("web/open", url=fixture_site.url("download.html"))
    answer = call("testing/export", selector="#blob")
    assert answer.ok, answer
    (stored,) = answer["files"]
    assert (stored["filename"], stored["size"], stored["content_type"]) == ("export.txt", 17, "text/plain")
    assert stored["url"].startswith("/api/v1/media/") and len(stored["sha256"]) == 64
    nothing = call("testing/export", selector="#none", timeout_ms=200)
    assert (nothing.status, nothing["error"]) == (408, "No download started within 200 ms.")
