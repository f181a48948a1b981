"""The web family on sites the tests serve themselves: waits for late content,
evaluate and content, structured and paged collect, request controls that
are undone after the call, captured fetches, the persona's cookies and
storage, and require_ok. Each answer is checked against what the site
serves; a few run as jobs too, and refused input changes nothing. More of
the web family's tests, written with the plugin authors' kit, are in
test_web_family_kit.py."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from harness.worker import wait_until


def post(api: httpx.Client, action: str, **params) -> httpx.Response:
    return api.post(f"/main/plugin/web/{action}", json=params)


def call(api: httpx.Client, action: str, **params) -> dict:
    response = post(api, action, **params)
    assert response.status_code == 200, response.text
    return response.json()


def refused(api: httpx.Client, action: str, status: int, **params) -> str:
    response = post(api, action, **params)
    assert response.status_code == status, response.text
    body = response.json()
    assert body["success"] is False and body["page_id"] == "main"
    return body["error"]


def value(api: httpx.Client, expression: str):
    return call(api, "evaluate", expression=expression)["value"]


def as_job(api: httpx.Client, action: str, **params) -> dict:
    """Run the action as a polling job and answer its result once it ends."""
    response = api.post(f"/main/plugin/web/{action}", json=params, headers={"X-Result-Ttl": "60"})
    assert response.status_code == 202, response.text
    job_id = response.json()["job_id"]
    job = wait_until(
        lambda: (body := api.get(f"/jobs/{job_id}", params={"wait": 30}).json())["state"] != "running" and body,
        what=f"job {job_id} to end",
    )
    assert job["state"] == "done", job
    return job["result"]


def late(site, count=25, delay_ms=400) -> str:
    return f"{site.url}/late.html?count={count}&delay_ms={delay_ms}"


WAIT_FOR_ALL = {"function": "window.resultsShown > 0", "timeout_ms": 10_000}


# --- waits --------------------------------------------------------------------------------


def test_open_without_a_wait_reads_before_late_results_and_with_one_after(api, site):
    assert call(api, "open", url=late(site, delay_ms=3000))["title"] == "Late results"
    assert call(api, "text", selector="#status")["text"] == "searching"
    call(api, "open", url=late(site), wait_for={"selector": ".hit", "state": "attached", "timeout_ms": 10_000})
    assert len(call(api, "text", selector=".hit", all=True)["texts"]) == 25
    assert call(api, "text", selector="#status")["text"] == "25 results"


@pytest.mark.parametrize(
    "action, params, read",
    [
        ("text", {"selector": "#status"}, lambda a: a["text"] == "25 results"),
        ("content", {"selector": "#results"}, lambda a: a["html"].count("class=\"hit\"") == 25),
        ("evaluate", {"expression": "document.querySelectorAll('.hit').length"}, lambda a: a["value"] == 25),
        ("collect", {"item_selector": ".hit", "scroll_pause_ms": 0}, lambda a: a["count"] == 25),
    ],
)
def test_every_reading_action_waits_before_it_reads(api, site, action, params, read):
    call(api, "open", url=late(site))
    answer = call(api, action, wait_for=WAIT_FOR_ALL, **params)
    assert read(answer), answer


def test_web_wait_waits_for_a_selector_a_function_and_a_promise(api, site):
    call(api, "open", url=late(site))
    assert call(api, "wait", selector=".hit", state="attached", timeout_ms=10_000)["selector"] == ".hit"
    call(api, "open", url=late(site))
    answer = call(api, "wait", function="document.querySelectorAll('.hit').length === 25", timeout_ms=10_000)
    assert answer["function"].startswith("document") and value(api, "window.resultsShown") == 25
    promise = "new Promise(resolve => setTimeout(() => resolve(true), 50))"
    assert call(api, "wait", function=promise, timeout_ms=5_000)["url"].startswith(site.url)


@pytest.mark.parametrize(
    "wait_for",
    [
        {},
        {"selector": "h1", "function": "true"},
        {"function": "true", "state": "visible"},
        {"selector": "h1", "state": "shown"},
        {"selector": "h1", "timeout_ms": -1},
        "h1",
    ],
)
def test_a_bad_wait_for_answers_400_and_reads_nothing(api, site, wait_for):
    call(api, "open", url=site.url + "/index.html")
    error = refused(api, "text", 400, selector="h1", wait_for=wait_for)
    assert "wait_for" in error


def test_a_wait_for_function_that_throws_answers_400(api, site):
    call(api, "open", url=site.url + "/index.html")
    error = refused(api, "wait", 400, function="nothingHere.at.all", timeout_ms=1000)
    assert error.startswith("The wait_for function failed:") and "nothingHere" in error


# --- evaluate and content -----------------------------------------------------------------


# --- collect ------------------------------------------------------------------------------


def list_url(site, page=1, pages=3, per=4) -> str:
    return f"{site.url}/list?page={page}&pages={pages}&per={per}"


ROW_FIELDS = {"title": {"selector": "a"}, "link": {"selector": "a", "attribute": "href"}, "price": {"selector": ".price"}}


def rows(site, numbers) -> list[dict]:
    return [{"title": f"Item {n}", "link": f"{site.url}/item/{n}", "price": str(n * 10)} for n in numbers]


def test_fields_collect_one_object_per_item_with_absolute_links(api, site):
    call(api, "open", url=list_url(site))
    answer = call(api, "collect", item_selector=".row", fields=ROW_FIELDS, scroll_pause_ms=0)
    assert answer["items"] == rows(site, range(4))
    assert (answer["count"], answer["pages"], answer["stopped_because"]) == (4, 1, "end")
    raw = call(api, "collect", item_selector=".row", fields=ROW_FIELDS, raw_urls=True, scroll_pause_ms=0)
    assert [item["link"] for item in raw["items"]] == [f"/item/{n}" for n in range(4)]
    plain = call(api, "collect", item_selector=".row a", attribute="href", scroll_pause_ms=0)
    assert plain["items"] == [f"/item/{n}" for n in range(4)]  # the plain form answers as before
    absolute = call(api, "collect", item_selector=".row a", attribute="href", raw_urls=False, scroll_pause_ms=0)
    assert absolute["items"] == [f"{site.url}/item/{n}" for n in range(4)]


def test_a_field_that_matches_nothing_is_null(api, site):
    call(api, "open", url=list_url(site))
    answer = call(api, "collect", item_selector=".row", fields={"title": {"selector": "a"}, "note": {"selector": ".none"}},
                  scroll_pause_ms=0)  # fmt: skip
    assert answer["items"][0] == {"title": "Item 0", "note": None}


def test_dedupe_is_off_for_fields_and_on_for_the_plain_form(api, site):
    call(api, "open", url=site.url + "/index.html")
    value(api, "document.querySelector('ul').insertAdjacentHTML('beforeend', '<li class=item>one</li>')")
    assert call(api, "collect", item_selector=".item", scroll_pause_ms=0)["items"] == ["one", "two", "three"]
    fields = call(api, "collect", item_selector=".item", fields={"text": {}}, scroll_pause_ms=0)["items"]
    assert [item["text"] for item in fields] == ["one", "two", "three", "one"]
    deduped = call(api, "collect", item_selector=".item", fields={"text": {}}, dedupe=True, scroll_pause_ms=0)["items"]
    assert [item["text"] for item in deduped] == ["one", "two", "three"]
    kept = call(api, "collect", item_selector=".item", dedupe=False, scroll_pause_ms=0)["items"]
    assert kept == ["one", "two", "three", "one"]


def test_next_by_selector_follows_links_to_the_last_page(api, site):
    call(api, "open", url=list_url(site, pages=3))
    answer = call(api, "collect", item_selector=".row", fields=ROW_FIELDS, next={"selector": "a.next"}, scroll_pause_ms=0)
    assert answer["items"] == rows(site, range(12))
    assert (answer["pages"], answer["stopped_because"]) == (3, "end")
    assert call(api, "state")["url"] == list_url(site, page=3)


def test_next_stops_at_max_pages_and_at_the_limit(api, site):
    call(api, "open", url=list_url(site, pages=5))
    answer = call(api, "collect", item_selector=".row a", next={"selector": "a.next"}, max_pages=2, scroll_pause_ms=0)
    assert answer["items"] == [f"Item {n}" for n in range(8)]
    assert (answer["pages"], answer["stopped_because"]) == (2, "max_pages")
    call(api, "open", url=list_url(site, pages=5))
    answer = call(api, "collect", item_selector=".row a", next={"selector": "a.next"}, limit=6, scroll_pause_ms=0)
    assert (answer["items"], answer["pages"], answer["stopped_because"]) == ([f"Item {n}" for n in range(6)], 2, "limit")


def test_next_by_url_pattern_stops_at_the_first_missing_page(api, site):
    call(api, "open", url=list_url(site, pages=3, per=2))
    pattern = f"{site.url}/list?page={{page}}&pages=3&per=2"
    answer = call(api, "collect", item_selector=".row a", next={"url": pattern}, max_pages=10, scroll_pause_ms=0)
    assert answer["items"] == [f"Item {n}" for n in range(6)]
    assert (answer["pages"], answer["stopped_because"]) == (3, "end")


def test_next_by_a_load_more_button_reads_only_the_added_rows(api, site):
    call(api, "open", url=f"{site.url}/pager.html?pages=3&per=3&mode=append")
    answer = call(api, "collect", item_selector=".row", dedupe=False, next={"selector": "#more"}, scroll_pause_ms=0)
    assert answer["items"] == [f"Row {n}" for n in range(9)]
    assert (answer["pages"], answer["stopped_because"]) == (3, "end")


def test_a_next_click_that_changes_nothing_ends_the_call_with_the_items_so_far(api, site):
    call(api, "open", url=site.url + "/index.html")
    answer = call(api, "collect", item_selector=".item", next={"selector": "h1"}, timeout_ms=300, scroll_pause_ms=0)
    assert (answer["items"], answer["pages"], answer["stopped_because"]) == (["one", "two", "three"], 1, "next_failed")
    assert answer["next_error"] == "Clicked 'h1' for the next page; the items did not change within 300 ms."


def test_a_next_page_that_fails_to_load_ends_the_call_with_the_items_so_far(api, site):
    call(api, "open", url=list_url(site, pages=3, per=2))
    pattern = f"{site.url}/slow?ms=3000&page={{page}}"
    answer = call(api, "collect", item_selector=".row a", next={"url": pattern}, timeout_ms=200, scroll_pause_ms=0)
    assert (answer["items"], answer["stopped_because"]) == (["Item 0", "Item 1"], "next_failed")
    assert answer["next_error"].startswith("Turning to the next page failed: Page.goto: Timeout 200ms exceeded")


def test_collect_as_a_job_reports_progress_per_page_and_ends_with_the_items(api, site):
    call(api, "open", url=list_url(site, pages=3))
    params = {"item_selector": ".row", "fields": ROW_FIELDS, "next": {"selector": "a.next"}, "scroll_pause_ms": 0}
    response = api.post("/main/plugin/web/collect", json=params, headers={"X-Result-Ttl": "60"})
    job_id = response.json()["job_id"]
    job = wait_until(lambda: (b := api.get(f"/jobs/{job_id}", params={"wait": 30}).json())["state"] == "done" and b)
    assert job["result"]["items"] == rows(site, range(12))
    assert job["progress"]["done"] == 12 and job["progress"]["message"].startswith("12 items, page 3")


@pytest.mark.parametrize(
    "params, field",
    [
        ({"fields": {"a": {"selector": "a"}}, "attribute": "href"}, "fields or attribute"),
        ({"max_pages": 3}, "max_pages goes with next"),
        ({"next": {"selector": "a", "url": "http://x/{page}"}}, "either selector or url"),
        ({"next": {"url": "http://127.0.0.1/list"}}, "{page}"),
        ({"next": {"url": "not a url {page}"}}, "next"),
        ({"fields": {}}, "fields"),
        ({"fields": {"a": {"selector": ""}}}, "fields.a.selector"),
        ({"capture": ["**/{a,b"]}, "capture"),
    ],
)
def test_bad_collect_parameters_answer_400_and_read_nothing(api, site, params, field):
    call(api, "open", url=list_url(site))
    assert field in refused(api, "collect", 400, item_selector=".row", **params)
    assert call(api, "state")["url"] == list_url(site)


def test_a_bad_field_selector_answers_400(api, site):
    call(api, "open", url=list_url(site))
    error = refused(api, "collect", 400, item_selector=".row", fields={"a": {"selector": "a[["}}, scroll_pause_ms=0)
    assert "not a valid selector" in error


# --- request controls ---------------------------------------------------------------------


def echoed(api, site, **controls) -> dict:
    call(api, "open", url=site.url + "/echo", **controls)
    return json.loads(call(api, "text", selector="#headers")["text"])


def test_headers_and_user_agent_apply_to_the_call_and_are_undone_after(api, site):
    plain = echoed(api, site)
    sent = echoed(api, site, headers={"X-Probe": "probe 1", "Accept-Language": "de"}, user_agent="PenelopeProbe/1.0")
    assert sent["x-probe"] == "probe 1"
    assert sent["accept-language"] == "de" and sent["user-agent"] == "PenelopeProbe/1.0"
    after = echoed(api, site)
    assert "x-probe" not in after and after["user-agent"] == plain["user-agent"] != "PenelopeProbe/1.0"
    assert after["accept-language"] == plain["accept-language"]
    assert value(api, "navigator.userAgent") == plain["user-agent"]


def test_a_viewport_applies_to_the_call_and_is_undone_after(api, site):
    call(api, "open", url=site.url + "/index.html")
    before = value(api, "[innerWidth, innerHeight]")
    inside = call(api, "evaluate", expression="[innerWidth, innerHeight]", viewport={"width": 500, "height": 400})
    assert inside["value"] == [500, 400]
    assert value(api, "[innerWidth, innerHeight]") == before != [500, 400]


ALL_CONTROLS = {"headers": {"X-Probe": "1"}, "user_agent": "Gone/1", "viewport": {"width": 500, "height": 400},
                "block": ["image", "stylesheet"]}  # fmt: skip


def assert_page_as_before(api, site, plain: dict, viewport: list) -> None:
    after = echoed(api, site)
    assert "x-probe" not in after and after["user-agent"] == plain["user-agent"]
    assert value(api, "[innerWidth, innerHeight]") == viewport
    mark = len(site.server.requests)
    call(api, "open", url=f"{site.url}/assets.html")
    assert {"image", "stylesheet"} <= {path.partition("as=")[2] for path in site.server.requests[mark:] if "as=" in path}


def test_controls_are_undone_when_the_call_fails(api, site):
    plain, viewport = echoed(api, site), value(api, "[innerWidth, innerHeight]")
    refused(api, "open", 408, url=site.url + "/slow?ms=2000", timeout_ms=100, **ALL_CONTROLS)
    assert_page_as_before(api, site, plain, viewport)


def test_controls_are_undone_when_a_job_is_cancelled_mid_call(api, site):
    plain, viewport = echoed(api, site), value(api, "[innerWidth, innerHeight]")
    params = {"function": "window.never === true", "timeout_ms": 60_000, **ALL_CONTROLS}
    response = api.post("/main/plugin/web/wait", json=params, headers={"X-Result-Ttl": "60"})
    job_id = response.json()["job_id"]
    wait_until(lambda: api.get("/main").json()["job_id"] == job_id, what="the job on the page")
    cancelled = api.post(f"/jobs/{job_id}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    assert_page_as_before(api, site, plain, viewport)


@pytest.mark.parametrize(
    "controls, field",
    [
        ({"headers": {"Bad Name": "x"}}, "headers"),
        ({"headers": {"X-A": "line\nbreak"}}, "headers"),
        ({"headers": ["X-A"]}, "headers"),
        ({"block": ["script"]}, "block"),
        ({"viewport": {"width": 0, "height": 100}}, "viewport"),
        ({"viewport": {"width": 100}}, "viewport"),
        ({"user_agent": ""}, "user_agent"),
        ({"user_agent": "two\nlines"}, "user_agent"),
        ({"headers": {"Host": "elsewhere.example"}}, "headers"),
    ],
)
def test_bad_request_controls_answer_400_and_do_not_navigate(api, site, controls, field):
    call(api, "open", url=site.url + "/index.html")
    assert field in refused(api, "open", 400, url=site.url + "/echo", **controls)
    assert call(api, "state")["url"] == site.url + "/index.html"


# --- capture ------------------------------------------------------------------------------


def test_open_captures_the_json_the_page_fetches(api, site):
    answer = call(api, "open", url=late(site, count=3, delay_ms=0), capture=["**/api/items*"],
                  wait_for=WAIT_FOR_ALL)  # fmt: skip
    assert answer["captured_dropped"] == 0
    [entry] = answer["captured"]
    assert entry["url"] == f"{site.url}/api/items?count=3&delay_ms=0"
    assert (entry["method"], entry["status"], entry["content_type"]) == ("GET", 200, "application/json")
    assert entry["json"] == {"count": 3, "items": [{"id": n, "title": f"Result {n}", "href": f"/item/{n}"} for n in range(3)]}


def once(fetches: str) -> str:
    """A wait_for function that starts the fetches on its first poll only and
    is truthy once the page has read all their bodies (a body the page never
    reads never finishes loading)."""
    read = f"Promise.all(({fetches}).map(p => p.then(r => r.arrayBuffer())))"
    return f"(window.kicked ||= {read}.then(() => window.fetched = true)) && window.fetched === true"


def test_capture_answers_text_inline_and_large_or_binary_bodies_as_files(api, worker, site):
    fetches = once("[fetch('/api/blob?kib=8'), fetch('/index.html')]")
    answer = call(api, "open", url=site.url + "/box.html", capture=["**/api/blob*", "**/index.html"],
                  wait_for={"function": fetches, "timeout_ms": 5000})  # fmt: skip
    by_url = {entry["url"].rsplit("/", 1)[-1]: entry for entry in answer["captured"]}
    assert by_url["index.html"]["text"].startswith("<!doctype html>")
    blob = by_url["blob?kib=8"]
    assert blob["size"] == 8 * 1024 and "text" not in blob and "json" not in blob
    download = api.get(worker.base_url + blob["media"]["url"])
    assert download.content == bytes(range(256)) * 32


def test_capture_keeps_at_most_its_limit_and_counts_the_rest(api, site):
    fetches = once("[1, 2, 3, 4].map(n => fetch('/api/items?count=' + n))")
    answer = call(api, "open", url=site.url + "/box.html", capture=["**/api/items*"], capture_limit=2,
                  wait_for={"function": fetches, "timeout_ms": 5000})  # fmt: skip
    assert len(answer["captured"]) == 2 and answer["captured_dropped"] == 2


def test_capture_answers_inline_no_more_than_its_total_and_the_rest_as_files(api, site):
    fetches = once("[1, 2, 3, 4].map(n => fetch('/api/items?count=' + n))")
    answer = call(api, "open", url=site.url + "/box.html", capture=["**/api/items*"], capture_inline_total=200,
                  wait_for={"function": fetches, "timeout_ms": 5000})  # fmt: skip
    captured = answer["captured"]
    assert len(captured) == 4 and all(entry["size"] > 60 for entry in captured)
    inline = [entry for entry in captured if "json" in entry]
    assert inline and sum(entry["size"] for entry in inline) <= 200
    assert all("media" in entry for entry in captured if "json" not in entry)
    assert sum(entry["size"] for entry in captured) > 200  # so some went to files


def test_collect_captures_across_its_pages(api, site):
    call(api, "open", url=list_url(site, pages=2))
    answer = call(api, "collect", item_selector=".row a", next={"selector": "a.next"}, capture=["**/list?*"], scroll_pause_ms=0)
    assert [entry["url"] for entry in answer["captured"]] == [list_url(site, page=2, pages=2)]
    assert "Item 4" in answer["captured"][0]["text"]


# --- the persona's cookies and storage ----------------------------------------------------


def test_a_cookie_by_domain_defaults_its_path_to_the_root(api, site):
    call(api, "cookies", op="clear")
    assert call(api, "cookies", op="set", cookies=[{"name": "d", "value": "1", "domain": "127.0.0.1"}])["set"] == 1
    assert [(c["name"], c["path"]) for c in call(api, "cookies", url=site.url + "/deep/page")["cookies"]] == [("d", "/")]
    call(api, "cookies", op="clear")


def test_cookies_set_list_and_clear(api, site):
    call(api, "cookies", op="clear")
    call(api, "open", url=site.url + "/set-cookie?name=flavour&value=oat")
    assert [(c["name"], c["value"]) for c in call(api, "cookies", url=site.url)["cookies"]] == [("flavour", "oat")]
    assert call(api, "cookies", op="set", cookies=[{"name": "token", "value": "t1", "url": site.url, "http_only": True}])["set"] == 1
    listed = {c["name"]: c for c in call(api, "cookies", url=site.url)["cookies"]}
    assert set(listed) == {"flavour", "token"} and listed["token"]["http_only"] is True
    assert listed["token"]["domain"] == "127.0.0.1" and listed["token"]["expires"] is None
    assert echoed(api, site)["cookie"] in ("flavour=oat; token=t1", "token=t1; flavour=oat")
    assert call(api, "cookies", op="clear", url=site.url, name="token")["cleared"] == 1
    assert [c["name"] for c in call(api, "cookies")["cookies"]] == ["flavour"]
    assert call(api, "cookies", op="clear")["cleared"] == 1
    assert call(api, "cookies")["cookies"] == []


@pytest.mark.parametrize(
    "params",
    [
        {"op": "set"},
        {"op": "list", "cookies": [{"name": "a", "value": "b", "url": "http://127.0.0.1/"}]},
        {"op": "set", "cookies": [{"name": "a", "value": "b"}]},
        {"op": "set", "cookies": [{"name": "a", "value": "b", "url": "http://x/", "domain": "x"}]},
        {"op": "eat"},
        {"op": "set", "cookies": [{"name": "a;b", "value": "v", "url": "http://127.0.0.1/"}]},
        {"op": "set", "cookies": [{"name": "a", "value": "v;w", "url": "http://127.0.0.1/"}]},
        {"op": "set", "cookies": [{"name": "a", "value": "v", "url": "http://127.0.0.1/", "expires": -5}]},
        {"op": "set", "cookies": [{"name": "a", "value": "v", "url": "http://127.0.0.1/", "same_site": "None"}]},
    ],
)
def test_bad_cookie_requests_answer_400_and_set_nothing(api, params):
    call(api, "cookies", op="clear")
    refused(api, "cookies", 400, **params)
    assert call(api, "cookies")["cookies"] == []


STORE_BOTH = "localStorage.setItem('k', 'v'); sessionStorage.setItem('s', 'v'); true"
READ_BOTH = "[localStorage.getItem('k'), sessionStorage.getItem('s')]"


def test_clear_storage_for_one_origin_leaves_the_others(api, site):
    other = site.url.replace("127.0.0.1", "localhost")
    for origin in (site.url, other):
        call(api, "open", url=origin + "/index.html")
        value(api, STORE_BOTH)
    assert call(api, "clear-storage", origin=site.url + "/anything")["origin"] == site.url
    assert value(api, READ_BOTH) == ["v", "v"]  # the page shows the other origin
    call(api, "open", url=site.url + "/index.html")
    assert value(api, READ_BOTH)[0] is None
    call(api, "open", url=other + "/index.html")
    assert value(api, READ_BOTH) == ["v", "v"]
    # Session storage is the tab's: another site's is not reachable from here, and the answer says so.
    assert call(api, "clear-storage", origin=site.url, types=["local_storage", "session_storage"])["cleared"] == ["local_storage"]
    assert value(api, READ_BOTH) == ["v", "v"]
    assert call(api, "clear-storage", types=["session_storage"])["cleared"] == ["session_storage"]
    assert value(api, READ_BOTH) == ["v", None]
    call(api, "clear-storage")
    assert value(api, READ_BOTH) == [None, None]


@pytest.mark.parametrize("params", [{"types": ["everything"]}, {"types": []}, {"origin": "not a url"}])
def test_bad_clear_storage_requests_answer_400_and_clear_nothing(api, site, params):
    call(api, "open", url=site.url + "/index.html")
    value(api, STORE_BOTH)
    refused(api, "clear-storage", 400, **params)
    assert value(api, READ_BOTH) == ["v", "v"]


# --- require_ok ---------------------------------------------------------------------------


def test_require_ok_turns_an_error_page_into_502_naming_the_status_and_url(api, site):
    assert call(api, "open", url=site.url + "/missing")["status"] == 404
    error = refused(api, "open", 502, url=site.url + "/missing", require_ok=True)
    assert error == f"The site answered 404 for {site.url}/missing."
    assert call(api, "open", url=site.url + "/index.html", require_ok=True)["status"] == 200


# --- as jobs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "action, params",
    [
        ("evaluate", {"expression": "document.querySelectorAll('.hit').length", "wait_for": WAIT_FOR_ALL}),
        ("content", {"selector": "#status", "wait_for": WAIT_FOR_ALL}),
        ("wait", WAIT_FOR_ALL),
        ("text", {"selector": "#status", "wait_for": WAIT_FOR_ALL, "user_agent": "JobAgent/1"}),
    ],
)
def test_the_new_actions_answer_the_same_as_jobs(api, site, action, params):
    call(api, "open", url=late(site))
    plain = call(api, action, **params)
    call(api, "open", url=late(site))
    result = as_job(api, action, **params)
    assert result == plain


def test_open_with_capture_and_require_ok_as_a_job(api, site):
    result = as_job(api, "open", url=late(site, count=2, delay_ms=0), capture=["**/api/items*"], wait_for=WAIT_FOR_ALL,
                    require_ok=True)  # fmt: skip
    assert result["success"] is True and result["captured"][0]["json"]["count"] == 2
    response = api.post("/main/plugin/web/open", json={"url": site.url + "/missing", "require_ok": True},
                        headers={"X-Result-Ttl": "60"})  # fmt: skip
    job_id = response.json()["job_id"]
    job = wait_until(lambda: (b := api.get(f"/jobs/{job_id}", params={"wait": 30}).json())["state"] != "running" and b)
    assert (job["state"], job["status"]) == ("done", 502)
    assert job["result"]["error"] == f"The site answered 404 for {site.url}/missing."


def test_a_job_with_bad_parameters_is_refused_and_nothing_starts(api, site):
    before = [job["job_id"] for job in api.get("/jobs").json()["jobs"]]
    response = api.post("/main/plugin/web/open", json={"url": site.url, "block": ["script"]}, headers={"X-Result-Ttl": "60"})
    assert response.status_code == 400 and "block" in response.json()["error"]
    assert [job["job_id"] for job in api.get("/jobs").json()["jobs"]] == before


def test_cookies_and_storage_stay_in_the_profile_across_a_restart(make_worker, site):
    worker = make_worker()
    expires = round(time.time()) + 30 * 86400  # Chromium keeps at most 400 days
    lasting = {"name": "lasting", "value": "yes", "url": site.url, "expires": expires}
    with worker.client() as api:
        assert call(api, "cookies", op="set", cookies=[lasting])["set"] == 1
        call(api, "open", url=site.url + "/index.html")
        value(api, "localStorage.setItem('kept', 'v'); true")
    worker.stop()
    worker.start()
    with worker.client() as api:
        [kept] = call(api, "cookies", url=site.url)["cookies"]
        assert (kept["name"], kept["value"], round(kept["expires"])) == ("lasting", "yes", expires)
        call(api, "open", url=site.url + "/index.html")
        assert value(api, "localStorage.getItem('kept')") == "v"
        call(api, "cookies", op="clear")
        call(api, "clear-storage")
    worker.stop()
    worker.start()
    with worker.client() as api:
        assert call(api, "cookies")["cookies"] == []
        call(api, "open", url=site.url + "/index.html")
        assert value(api, "localStorage.getItem('kept')") is None


def test_a_long_wait_for_ends_in_its_own_408_not_the_action_time_limit(make_worker, site):
    worker = make_worker(env={"ACTION_TIMEOUT_S": "0.5"})
    with worker.client() as api:
        call(api, "open", url=site.url + "/index.html")
        error = refused(api, "text", 408, selector="h1", wait_for={"selector": "#never", "timeout_ms": 1000})
        assert error == "Waited 1000 ms for '#never' to be visible; it did not happen."
        assert refused(api, "wait", 408, selector="#never", timeout_ms=1000).startswith("Waited 1000 ms")
