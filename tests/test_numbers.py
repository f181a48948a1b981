"""One parser for every number the API takes (issue 56, item 8).

A lease's, a live link's and a CDP token's `ttl` took `"１０"` (full-width
digits), `"1_0"`, `" 10 "` and `"1e1"`; `workload?window_s` and
`overview/jobs?since` took full-width digits; `since` and `until` set to
`nan`, `inf` or `1e400` answered `200 []` on the worker's `overview/jobs`
and the waker's `fleet/jobs`; `POST /pages`, `/lease`, `/live` and `/purge`
took fields they do not declare. Python's `int()` and `float()` read all of
these; core/numbers.py now reads every number the API takes.

The walk takes its parameters from the served OpenAPI document, not from a
hand list: every integer or number in a query, a header or a body (a route's
own, and every action's and primitive's under `x-actions`), and every
string parameter whose pattern takes `1` and not `a` (the job headers,
`wait`, `since`, `until`). Each gets each bad form, and answers 400 in the
envelope naming it, with nothing changed. On a real worker (the suite's),
whose calls are refused before any runs; the parsers alone in process.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from console.search import SearchInvalid, parsed
from core import numbers
from credentials.rules import ORIGIN_PATTERN, InvalidCredential, origin
from harness.worker import WorkerProcess

# The forms Python reads as numbers and no client means: full-width digits,
# `_`, surrounding spaces, an exponent, not-a-number, infinities, a number
# past a float's range, a boolean's word, a hexadecimal literal.
BAD_TEXT = ["１０", "1_0", " 10 ", "1e1", "nan", "inf", "-inf", "1e400", "Infinity", "true", "0x10", "10\n"]
# What a JSON body may carry besides those, as raw JSON: a boolean, an
# infinite number, an integer no float holds.
BAD_JSON = ["true", "1e400", "-1e400", "1" * 400]
# A header's value is read without the spaces around it, which HTTP does not
# count as part of it (RFC 9110, 5.5), and a line feed cannot be sent in one.
NOT_IN_A_HEADER = {" 10 ", "10\n"}
# What each job header needs beside it to be read at all (the jobs guide).
COMPANIONS = {
    "X-Result-Ttl": {},
    "X-Queue-Timeout": {"X-Result-Ttl": "60"},
    "X-Priority": {"X-Result-Ttl": "60"},
    "X-Retry": {"X-Result-Ttl": "60"},
    "X-Retry-Backoff": {"X-Result-Ttl": "60", "X-Retry": "1"},
}
JOB_ID = "0123456789abcdef"  # a job id's form; its `wait` is read before it is looked up


# --- the parsers, in process -------------------------------------------------------------


@pytest.mark.parametrize("sent", [*BAD_TEXT, "", "-", ".", "1.2.3", "+1", True, None, [1], {"a": 1}, float("nan"),
                                  float("inf"), 10**400])  # fmt: skip
def test_a_number_is_plain_decimal_or_a_finite_json_number(sent):
    assert numbers.decimal(sent) is None
    assert numbers.seconds(sent) is None


@pytest.mark.parametrize(
    ("sent", "read"), [("10", 10.0), ("2.5", 2.5), (".5", 0.5), ("-3", -3.0), (7, 7.0), (0.25, 0.25)]
)
def test_plain_numbers_are_read(sent, read):
    assert numbers.decimal(sent) == read


def test_seconds_are_more_than_0_and_at_most_their_bound():
    assert numbers.seconds("600", most=600) == 600 and numbers.seconds(0.001, most=600) == 0.001
    for sent in ("0", "-0", "-1", "600.001", 0, -1):
        assert numbers.seconds(sent, most=600) is None, sent


@pytest.mark.parametrize(
    "sent", [*BAD_TEXT, "", "２０２６-12-06", "2026-12-06T08:00 ", "yesterday", "99999999999999", 1796544000]
)
def test_a_time_is_epoch_seconds_or_iso_8601_in_ascii(sent):
    assert numbers.moment(sent) is None


def test_times_are_read_both_ways():
    assert numbers.moment("1796544000") == 1796544000.0
    assert numbers.moment("2026-12-06T08:00") == 1796544000.0
    assert numbers.moment("2026-12-06T09:00+01:00") == 1796544000.0
    assert numbers.moment("-1.5") == -1.5
    assert re.fullmatch(numbers.MOMENT_PATTERN, "2026-12-06T08:00:00.5+01:00")


@pytest.mark.parametrize("sent", ["nan", "inf", "1e400", "１０", " 10 "])
@pytest.mark.parametrize("name", ["since", "until"])
def test_the_fleet_search_refuses_times_that_are_no_times(name, sent):
    """The waker's `fleet/jobs` reads its query with this parser (console/search.py)."""

    class Fleet:
        def names(self) -> list[str]:
            return ["ada"]

    with pytest.raises(SearchInvalid, match=f"Invalid parameter '{name}'"):
        parsed({name: sent}, Fleet())


# --- the walk, on a real worker ----------------------------------------------------------


@pytest.fixture(scope="module")
def document(worker: WorkerProcess) -> dict:
    with worker.client() as client:
        return client.get("/schema").json()


def resolve(document: dict, schema: dict) -> dict:
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def numeric(schema: dict) -> bool:
    """An integer or a number, or a string written in digits: its pattern
    takes `1` and not `a` (a job header, `wait`, a time)."""
    if schema.get("type") in ("integer", "number"):
        return True
    pattern = schema.get("pattern")
    return (
        schema.get("type") == "string"
        and bool(pattern)
        and bool(re.search(pattern, "1"))
        and not re.search(pattern, "a")
    )


def numeric_parameters(document: dict) -> list[tuple[str, str, str, str]]:
    """(method, path, where, name) of every number the document says the API takes."""
    found = []
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            for parameter in operation.get("parameters", []):
                if parameter["in"] in ("query", "header") and numeric(resolve(document, parameter.get("schema", {}))):
                    found.append((method, path, parameter["in"], parameter["name"]))
            body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            if body is not None:
                for name, schema in resolve(document, body).get("properties", {}).items():
                    if numeric(schema):
                        found.append((method, path, "body", name))
            for route, ref in operation.get("x-actions", {}).items() if method == "post" else ():
                concrete = path.replace("{family}/{action}", route).replace("{name}", route)
                for name, schema in resolve(document, ref).get("properties", {}).items():
                    if numeric(schema):
                        found.append((method, concrete, "body", name))
    return found


class State:
    """What the worker holds that a request could change."""

    def __init__(self, api: httpx.Client):
        self.api = api

    def __call__(self) -> Any:
        pages = self.api.get("/pages").json()["pages"]
        return (
            [(page["page_id"], page["leased"], page["tab"]) for page in pages],
            [job["id"] for job in self.api.get("/jobs").json()["jobs"]],
            self.api.get("/schedules").json()["schedules"],
        )


@pytest.fixture(scope="module")
def walk(worker: WorkerProcess) -> Iterator[tuple[httpx.Client, State, str]]:
    with worker.client() as client:
        made = client.post(
            "/schedules",
            json={"name": "walk", "cron": "0 0 1 1 *", "page_id": "main", "plugin": "testing/sleep", "result_ttl": 60,
                  "params": {"seconds": 0},
                  "paused": True},
        )  # fmt: skip
        assert made.status_code == 201, made.text
        yield client, State(client), made.json()["schedule_id"]


def concrete(path: str, schedule_id: str) -> str:
    path = path.removeprefix("/api/v1")
    for name, value in (("{page_id}", "main"), ("{family}/{action}", "testing/sleep"), ("{job_id}", JOB_ID),
                        ("{schedule_id}", schedule_id), ("{name}", "content")):  # fmt: skip
        path = path.replace(name, value)
    return path


def base_body(path: str) -> dict[str, Any]:
    """A body that is valid but for the field under test."""
    if path == "/schedules":
        return {
            "name": "walked",
            "cron": "0 0 1 1 *",
            "page_id": "main",
            "plugin": "testing/sleep",
            "params": {"seconds": 0},
            "result_ttl": 60,
        }
    return {}


def sent_forms(where: str) -> list[tuple[str, bytes | str]]:
    """(label, value) of each bad form: a string in a query or a header, raw JSON in a body."""
    if where == "body":
        return [(f"json {form}", form) for form in BAD_JSON] + [(repr(form), json.dumps(form)) for form in BAD_TEXT]
    return [(repr(form), form) for form in BAD_TEXT if not (where == "header" and form in NOT_IN_A_HEADER)]


def request_for(method: str, path: str, where: str, name: str, raw: Any, schedule_id: str) -> dict[str, Any]:
    url = concrete(path, schedule_id)
    if where == "query":
        return {"method": method.upper(), "url": url, "params": {name: raw}}
    if where == "header":
        headers = {**COMPANIONS.get(name, {}), name: raw.encode()}
        return {"method": method.upper(), "url": url, "headers": headers}
    fields = [f"{json.dumps(key)}: {json.dumps(value)}" for key, value in base_body(url).items() if key != name]
    body = "{" + ", ".join([*fields, f"{json.dumps(name)}: {raw}"]) + "}"
    return {
        "method": method.upper(),
        "url": url,
        "content": body.encode(),
        "headers": {"Content-Type": "application/json"},
    }


def test_the_walk_finds_every_number_the_issue_names(document):
    found = {(where, path.removeprefix("/api/v1"), name) for _, path, where, name in numeric_parameters(document)}
    assert {
        ("body", "/{page_id}/lease", "ttl"), ("body", "/{page_id}/live", "ttl"), ("body", "/{page_id}/cdp", "ttl"),
        ("query", "/workload", "window_s"), ("query", "/overview/jobs", "since"), ("query", "/overview/jobs", "until"),
        ("query", "/overview/jobs", "limit"), ("query", "/jobs", "limit"), ("query", "/jobs/{job_id}", "wait"),
        ("header", "/{page_id}/plugin/{family}/{action}", "X-Result-Ttl"),
        ("header", "/{page_id}/plugin/{family}/{action}", "X-Retry"),
        ("body", "/schedules", "result_ttl"), ("body", "/schedules", "priority"),
        ("body", "/{page_id}/primitive/goto", "timeout_ms"), ("body", "/{page_id}/plugin/web/open", "timeout_ms"),
    } <= found  # fmt: skip


def test_every_number_the_api_takes_refuses_every_bad_form(document, walk):
    """Each bad form of each numeric parameter answers 400 in the envelope,
    naming the parameter, and changes nothing."""
    api, state, schedule_id = walk
    before = state()
    accepted = []
    cases = 0
    for method, path, where, name in numeric_parameters(document):
        for label, raw in sent_forms(where):
            cases += 1
            response = api.request(**request_for(method, path, where, name, raw, schedule_id))
            body = response.json() if response.headers.get("Content-Type") == "application/json" else None
            if not (
                response.status_code == 400 and isinstance(body, dict) and body.get("success") is False
                and name in body.get("error", "") and set(body) == {"success", "error", "page_id"}
            ):  # fmt: skip
                accepted.append(
                    f"{method.upper()} {path} {where} {name}={label}: {response.status_code} {response.text[:160]}"
                )
    assert not accepted, f"{len(accepted)} of {cases} answered otherwise:\n" + "\n".join(accepted[:40])
    assert cases > 300
    assert state() == before


@pytest.mark.parametrize(
    ("path", "body", "does"),
    [
        ("/pages", {"page_id": "walker", "bogus": 1}, "opening a page, which takes page_id."),
        ("/main/lease", {"ttl": 30, "bogus": 1}, "taking or renewing a lease, which takes ttl."),
        ("/main/live", {"bogus": 1}, "making a live link, which takes ttl, control."),
        ("/main/cdp", {"bogus": 1}, "making a CDP token, which takes ttl."),
        ("/purge", {"bogus": 1}, "freeing the idle pages' memory, which takes no parameters."),
    ],
)
def test_a_field_a_route_does_not_declare_answers_400_naming_it(walk, path, body, does):
    api, state, _ = walk
    before = state()
    refused = api.post(path, json=body)
    assert refused.status_code == 400, refused.text
    page_id = "main" if path.startswith("/main/") else None
    assert refused.json() == {"success": False, "error": f"Unknown parameter 'bogus' for {does}", "page_id": page_id}
    assert state() == before


def test_the_routes_still_take_plain_numbers(walk):
    api, state, _ = walk
    taken = api.post("/main/lease", json={"ttl": "30"})
    assert taken.status_code == 201, taken.text
    lease = taken.json()["lease"]
    try:
        assert api.post("/main/live", json={"ttl": 60.5}, headers={"X-Lease": lease}).status_code == 201
        assert api.post("/main/cdp", json={"ttl": "10"}, headers={"X-Lease": lease}).status_code == 201
        assert api.get("/workload", params={"window_s": "60"}).status_code == 200
        assert api.get("/overview/jobs", params={"since": "2026-12-06T08:00", "until": "1796600000"}).status_code == 200
    finally:
        api.delete("/main/cdp", headers={"X-Lease": lease})
        api.delete("/main/live")
        assert api.delete("/main/lease", headers={"X-Lease": lease}).status_code == 200


# --- what the document states (issue 56, item 10) ----------------------------------------


def test_the_document_states_what_the_api_refuses(document, walk):
    """The six gaps an outside schemathesis run found: each is stated now,
    and each stated bound is one the API holds."""
    api, _, _ = walk
    schemas = document["components"]["schemas"]
    # A schedule's name is never blank: the API refuses it, the document says so.
    blank = api.post("/schedules", json={**base_body("/schedules"), "name": ""})
    assert blank.status_code == 400 and "'name'" in blank.json()["error"], blank.text
    for shape in ("ScheduleInput", "PatchedScheduleInput"):
        name = schemas[shape]["properties"]["name"]
        assert name["minLength"] == 1 and not re.search(name["pattern"], "")
    # The ttl bounds of a lease, a live link and a CDP token.
    for shape, most in (("LeaseParams", 600), ("LiveParams", 3600), ("CdpParams", 600)):
        ttl = schemas[shape]["properties"]["ttl"]
        assert (ttl["minimum"], ttl["exclusiveMinimum"], ttl["maximum"]) == (0, True, most), shape
    # The credential url's pattern: what the API takes matches it, and a path does not.
    url = schemas["CredentialInput"]["properties"]["url"]["pattern"]
    for taken in ("http://a.example", "HTTPS://Example.COM:8443/", "http://[::1]:5000", "http://bücher.example"):
        assert re.search(url, taken), taken
    for refused in ("ftp://a.example", "http://a.example/path", "http://u@a.example", "http://a.example?q"):
        assert not re.search(url, refused), refused
    # overview/jobs' since and until.
    query = {p["name"]: p["schema"] for p in document["paths"]["/api/v1/overview/jobs"]["get"]["parameters"]}
    for name in ("since", "until"):
        assert query[name]["pattern"] == numbers.MOMENT_PATTERN
        assert not re.search(query[name]["pattern"], "nan") and not re.search(query[name]["pattern"], "１０")
    # The primitive route's body is one of the primitives' closed objects.
    body = document["paths"]["/api/v1/{page_id}/primitive/{name}"]["post"]["requestBody"]["content"]["application/json"]
    assert "additionalProperties" not in body["schema"]
    for ref in body["schema"]["anyOf"]:
        assert resolve(document, ref)["additionalProperties"] is False
    refused = api.post("/main/primitive/content", json={"bogus": 1})
    assert refused.status_code == 400 and "'bogus'" in refused.json()["error"]


def test_every_origin_a_credential_takes_matches_the_stated_pattern():
    """The pattern may be looser than `origin` (it checks the host and the
    port besides), never tighter: a fuzzer would call a taken url invalid."""
    hosts = ["a.example", "A.Example.", "127.1", "127.0.0.1", "[::1]", "[::ffff:1.2.3.4]", "bücher.example",
             "xn--bcher-kva.example", "a_b.example", "localhost", "0x7f.1", "a..b", "-a.example", "a.example:"]  # fmt: skip
    taken = 0
    for scheme in ("http", "https", "HTTP", "hTtPs", "ftp"):
        for host in hosts:
            for port in ("", ":80", ":8443", ":0", ":65536", ":x"):
                for tail in ("", "/", "//", "/a", "?", "#", "\\"):
                    url = f"{scheme}://{host}{port}{tail}"
                    try:
                        origin(url)
                    except InvalidCredential:
                        continue
                    taken += 1
                    assert re.fullmatch(ORIGIN_PATTERN, url), url
    assert taken > 50


@pytest.mark.parametrize("accepted_at", ["1e400", "-1e400", "true"])
def test_a_job_list_cursor_holds_a_finite_number(walk, accepted_at):
    """A cursor is the client's to send back: its time is read by the same rule."""
    api, _, _ = walk
    cursor = base64.urlsafe_b64encode(f'[{accepted_at}, "{JOB_ID}"]'.encode()).decode().rstrip("=")
    refused = api.get("/jobs", params={"cursor": cursor})
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"].startswith("Invalid parameter 'cursor': not a cursor this worker gave")
