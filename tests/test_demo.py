"""The bundled demo site and the `demo` family, against a real worker.

The site's accounts are computed from their handles (`demo_site.accounts`), so
the tests predict every profile and following list from that module and check
that the pages, and the plugin reading them through Chromium, show exactly it.
"""

from __future__ import annotations

import re

import httpx
import pytest

from demo_site import accounts

FOLLOWING_ITEM = re.compile(r'<li class="following" data-handle="([^"]+)"')


def demo_get(worker, path: str, **params) -> httpx.Response:
    """A plain GET on the demo site: no key, like a visitor's browser."""
    return httpx.get(f"{worker.base_url}/demo/{path}", params=params, timeout=30)


def small_account(most: int) -> accounts.Account:
    """An account that follows at most `most` others, found by its handle."""
    for number in range(100_000):
        found = accounts.account(f"user{number}")
        if found and found.following <= most:
            return found
    raise AssertionError(f"no demo account follows {most} or fewer")


def error_of(response: httpx.Response, status: int, page_id: str | None = "main") -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body == {"success": False, "error": body["error"], "page_id": page_id}
    return body["error"]


# --- the site --------------------------------------------------------------------


def test_accounts_are_computed_from_their_handles():
    alice = accounts.account("alice")
    assert alice == accounts.account("alice")
    assert accounts.MIN_FOLLOWING <= alice.following <= accounts.MAX_FOLLOWING
    assert accounts.account("ghost") is None
    assert accounts.account("Alice") is None and accounts.account("..") is None
    first_page = accounts.following(alice, 0, 10)
    assert len(first_page) == 10 and len(set(first_page)) == 10
    assert accounts.following(alice, 5, 10)[:5] == first_page[5:]
    everyone = accounts.following(alice, 0, accounts.MAX_FOLLOWING)
    assert len(everyone) == alice.following == len(set(everyone))


def test_index_links_profiles_without_a_key(worker):
    response = demo_get(worker, "")
    assert response.status_code == 200
    assert 'href="/demo/alice/"' in response.text
    assert 'href="/demo/ghost/"' in response.text


def test_profile_pages_are_deterministic(worker):
    alice = accounts.account("alice")
    first, second = demo_get(worker, "alice/"), demo_get(worker, "alice/")
    assert first.status_code == 200 and first.text == second.text
    assert alice.name in first.text
    assert f'class="followers" data-count="{alice.followers}"' in first.text
    assert f'class="following" data-count="{alice.following}"' in first.text


def test_missing_and_invalid_handles_answer_404(worker):
    ghost = demo_get(worker, "ghost/")
    assert ghost.status_code == 404 and "@ghost does not exist" in ghost.text
    for bad in ("Alice/", "no-dashes/", "a" * 31 + "/", "ghost/following/"):
        assert demo_get(worker, bad).status_code == 404, bad
    assert demo_get(worker, "ghost/following.json").status_code == 404


def test_following_list_renders_ten_then_serves_the_rest_as_json(worker):
    alice = accounts.account("alice")
    page = demo_get(worker, "alice/following/", delay_ms=50)
    assert page.status_code == 200
    assert FOLLOWING_ITEM.findall(page.text) == accounts.following(alice, 0, 10)
    assert f'data-total="{alice.following}"' in page.text and 'data-delay-ms="50"' in page.text

    batch = demo_get(worker, "alice/following.json", offset=10, count=10).json()
    assert batch["total"] == alice.following and batch["next_offset"] == 20
    assert [entry["handle"] for entry in batch["entries"]] == accounts.following(alice, 10, 10)

    tail = demo_get(worker, "alice/following.json", offset=alice.following - 3, count=10).json()
    assert len(tail["entries"]) == 3 and tail["next_offset"] is None
    assert demo_get(worker, "alice/following.json", count=0).status_code == 400
    assert demo_get(worker, "alice/following/", delay_ms="soon").status_code == 400


def test_the_demo_setting_turns_the_site_off(client, settings):
    assert client.get("/demo/alice/").status_code == 200
    settings.PENELOPE_DEMO = False
    for path in ("/demo/", "/demo/alice/", "/demo/alice/following/", "/demo/alice/following.json"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert "Alice" not in response.content.decode()


# --- the demo family, end to end ------------------------------------------------


def test_open_account(api):
    alice = accounts.account("alice")
    response = api.get("/main/plugin/demo/open-account", params={"handle": "alice"})
    assert response.status_code == 200, response.text
    assert response.json() == {
        "success": True,
        "page_id": "main",
        "handle": "alice",
        "name": alice.name,
        "followers": alice.followers,
        "following": alice.following,
    }


def test_open_account_of_a_missing_or_invalid_handle(api):
    response = api.get("/main/plugin/demo/open-account", params={"handle": "ghost"})
    assert error_of(response, 404) == "Account ghost does not exist."
    response = api.get("/main/plugin/demo/open-account", params={"handle": "Not A Handle"})
    assert "handle" in error_of(response, 400)


def test_get_following_stops_at_the_limit_and_state_reports_the_list(api):
    alice = accounts.account("alice")
    response = api.post("/main/plugin/demo/get-following", json={"handle": "alice", "limit": 25, "pause_ms": 50})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["following"] == accounts.following(alice, 0, 25)
    assert body["count"] == 25 and body["handle"] == "alice" and body["total"] == alice.following

    state = api.get("/main/plugin/demo/state").json()
    assert state["success"] is True
    assert state["view"] == "following" and state["on_following_list"] is True
    assert state["handle"] == "alice" and state["total"] == alice.following
    # Three batches of ten were on the page when the plugin had its 25.
    assert state["loaded"] == 30 and state["complete"] is False


def test_get_following_returns_the_whole_list_when_the_limit_is_larger(api):
    small = small_account(most=40)
    response = api.get(
        "/main/plugin/demo/get-following", params={"handle": small.handle, "limit": 10_000, "pause_ms": 50}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["following"] == accounts.following(small, 0, small.following)
    assert body["count"] == small.following

    state = api.get("/main/plugin/demo/state").json()
    assert state["loaded"] == small.following and state["complete"] is True


def test_get_following_of_a_missing_account(api):
    response = api.get("/main/plugin/demo/get-following", params={"handle": "ghost", "pause_ms": 50})
    assert error_of(response, 404) == "Account ghost does not exist."


def test_state_of_a_profile_and_of_a_page_off_the_site(worker, api):
    assert api.get("/main/plugin/demo/open-account", params={"handle": "bob"}).status_code == 200
    state = api.get("/main/plugin/demo/state").json()
    assert state["view"] == "profile" and state["handle"] == "bob"
    assert state["on_following_list"] is False and state["loaded"] == 0

    elsewhere = api.post("/main/plugin/web/open", json={"url": worker.base_url + "/api/v1/health"})
    assert elsewhere.status_code == 200, elsewhere.text
    state = api.get("/main/plugin/demo/state").json()
    assert state["handle"] is None and state["view"] is None and state["on_following_list"] is False


@pytest.mark.parametrize("params", [{"handle": "alice", "limit": 0}, {"handle": "alice", "pause_ms": -1}])
def test_get_following_checks_its_parameters(api, params):
    response = api.post("/main/plugin/demo/get-following", json=params)
    error_of(response, 400)
