"""Parameters are strict (issue 39, item 5): a parameter an action does not
declare answers 400 naming it, in a body or a query string, on a web action,
a primitive and a demo action alike, and nothing runs; a family that
declares it takes others gets them. A JSON body that names a key twice, an
integer sent as `1e2`, `100.0` or `true`, full-width digits in a query
integer, an X-Debug value spelled otherwise than documented and a request
with more headers than the worker takes all answer 400 with the envelope.

On a real worker (a real Chromium, the demo site it serves) where a call
runs; in process (pytest-django) for the parsing rules alone."""

from __future__ import annotations

import json

import pytest
from django.test import RequestFactory

from core.api import ApiError, read_json_object
from harness.worker import WorkerProcess
from plugins.framework import find_action
from tests.conftest import TEST_PLUGINS, worker_env
from tests.test_head_bound import exchange, head, parsed

OPEN_FAMILY = "tests.support.open_plugins"


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    """The suite's worker, with a family that takes extra parameters besides."""
    env = worker_env(PENELOPE_PLUGINS=f"{TEST_PLUGINS},{OPEN_FAMILY}")
    running = WorkerProcess(tmp_path_factory.mktemp("store"), env=env).start()
    yield running
    running.stop()


def demo(worker: WorkerProcess, handle: str) -> str:
    return f"{worker.base_url}/demo/{handle}/"


def jobs_held(api) -> int:
    return len(api.get("/jobs").json()["jobs"])


# --- unknown parameters, on a real worker ------------------------------------------------

WEB_TEXT_TAKES = "headers, user_agent, viewport, block, wait_for, selector, all, timeout_ms"


def test_web_text_with_a_url_answers_400_instead_of_reading_the_page_that_is_open(api, worker):
    """The scraper's trap of the issue: it thinks it opened the URL, and got
    another page's text with 200."""
    assert api.post("/main/plugin/web/open", json={"url": demo(worker, "alice")}).status_code == 200
    refused = api.post("/main/plugin/web/text", json={"selector": "h1", "url": demo(worker, "bob")})
    assert refused.status_code == 400, refused.text
    assert refused.json() == {
        "success": False,
        "error": f"Unknown parameter 'url' for web/text, which takes {WEB_TEXT_TAKES}.",
        "page_id": "main",
    }
    by_query = api.get("/main/plugin/web/text", params={"selector": "h1", "url": demo(worker, "bob")})
    assert by_query.status_code == 400 and by_query.json()["error"] == refused.json()["error"]
    # Declared parameters alone still read the page that is open.
    assert api.get("/main/plugin/web/text", params={"selector": "h1"}).json()["text"] == "Alice Lopez"


@pytest.mark.parametrize(
    ("route", "body", "unknown", "declared"),
    [
        ("plugin/web/open", {"url": "{bob}", "colour": "red"}, "colour", "which takes"),
        ("plugin/demo/open-account", {"handle": "bob", "hanlde": "bob"}, "hanlde", "which takes handle."),
        ("primitive/goto", {"url": "{bob}", "wait": "load"}, "wait", "which takes timeout_ms, url, wait_until."),
        ("primitive/content", {"full": True}, "full", "which takes no parameters."),
        ("plugin/web/open", {"url": "{bob}", "wait_for": {"selector": "h1", "timout_ms": 5}}, "wait_for.timout_ms",
         ": 'wait_for' takes selector, state, function, timeout_ms."),
    ],
)
def test_an_undeclared_body_field_answers_400_naming_it_and_nothing_runs(api, worker, route, body, unknown, declared):
    assert api.post("/main/plugin/web/open", json={"url": demo(worker, "alice")}).status_code == 200
    body = json.loads(json.dumps(body).replace("{bob}", demo(worker, "bob")))
    refused = api.post(f"/main/{route}", json=body)
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    name = route.removeprefix("plugin/")
    assert error.startswith(f"Unknown parameter '{unknown}' for {name}") and declared in error, error
    # Nothing ran: the page is still on alice's profile, and free.
    page = api.get("/main").json()
    assert page["url"] == demo(worker, "alice") and page["busy"] is False, page


@pytest.mark.parametrize(
    ("route", "query", "unknown"),
    [
        ("web/open", {"url": "{bob}", "colour": "red"}, "colour"),
        ("demo/open-account", {"handle": "bob", "limit": "5"}, "limit"),
        ("web/state", {"x": ""}, "x"),
    ],
)
def test_an_undeclared_query_parameter_answers_400_naming_it_and_starts_no_job(api, worker, route, query, unknown):
    assert api.post("/main/plugin/web/open", json={"url": demo(worker, "alice")}).status_code == 200
    query = {name: value.replace("{bob}", demo(worker, "bob")) for name, value in query.items()}
    held = jobs_held(api)
    for headers in ({}, {"X-Result-Ttl": "60"}):
        refused = api.get(f"/main/plugin/{route}", params=query, headers=headers)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"].startswith(f"Unknown parameter '{unknown}' for {route}"), refused.text
    assert jobs_held(api) == held
    assert api.get("/main").json()["url"] == demo(worker, "alice")


def test_several_unknown_parameters_are_all_named(api):
    body = {"selector": "h1", **{f"p{n}": n for n in range(7)}}
    error = api.post("/main/plugin/web/text", json=body).json()["error"]
    assert error == f"Unknown parameters 'p0', 'p1', 'p2', 'p3', 'p4' and 2 more for web/text, which takes {WEB_TEXT_TAKES}."


def test_a_query_parameter_given_twice_answers_400(api, worker):
    assert api.post("/main/plugin/web/open", json={"url": demo(worker, "alice")}).status_code == 200
    refused = api.get("/main/plugin/web/text?selector=h1&selector=body")
    assert refused.status_code == 400
    assert refused.json()["error"] == "Parameter 'selector' is given 2 times in the query string; give it once."


def test_a_family_that_takes_extra_parameters_gets_them(api):
    by_body = api.post("/main/plugin/open/echo", json={"count": 2, "colour": "red", "nested": {"a": [1]}})
    assert by_body.status_code == 200, by_body.text
    assert by_body.json()["params"] == {"count": 2, "colour": "red", "nested": {"a": [1]}}
    by_query = api.get("/main/plugin/open/echo", params={"colour": "red"})
    assert by_query.json()["params"] == {"count": 1, "colour": "red"}  # as sent: a query's values are strings
    # Its declared integer is still held to whole numbers.
    assert api.post("/main/plugin/open/echo", content=b'{"count": 1e2}').status_code == 400
    # An action of the family may say otherwise.
    strict = api.post("/main/plugin/open/strict", json={"count": 2, "colour": "red"})
    assert strict.status_code == 400
    assert strict.json()["error"] == "Unknown parameter 'colour' for open/strict, which takes count."


def test_the_document_closes_the_objects_of_actions_that_refuse_extras(api):
    schemas = api.get("/schema").json()["components"]["schemas"]
    text = schemas["web.text.params"]
    assert text["additionalProperties"] is False
    assert text["properties"]["wait_for"]["additionalProperties"] is False
    assert schemas["web.collect.params"]["properties"]["fields"]["additionalProperties"]["additionalProperties"] is False
    assert schemas["primitive.content.params"]["additionalProperties"] is False
    assert schemas["demo.open-account.params"]["additionalProperties"] is False
    assert "additionalProperties" not in schemas["open.echo.params"]
    assert schemas["open.strict.params"]["additionalProperties"] is False


# --- duplicate keys, integers, headers, on a real worker ---------------------------------


def test_a_json_body_naming_a_key_twice_answers_400_and_starts_nothing(api):
    held = jobs_held(api)
    for headers in ({}, {"X-Result-Ttl": "60"}):
        refused = api.post("/main/plugin/demo/open-account", content=b'{"handle":"ghost","handle":"alice"}', headers=headers)
        assert refused.status_code == 400, refused.text
        assert refused.json() == {
            "success": False,
            "error": "The request body names 'handle' twice in one object; send each key once.",
            "page_id": "main",
        }
    assert jobs_held(api) == held
    nested = api.post("/main/plugin/web/text", content=b'{"selector":"h1","wait_for":{"selector":"a","selector":"b"}}')
    assert nested.status_code == 400 and "'selector' twice" in nested.json()["error"]


@pytest.mark.parametrize("sent", [b"1e2", b"100.0", b"true"])
def test_an_integer_parameter_sent_as_another_json_value_answers_400(api, sent):
    refused = api.post("/main/primitive/scroll", content=b'{"dy": ' + sent + b"}")
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"].startswith("Invalid parameter 'dy': a whole number is required")
    assert api.post("/main/primitive/scroll", content=b'{"dy": 100}').status_code == 200


@pytest.mark.parametrize("sent", ["\uff11\uff10\uff10", "100.0", "1_000", "1e3"])
def test_a_query_integer_in_other_than_ascii_digits_answers_400(api, sent):
    refused = api.get("/main/plugin/web/text", params={"selector": "html", "timeout_ms": sent})
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"] == (
        "Invalid parameter 'timeout_ms': a whole number is required, in the ASCII digits 0-9 (a minus sign first at most)."
    )
    assert api.get("/main/plugin/web/text", params={"selector": "html", "timeout_ms": "100"}).status_code == 200


def test_x_debug_is_spelled_as_documented(api):
    for spelled in ("ALWAYS", "On-Failure", "Off"):
        refused = api.post("/main/plugin/web/state", headers={"X-Debug": spelled})
        assert refused.status_code == 400, spelled
        assert refused.json()["error"] == "X-Debug must be one of off, on-failure, always."
        primitive = api.post("/main/primitive/content", headers={"X-Debug": spelled})
        assert primitive.status_code == 400 and primitive.json()["error"].startswith("X-Debug must be one of")
    assert api.post("/main/plugin/web/state", headers={"X-Debug": "off"}).status_code == 200


def test_more_headers_than_the_worker_takes_answer_the_envelope(worker):
    # Host is one header: 499 more make Twisted's 500.
    within = exchange(worker.port, head("/api/v1/health", *(f"X-H{n}: v" for n in range(499))))
    assert parsed(within)[0] == 200
    for path, page_id in (("/api/v1/health", None), ("/api/v1/main/plugin/web/state", "main")):
        answer = exchange(worker.port, head(path, *(f"X-H{n}: v" for n in range(500))))
        status, headers, body = parsed(answer)
        assert status == 400 and headers["content-type"] == "application/json", answer[:300]
        assert body == {
            "success": False,
            "error": "The request has more than 500 headers, more than the worker accepts; send fewer.",
            "page_id": page_id,
        }


# --- the parsing rules, in process --------------------------------------------------------


def test_whole_numbers_are_json_integers_or_ascii_digits():
    from core.numbers import whole_number_problem

    for good in (0, 7, -3, 10**20, "42", "-1", "007"):
        assert whole_number_problem(good) is None, good
    for bad in (1e2, 100.0, True, False, "\uff11", "\u0661", "1_000", " 7", "7 ", "+7", "1e3", "", "1" * 51):
        assert whole_number_problem(bad) is not None, bad


def test_the_body_parser_refuses_a_key_named_twice_at_any_depth():
    factory = RequestFactory()

    def read(body: bytes) -> dict:
        return read_json_object(factory.post("/api/v1/x", data=body, content_type="application/json"))

    assert read(b'{"a": {"b": 1}, "c": [{"b": 2}, {"b": 3}]}') == {"a": {"b": 1}, "c": [{"b": 2}, {"b": 3}]}
    for body, name in ((b'{"a":1,"a":1}', "a"), (b'{"a":{"b":1,"b":2}}', "b"), (b'[{"x":1}, {"y":1,"y":2}]', "y")):
        with pytest.raises(ApiError) as refused:
            read(body)
        assert refused.value.status == 400 and f"'{name}' twice" in str(refused.value), body


def test_every_built_in_action_refuses_what_it_does_not_declare():
    """The check is the framework's: every action of `web`, `demo` and the
    primitives gets it, whatever its serializer."""
    from plugins.framework import families
    from plugins.primitives import primitives

    actions = [*families()["web"].actions.values(), *families()["demo"].actions.values(), *primitives.actions.values()]
    for action in actions:
        with pytest.raises(ApiError) as refused:
            action.validate({"not_a_parameter": "1"})
        assert refused.value.status == 400 and "'not_a_parameter'" in str(refused.value), action.route
    assert find_action("web", "cookies") is not None
    with pytest.raises(ApiError) as nested:
        find_action("web", "cookies").validate({"op": "set", "cookies": [{"name": "a", "value": "b", "url": "http://a.b/", "x": 1}]})
    assert str(nested.value).startswith("Unknown parameter 'cookies.0.x' for web/cookies: 'cookies.0' takes name, value")


KEY = "strict-params-test-key-0123456789abcdef"


@pytest.fixture
def key(settings):
    settings.PENELOPE_KEY = KEY
    settings.PENELOPE_READ_KEYS = []


@pytest.mark.django_db(transaction=True)
async def test_a_schedule_refuses_parameters_its_action_does_not_declare(key, async_client):
    """A schedule's parameters are checked when it is made, as each fire checks them."""
    body = {"name": "s1", "cron": "0 * * * *", "page_id": "main", "plugin": "demo/open-account", "params": {"handle": "alice", "limit": 5},
            "result_ttl": 60}  # fmt: skip
    response = await async_client.post(
        "/api/v1/schedules", data=json.dumps(body), content_type="application/json", AUTHORIZATION=f"Bearer {KEY}"
    )
    assert response.status_code == 400, response.content
    assert response.json()["error"] == (
        "Invalid parameter 'params': Unknown parameter 'limit' for demo/open-account, which takes handle."
    )


@pytest.mark.django_db(transaction=True)
async def test_the_job_list_limit_is_ascii_digits(key, async_client):
    refused = await async_client.get("/api/v1/jobs", {"limit": "\uff15"}, AUTHORIZATION=f"Bearer {KEY}")
    assert refused.status_code == 400 and refused.json()["error"].startswith("Invalid parameter 'limit': a whole number")
    assert (await async_client.get("/api/v1/jobs", {"limit": "5"}, AUTHORIZATION=f"Bearer {KEY}")).status_code == 200
