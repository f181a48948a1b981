"""Every constraint the worker enforces on a parameter is in its OpenAPI
document (issue 31), and a string's length is checked on what the client sent.

Each pattern the document gives is read with Python's `re` and held against
the worker's own answer for values on both sides of it: what the pattern
takes, the worker takes, and what it refuses, the worker refuses. A rule
OpenAPI 3.0 cannot state (one of two headers, `quality` only with jpeg,
`max_pages` only with `next`, an Idempotency-Key checked on job starts only)
is in the description of the parameter, and the worker answers as it says.
"""

from __future__ import annotations

import re

import httpx
import pytest
from rest_framework import serializers

from core.shapes import MAX_URL_LENGTH
from plugins.framework import families
from plugins.primitives import primitives

PLUGIN = "/api/v1/{page_id}/plugin/{family}/{action}"


@pytest.fixture(scope="module")
def document(worker) -> dict:
    with worker.client() as client:
        response = client.get("/schema")
    assert response.status_code == 200, response.text
    return response.json()


@pytest.fixture(scope="module")
def components(document: dict) -> dict:
    return document["components"]["schemas"]


def header(document: dict, name: str) -> dict:
    return next(p for p in document["paths"][PLUGIN]["get"]["parameters"] if p["name"] == name)


def matches(schema: dict, value: str) -> bool:
    """Whether a string conforms to a string schema's pattern and lengths, the
    pattern read as ECMA-262 reads it (its `$` is the end, never before a
    trailing newline as in Python)."""
    pattern = re.sub(r"\$$", r"\\Z", schema["pattern"])
    return (
        schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", len(value))
        and re.search(pattern, value) is not None
    )


def answer(api: httpx.Client, route: str, params: dict, **kwargs) -> httpx.Response:
    return api.post(f"/main/plugin/{route}", json=params, **kwargs)


def refused_for(response: httpx.Response, sentence: str) -> bool:
    return response.status_code == 400 and sentence in response.json()["error"]


# --- Idempotency-Key: its pattern on job starts, ignored on plain calls ----------------------


def test_idempotency_key_pattern_is_the_servers_on_job_starts(api: httpx.Client, document: dict):
    key = header(document, "Idempotency-Key")
    assert key["schema"]["maxLength"] == 255 and key["schema"]["minLength"] == 1
    assert "A plain call (no job header) ignores the header, whatever its value." in key["description"]
    for value, good in (
        ("k-1", True), ("order 66 / try 1", True), ("x" * 255, True), ("~!", True),
        ("x" * 256, False), ("caf\u00e9", False), ("tab\there", False), ("", False),
    ):  # fmt: skip
        assert matches(key["schema"], value) is good, value
        started = api.post("/main/plugin/web/state", headers={"Idempotency-Key": value.encode("latin-1"), "X-Result-Ttl": "5"})
        assert started.status_code == (202 if good else 400), (value, started.text)
        if good:  # the page runs one job at a time: wait for this one to end
            assert api.get(f"/jobs/{started.json()['job_id']}", params={"wait": "10"}).json()["state"] == "done"
    # The rule between headers, as the description says: a plain call runs whatever the key.
    assert api.post("/main/plugin/web/state", headers={"Idempotency-Key": "x" * 256}).status_code == 200


def test_callback_url_states_its_limit_and_its_form(api: httpx.Client, document: dict):
    callback = header(document, "X-Callback-Url")
    assert callback["schema"]["maxLength"] == 2048 and "at most 2048 characters" in callback["description"]
    assert "Not with X-Result-Ttl (both: 400)" in callback["description"]
    assert "Not with X-Callback-Url (both: 400)" in header(document, "X-Result-Ttl")["description"]
    for value in ("ftp://127.0.0.1:9/", "http://127.0.0.1:9/a b", "http://127.0.0.1:9/" + "x" * 2030):
        assert not matches(callback["schema"], value), value
        refused = api.post("/main/plugin/web/state", headers={"X-Callback-Url": value})
        assert refused_for(refused, "X-Callback-Url must be an absolute http or https URL with a host."), value
    both = api.post("/main/plugin/web/state", headers={"X-Callback-Url": "http://127.0.0.1:9/", "X-Result-Ttl": "5"})
    assert refused_for(both, "Send X-Callback-Url or X-Result-Ttl, not both")


# --- single parameters ---------------------------------------------------------------------


def test_demo_handle_pattern_is_the_servers(api: httpx.Client, components: dict):
    handle = components["demo.open-account.params"]["properties"]["handle"]
    for value, good in (
        ("alice", True), ("a.b_c9", True), ("_", True), ("x" * 30, True), (".a.", True),
        ("..", False), ("Alice", False), ("alice\n", False), (" alice", False), ("x" * 31, False), ("", False),
    ):  # fmt: skip
        assert matches(handle, value) is good, value
        response = api.post("/main/plugin/demo/open-account", json={"handle": value})
        # A good handle is looked up (404: no such account on the demo site), a bad one refused.
        assert (response.status_code != 400) is good, (value, response.text)


def test_clear_storage_types_need_one_item(api: httpx.Client, components: dict):
    types = components["web.clear-storage.params"]["properties"]["types"]
    assert types["minItems"] == 1 and "uniqueItems" not in types  # a type named twice counts once
    assert refused_for(answer(api, "web/clear-storage", {"types": []}), "name at least one type.")
    twice = answer(api, "web/clear-storage", {"types": ["cache", "cache"], "origin": "http://127.0.0.1:9"})
    assert twice.status_code == 200 and twice.json()["cleared"] == ["cache"]


@pytest.mark.parametrize(
    ("value", "good"),
    [("10mm", True), ("0.5in", True), ("1 0 m m", True), ("96px", True), ("1.25 cm", True),
     ("210", False), ("210MM", False), ("1e2mm", False), ("\u0662\u0661\u0660mm", False), ("210mm\n", False), ("-5mm", False)],
)  # fmt: skip
def test_pdf_lengths_pattern_is_the_servers(api: httpx.Client, components: dict, value: str, good: bool):
    width = components["web.pdf.params"]["properties"]["width"]
    assert "At most 200 in." in width["description"] and "at least 1 in" in width["description"]
    assert matches(width, value) is good
    margin = components["web.pdf.params"]["properties"]["margin"]["properties"]["top"]
    assert margin["pattern"] == width["pattern"]
    response = answer(api, "web/pdf", {"margin": {"top": value}})
    assert refused_for(response, "must be a number and a unit") is not good, response.text


@pytest.mark.parametrize(
    ("value", "good"),
    [("1", True), ("1-3, 5", True), ("4-", True), ("-2", True), (" 1 ,\t2 - 2 ", True), ("01", True),
     ("0", False), ("1-0", False), ("1,,2", False), ("a", False), ("\u0661", False), ("1;2", False), ("", False)],
)  # fmt: skip
def test_pdf_page_ranges_pattern_is_the_servers(api: httpx.Client, components: dict, value: str, good: bool):
    ranges = components["web.pdf.params"]["properties"]["page_ranges"]
    assert "numbered from 1" in ranges["description"]
    assert matches(ranges, value) is good
    response = answer(api, "web/pdf", {"page_ranges": value})
    # A good value may still name no page of this one-page document (its own 400).
    assert (response.status_code != 400 or "names no page of this document" in response.text) is good, response.text


def test_pdf_range_that_ends_before_it_starts_is_in_the_description(api: httpx.Client, components: dict):
    """The one page_ranges rule a pattern does not state."""
    ranges = components["web.pdf.params"]["properties"]["page_ranges"]
    assert matches(ranges, "3-2") and "a range not ending before it starts" in ranges["description"]
    assert refused_for(answer(api, "web/pdf", {"page_ranges": "3-2"}), "the range 3-2 ends before it starts.")


def test_characters_refused_in_user_agent_cookies_and_headers_are_in_the_patterns(api: httpx.Client, components: dict):
    web = components["web.text.params"]["properties"]
    cookie = components["web.cookies.params"]["properties"]["cookies"]["items"]["properties"]
    cases = [
        (web["user_agent"], lambda v: answer(api, "web/text", {"selector": "html", "user_agent": v}),
         ["Mozilla/5.0 (X11) caf\u00e9"], ["a\nb", "a\x7fb", "a\x1db", "ua\n", ""]),
        (web["headers"]["additionalProperties"], lambda v: answer(api, "web/text", {"selector": "html", "headers": {"X-A": v}}),
         ["v\twith tab", " spaced "], ["a\rb", "a\x00b", "a\x1fb", "end\n"]),
        (cookie["name"], lambda v: answer(api, "web/cookies", {"op": "set", "cookies": [{"name": v, "value": "1", "url": "http://127.0.0.1:9/"}]}),
         ["sid", "a.b-c!"], ["a b", "a;b", "a=b", "sid\n", "\u00e9"]),
        (cookie["value"], lambda v: answer(api, "web/cookies", {"op": "set", "cookies": [{"name": "c", "value": v, "url": "http://127.0.0.1:9/"}]}),
         ["", "abc", "x%20y"], ["a b", 'a"b', "a,b", "a;b", "a\\b", "v\n"]),
    ]  # fmt: skip
    for schema, call, good, bad in cases:
        for value in good:
            assert matches(schema, value), value
            assert call(value).status_code == 200, value
        for value in bad:
            assert not matches(schema, value), value
            assert call(value).status_code == 400, value
    assert web["headers"]["maxProperties"] == 50
    assert "the browser's and refused" in web["headers"]["description"]
    assert answer(api, "web/text", {"selector": "html", "headers": {"Host": "x"}}).status_code == 400


@pytest.mark.parametrize(
    ("url", "good"),
    [("http://127.0.0.1:9/", True), ("https://example.com/a?b#c", True), ("http://localhost:9/", True),
     ("http://[::1]:9/", True), ("HTTP://EXAMPLE.COM", True), ("http://xn--bcher-kva.example/", True),
     ("http://a.b/", False),  # a one-letter top-level domain: "Enter a valid URL"
     ("http://-a.com/", False), ("http://a_b.com/", False), ("http://[1:::2]/", False), ("http://256.1.1.1/", False),
     ("gopher://example.com/", False), (" http://example.com/", False), ("http://example.com/\n", False),
     ("http://a\uff0fb.com/", False), ("http://example.com/" + "x" * MAX_URL_LENGTH, False)],
)  # fmt: skip
def test_url_pattern_refuses_what_the_server_refuses(api: httpx.Client, components: dict, url: str, good: bool):
    # web/cookies' url (core.shapes.Url); web/open's takes more hosts (NavigationUrl, tests/test_envelopes.py).
    schema = components["web.cookies.params"]["properties"]["url"]
    assert "host is at most 253 characters" in schema["description"]
    assert matches(schema, url) is good
    response = answer(api, "web/cookies", {"op": "list", "url": url})
    assert response.status_code == (200 if good else 400), response.text
    if not good:
        assert "Enter a valid URL." in response.json()["error"] or "characters" in response.json()["error"]


# --- rules between parameters: in the descriptions, and answered as they say -------------------


def test_rules_between_parameters_are_described_and_kept(api: httpx.Client, components: dict):
    quality = components["web.screenshot.params"]["properties"]["quality"]
    assert "only with format jpeg" in quality["description"]
    assert refused_for(answer(api, "web/screenshot", {"quality": 50}), "quality goes with format jpeg")
    assert answer(api, "web/screenshot", {"quality": 50, "format": "jpeg"}).status_code == 200
    max_pages = components["web.collect.params"]["properties"]["max_pages"]
    assert "Only with next" in max_pages["description"]
    assert refused_for(answer(api, "web/collect", {"item_selector": "p", "max_pages": 2}), "max_pages goes with next.")
    function = components["web.wait.params"]["properties"]["function"]
    assert "Not with selector" in function["description"]
    assert refused_for(answer(api, "web/wait", {"selector": "p", "function": "1"}), "give either selector or function.")


# --- lengths on what was sent ----------------------------------------------------------------


def test_a_user_agent_past_its_maximum_is_refused_whatever_it_starts_with(api: httpx.Client, components: dict):
    assert components["web.text.params"]["properties"]["user_agent"]["maxLength"] == 1000
    for extra in ("\x1d", " ", "\u3000"):
        response = answer(api, "web/text", {"selector": "html", "user_agent": extra + "x" * 1000})
        assert response.status_code == 400, (extra, response.text)
    assert answer(api, "web/text", {"selector": "html", "user_agent": "x" * 1000}).status_code == 200


def test_a_selector_of_one_control_character_is_a_selector_not_a_blank(api: httpx.Client):
    response = api.get("/main/plugin/web/collect", params={"item_selector": "\x1c", "max_seconds": "0.1"})
    assert "may not be blank" not in response.text
    assert response.status_code == 400 and "the selector is not valid" in response.json()["error"], response.text
    assert "may not be blank" in api.get("/main/plugin/web/collect", params={"item_selector": ""}).text


def test_no_string_parameter_of_the_product_is_trimmed(components: dict):
    """Every string parameter of web, demo and the primitives is taken as
    sent: its schema has no word of trimming, and a value one space past
    its maxLength is refused (checked through the serializers the worker
    validates with)."""
    actions = [a for name, family in families().items() if name in ("web", "demo") for a in family.actions.values()]
    actions += list(primitives.actions.values())

    def strings(serializer: serializers.Serializer, path: str):
        for name, field in serializer.fields.items():
            child = field.child if isinstance(field, serializers.ListField | serializers.DictField) else field
            if isinstance(child, serializers.Serializer):
                yield from strings(child, f"{path}.{name}")
            elif isinstance(child, serializers.CharField):
                yield f"{path}.{name}", child

    found = [(where, field) for action in actions if action.params for where, field in strings(action.params(), action.route)]
    assert len(found) > 30
    for where, field in found:
        assert field.trim_whitespace is False, where
        if field.max_length is not None:
            with pytest.raises(serializers.ValidationError):
                field.run_validation(" " + "1" * field.max_length)
