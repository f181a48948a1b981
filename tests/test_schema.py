"""The OpenAPI description at `GET /api/v1/schema`, against a real worker.

It is valid OpenAPI 3; it lists every /api/v1 route with exactly the methods
the route answers; every answer of a tour through the API (successes and
each error the tour can provoke) is a status the description documents, with
a body and headers that conform to it; and schemathesis, fuzzing the live
worker from the description, finds no 5xx and no nonconforming answer.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import schemathesis
from django.urls import URLPattern, get_resolver
from drf_spectacular.validation import validate_schema

from core.shapes import NAVIGATION_URL_PATTERN
from harness.worker import ROOT, WorkerProcess, wait_until
from tests.conftest import worker_env

# The fuzz worker's browser goes through a proxy where nothing listens: a
# navigation the fuzzer provokes fails at once instead of leaving the machine
# (tests/support/schema_hooks.py keeps webhook URLs on loopback too).
DEAD_PROXY = "http://127.0.0.1:9"
# Examples per operation and phase, for the routes and for each action's own
# operation (there are some forty of those).
FUZZ_EXAMPLES = int(os.environ.get("SCHEMA_FUZZ_EXAMPLES", "50"))
ACTION_FUZZ_EXAMPLES = int(os.environ.get("SCHEMA_ACTION_FUZZ_EXAMPLES", "5"))
# Each action is fuzzed through its JSON body; its query-string form (GET)
# too with SCHEMA_ACTION_FUZZ_METHODS=get,post, which doubles the run's time
# (each case is a browser step, about 50 ms; the coverage phase alone makes
# some fifty cases an operation, whatever the examples).
ACTION_FUZZ_METHODS = tuple(os.environ.get("SCHEMA_ACTION_FUZZ_METHODS", "post").split(","))
FUZZ_SEED = os.environ.get("SCHEMA_FUZZ_SEED", "20261202")
# Every check that judges the answers. Left out: positive_data_acceptance,
# which wants a 2xx for every schema-valid request, but a valid request can
# rightly be refused by the worker's state (a page not open: 404; leased: 423;
# busy: 409), by what the page holds (nothing matches: 404; a wait runs out:
# 408; a selector or expression the browser refuses: 400) or by a rule
# between parameters that OpenAPI 3.0 cannot state, which each parameter's
# description says (X-Callback-Url with X-Result-Ttl, `quality` with png,
# `max_pages` without `next`: 400; tests/test_schema_constraints.py checks
# each). negative_data_rejection is in: whatever the document refuses, the
# worker refuses.
FUZZ_CHECKS = ["all"]
FUZZ_EXCLUDED_CHECKS = ["positive_data_acceptance"]
# What not_a_server_error takes: all but 5xx, and 502.
NOT_SERVER_ERRORS = ["2xx", "3xx", "4xx", "502"]
REFUSALS = ["400", "401", "403", "404", "405", "406", "409", "413", "414", "415", "422", "428", "429", "5xx"]


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    """This module's own worker (it overrides conftest's): the fuzzer leaves
    pages open and leased."""
    running = WorkerProcess(tmp_path_factory.mktemp("store"), env=worker_env(PENELOPE_PROXY=DEAD_PROXY)).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def document(worker: WorkerProcess) -> dict:
    with worker.client() as client:
        response = client.get("/schema")
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"] == "application/json"
    return response.json()


@pytest.fixture(scope="module")
def described(document: dict) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_dict(document)


def api_routes() -> dict[str, set[str]]:
    """Every /api/v1 route of the URL configuration, as an OpenAPI path, with
    the methods its view answers."""
    routes = {}
    for pattern in get_resolver().url_patterns:
        route = str(getattr(pattern, "pattern", ""))
        if isinstance(pattern, URLPattern) and route.startswith("api/v1/"):
            path = "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)
            view = pattern.callback.cls(**pattern.callback.initkwargs)
            routes[path] = set(view.allowed_methods)
    return routes


# --- the document ----------------------------------------------------------------------


def test_schema_needs_the_key(worker: WorkerProcess):
    response = httpx.get(worker.base_url + "/api/v1/schema")
    assert response.status_code == 401
    assert response.json()["success"] is False


def test_schema_is_valid_openapi_3(document: dict):
    assert document["openapi"].startswith("3.0.")
    validate_schema(document)  # drf-spectacular's check against the OpenAPI 3.0 JSON schema
    bearer = document["components"]["securitySchemes"]["bearerAuth"]
    assert (bearer["type"], bearer["scheme"]) == ("http", "bearer")
    # The key, then what a read key may do and is not shown (tests/test_read_key_secrets.py).
    assert bearer["description"].startswith("`Authorization: Bearer <PENELOPE_KEY>`, or a read key (PENELOPE_READ_KEYS)")


def test_schema_lists_every_route_with_its_methods(document: dict):
    routes = api_routes()
    assert len(routes) >= 12
    described = {path: {method.upper() for method in methods} for path, methods in document["paths"].items()}
    assert described == routes


def test_every_operation_but_health_needs_the_key(document: dict):
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            if path == "/api/v1/health":
                assert "security" not in operation and "401" not in operation["responses"]
                continue
            assert operation["security"] == [{"bearerAuth": []}], (method, path)
            assert operation["responses"]["401"]["headers"]["WWW-Authenticate"]["required"] is True


def test_path_parameters_carry_their_patterns(document: dict):
    paths = document["paths"]
    page_id = next(p for p in paths["/api/v1/{page_id}"]["get"]["parameters"] if p["name"] == "page_id")
    pattern = re.compile(page_id["schema"]["pattern"])
    assert pattern.search("main") and pattern.search("a-b_c9") and pattern.search("x" * 32)
    assert not any(pattern.search(bad) for bad in ("", "Main", "-a", "x" * 33, "pages", "jobs", "schema", "health"))
    job_id = next(p for p in paths["/api/v1/jobs/{job_id}"]["get"]["parameters"] if p["name"] == "job_id")
    assert job_id["schema"]["pattern"] == "^[0-9a-f]{16}$"


def test_plugin_route_lists_the_job_headers_and_the_actions(document: dict):
    operation = document["paths"]["/api/v1/{page_id}/plugin/{family}/{action}"]["get"]
    headers = {p["name"]: p for p in operation["parameters"] if p["in"] == "header"}
    assert set(headers) == {
        "X-Lease", "X-Result-Ttl", "X-Callback-Url", "Idempotency-Key", "X-Queue-Timeout", "X-Priority", "X-Retry",
        "X-Retry-Backoff", "X-Notify-Url", "X-Debug",
    }
    # A header is a string: the pattern is what the server accepts, plain decimal seconds in (0, 600].
    ttl = re.compile(headers["X-Result-Ttl"]["schema"]["pattern"])
    assert all(ttl.search(good) for good in ("600", "600.0", "1", "0.5", ".5", "599.999", "0600"))
    assert not any(ttl.search(bad) for bad in ("0", "0.0", ".", "600.01", "601", "1e2", "5e-324", "-1", "+5", "1_0"))
    assert "202" in operation["responses"]
    assert "`demo/get-following`: `handle`, `limit` (optional), `pause_ms` (optional)" in operation["description"]
    assert "`testing/sleep`" in operation["description"]  # the worker's own families, whatever they are


def test_every_action_has_its_parameter_schema_in_the_document(document: dict):
    components = document["components"]["schemas"]
    for method in ("get", "post"):
        actions = document["paths"]["/api/v1/{page_id}/plugin/{family}/{action}"][method]["x-actions"]
        assert {"web/open", "web/collect", "web/wait", "web/cookies", "demo/get-following", "testing/sleep"} <= set(actions)
        for route, ref in actions.items():
            assert ref["$ref"] == f"#/components/schemas/{route.replace('/', '.')}.params"
    primitives = document["paths"]["/api/v1/{page_id}/primitive/{name}"]["post"]["x-actions"]
    assert set(primitives) == {"goto", "click", "fill", "press", "scroll", "wait", "evaluate", "content", "screenshot"}
    assert primitives["goto"] == {"$ref": "#/components/schemas/primitive.goto.params"}
    opened = components["web.open.params"]
    assert opened["required"] == ["url"]
    url = opened["properties"]["url"]
    assert {key: url[key] for key in ("type", "maxLength", "minLength")} == {"type": "string", "maxLength": 2048, "minLength": 1}
    assert "format" not in url  # `uri` (RFC 3986) refuses international hosts the worker takes: the pattern says it
    # Any host a browser takes: the egress guard judges it (core/shapes.py, NavigationUrl).
    assert url["pattern"] == f"^(?:{NAVIGATION_URL_PATTERN})$"
    assert opened["properties"]["timeout_ms"] == {"type": "integer", "minimum": 1, "maximum": 600000, "default": 30000}
    assert opened["properties"]["block"]["items"] == {"enum": ["image", "font", "media", "stylesheet"]}
    assert opened["properties"]["wait_for"]["properties"]["state"]["enum"] == ["attached", "visible", "hidden", "detached"]
    fields = components["web.collect.params"]["properties"]["fields"]["additionalProperties"]
    assert set(fields["properties"]) == {"selector", "attribute"}
    assert components["web.clear-storage.params"]["properties"]["types"]["default"] == ["cache", "local_storage", "session_storage"]
    assert components["web.state.params"] == {
        "type": "object", "properties": {}, "additionalProperties": False, "description": components["web.state.params"]["description"]
    }


# --- a tour: every answer conforms ---------------------------------------------------------


class Conformance:
    """Checks answers against the document: the status is documented for the
    operation, the body conforms, the required headers are there."""

    def __init__(self, document: dict, described: schemathesis.BaseSchema):
        self.document = document
        self.described = described
        self.seen: set[tuple[str, str, int]] = set()

    def __call__(self, method: str, path: str, response: httpx.Response) -> httpx.Response:
        responses = self.document["paths"][path][method.lower()]["responses"]
        status = str(response.status_code)
        assert status in responses or "default" in responses, (method, path, status, response.text)
        declared = responses.get(status) or responses["default"]
        for name, header in declared.get("headers", {}).items():
            if header.get("required"):
                assert name in response.headers, (method, path, status, name)
        self.described[path][method].validate_response(response)
        self.seen.add((method, path, response.status_code))
        return response


@pytest.fixture
def conforms(document: dict, described: schemathesis.BaseSchema) -> Conformance:
    return Conformance(document, described)


def poll_until_done(api: httpx.Client, conforms: Conformance, job_id: str) -> dict:
    def done():
        body = conforms("GET", "/api/v1/jobs/{job_id}", api.get(f"/jobs/{job_id}")).json()
        return body if body["state"] != "running" else None

    return wait_until(done, timeout=30, what=f"job {job_id}")


def test_pages_leases_and_the_small_routes_conform(worker: WorkerProcess, api: httpx.Client, conforms: Conformance):
    assert conforms("GET", "/api/v1/health", httpx.get(worker.base_url + "/api/v1/health")).status_code == 200
    assert conforms("GET", "/api/v1/pages", httpx.get(worker.base_url + "/api/v1/pages")).status_code == 401
    assert conforms("GET", "/api/v1/activity", api.get("/activity")).status_code == 200
    assert conforms("GET", "/api/v1/workload", api.get("/workload")).status_code == 200
    assert conforms("GET", "/api/v1/workload", api.get("/workload", params={"window_s": "-1"})).status_code == 400
    assert conforms("POST", "/api/v1/purge", api.post("/purge")).status_code == 200
    metrics = conforms("GET", "/api/v1/metrics", api.get("/metrics"))
    assert metrics.status_code == 200 and metrics.headers["Content-Type"].startswith("text/plain")
    assert conforms("GET", "/api/v1/metrics", httpx.get(worker.base_url + "/api/v1/metrics")).status_code == 401

    pages, page = "/api/v1/pages", "/api/v1/{page_id}"
    assert conforms("GET", pages, api.get("/pages")).status_code == 200
    assert conforms("POST", pages, api.post("/pages", json={"page_id": "tour"})).status_code == 201
    assert conforms("POST", pages, api.post("/pages", json={"page_id": "tour"})).status_code == 409
    assert conforms("POST", pages, api.post("/pages", json={"page_id": "Tour!"})).status_code == 400
    reserved = conforms("POST", pages, api.post("/pages", json={"page_id": "schema"}))  # the schema's own route
    assert reserved.status_code == 400 and "'schema' is a word the API uses" in reserved.json()["error"]
    assert conforms("POST", pages, api.post("/pages", content=b"{")).status_code == 422
    assert conforms("POST", pages, api.post("/pages", content=b"[" * (1024 * 1024 + 1))).status_code == 413
    assert conforms("GET", page, api.get("/tour")).status_code == 200
    assert conforms("GET", page, api.get("/nope")).status_code == 404
    assert conforms("GET", page, api.get("/NOPE")).status_code == 400

    lease = "/api/v1/{page_id}/lease"
    taken = conforms("POST", lease, api.post("/tour/lease", json={"ttl": 30}))
    assert taken.status_code == 201
    held = {"X-Lease": taken.json()["lease"]}
    assert conforms("POST", lease, api.post("/tour/lease", json={"ttl": 60}, headers=held)).status_code == 200
    assert conforms("POST", lease, api.post("/tour/lease", json={"ttl": 601}, headers=held)).status_code == 400
    assert conforms("POST", lease, api.post("/tour/lease", json={"ttl": 5})).status_code == 423
    assert conforms("DELETE", page, api.delete("/tour")).status_code == 423
    assert conforms("DELETE", lease, api.delete("/tour/lease", headers=held)).status_code == 200
    assert conforms("DELETE", lease, api.delete("/tour/lease", headers=held)).status_code == 423
    assert conforms("DELETE", lease, api.delete("/nope/lease")).status_code == 404

    assert conforms("DELETE", page, api.delete("/main")).status_code == 409
    assert conforms("DELETE", page, api.delete("/tour")).status_code == 200
    assert conforms("DELETE", page, api.delete("/tour")).status_code == 404


def test_plugin_calls_primitives_jobs_and_media_conform(api: httpx.Client, conforms: Conformance):
    plugin, primitive = "/api/v1/{page_id}/plugin/{family}/{action}", "/api/v1/{page_id}/primitive/{name}"
    assert conforms("GET", plugin, api.get("/main/plugin/web/state")).status_code == 200
    assert conforms("POST", plugin, api.post("/main/plugin/web/state", json={})).status_code == 200
    assert conforms("GET", plugin, api.get("/main/plugin/web/nope")).status_code == 404
    assert conforms("GET", plugin, api.get("/main/plugin/web/text")).status_code == 400  # selector missing
    assert conforms("POST", plugin, api.post("/main/plugin/web/state", content=b"[]")).status_code == 400
    assert conforms("POST", plugin, api.post("/main/plugin/web/state", content=b"nope")).status_code == 422
    assert conforms("GET", plugin, api.get("/main/plugin/testing/refuse")).status_code == 418  # the action's own
    assert conforms("GET", plugin, api.get("/main/plugin/testing/overrun")).status_code == 408
    assert conforms("GET", plugin, api.get("/main/plugin/testing/crash")).status_code == 500
    headers = {"X-Result-Ttl": "1", "X-Callback-Url": "http://127.0.0.1:9/"}
    assert conforms("GET", plugin, api.get("/main/plugin/web/state", headers=headers)).status_code == 400

    assert conforms("POST", primitive, api.post("/main/primitive/content", json={})).status_code == 200
    assert conforms("POST", primitive, api.post("/main/primitive/nope", json={})).status_code == 404
    assert conforms("POST", primitive, api.post("/main/primitive/wait", json={})).status_code == 400
    assert conforms("POST", primitive, api.post("/main/primitive/content", headers={"X-Result-Ttl": "5"})).status_code == 400

    # A polling job: 202, then the poll while it runs and once it is done.
    started = conforms("GET", plugin, api.get("/main/plugin/testing/sleep", params={"seconds": "2"}, headers={"X-Result-Ttl": "60"}))
    assert started.status_code == 202
    assert conforms("GET", plugin, api.get("/main/plugin/web/state", headers={"X-Result-Ttl": "60"})).status_code == 409
    assert poll_until_done(api, conforms, started.json()["job_id"])["status"] == 200
    assert conforms("GET", "/api/v1/jobs/{job_id}", api.get("/jobs/0123456789abcdef")).status_code == 404
    assert conforms("GET", "/api/v1/jobs/{job_id}", api.get("/jobs/nope")).status_code == 404

    # A webhook job whose receiver is not there: its poll shows the failed delivery.
    started = conforms("POST", plugin, api.post("/main/plugin/web/state", headers={"X-Callback-Url": "http://127.0.0.1:9/hook"}))
    assert started.status_code == 202
    job = started.json()["job_id"]
    delivery = wait_until(
        lambda: conforms("GET", "/api/v1/jobs/{job_id}", api.get(f"/jobs/{job}")).json()["delivery"]["error"],
        timeout=30,
        what="the first delivery attempt",
    )
    assert delivery

    # A file: its link, the download, then the link used up.
    media = conforms("POST", primitive, api.post("/main/primitive/screenshot", json={})).json()["media"]
    download = conforms("GET", "/api/v1/media/{token}", api.get(media["url"].removeprefix("/api/v1")))
    assert download.status_code == 200 and download.content.startswith(b"\x89PNG")
    assert conforms("GET", "/api/v1/media/{token}", api.get(media["url"].removeprefix("/api/v1"))).status_code == 404

    # A navigation that fails: 502. On a page of its own: after a failed
    # navigation Chromium goes on to load its error page, and a call racing
    # with that load can fail ("page is navigating"), which is not this test's
    # subject.
    assert api.post("/pages", json={"page_id": "nav"}).status_code == 201
    assert conforms("GET", plugin, api.get("/nav/plugin/web/open", params={"url": "http://127.0.0.1:9/"})).status_code == 502
    assert api.delete("/nav").status_code == 200


def test_job_control_answers_conform(api: httpx.Client, conforms: Conformance):
    plugin, job, cancel = "/api/v1/{page_id}/plugin/{family}/{action}", "/api/v1/jobs/{job_id}", "/api/v1/jobs/{job_id}/cancel"
    keyed = {"X-Result-Ttl": "60", "Idempotency-Key": "conform-1"}
    started = conforms("GET", plugin, api.get("/main/plugin/testing/browser-wait", params={"ms": "60000"}, headers=keyed))
    assert started.status_code == 202
    job_id = started.json()["job_id"]
    assert conforms("GET", plugin, api.get("/main/plugin/testing/browser-wait", params={"ms": "60000"}, headers=keyed)).json() == started.json()
    assert conforms("GET", plugin, api.get("/main/plugin/web/state", headers=keyed)).status_code == 422
    assert conforms("GET", plugin, api.get("/main/plugin/web/state", headers={**keyed, "Idempotency-Key": "x" * 256})).status_code == 400
    assert conforms("GET", job, api.get(f"/jobs/{job_id}", params={"wait": "0.2"})).json()["state"] == "running"
    assert conforms("GET", job, api.get(f"/jobs/{job_id}", params={"wait": "61"})).status_code == 400
    assert conforms("GET", "/api/v1/jobs", api.get("/jobs", params={"state": "running"})).json()["jobs"][0]["job_id"] == job_id
    assert conforms("GET", "/api/v1/jobs", api.get("/jobs", params={"limit": "0"})).status_code == 400
    assert conforms("POST", cancel, api.post(f"/jobs/{job_id}/cancel")).json()["state"] == "cancelled"
    assert conforms("POST", cancel, api.post(f"/jobs/{job_id}/cancel")).status_code == 409
    assert conforms("POST", cancel, api.post("/jobs/0123456789abcdef/cancel")).status_code == 404
    assert conforms("DELETE", job, api.delete(f"/jobs/{job_id}")).status_code == 204


def test_values_json_cannot_carry_answer_400_not_invalid_json(api: httpx.Client, conforms: Conformance):
    """Found by the schema work: `evaluate` answered `{"value":NaN}`, which is
    not JSON. NaN and Infinity now answer 400 like any value JSON cannot carry."""
    primitive = "/api/v1/{page_id}/primitive/{name}"
    for expression in ("NaN", "Infinity", "[1, -Infinity]", "({a: 2**1024})"):
        response = conforms("POST", primitive, api.post("/main/primitive/evaluate", json={"expression": expression}))
        assert response.status_code == 400, (expression, response.text)
        assert response.json()["error"] == "The expression's value cannot be sent as JSON."
    response = conforms("POST", primitive, api.post("/main/primitive/evaluate", json={"expression": "[1, -0, 'x']"}))
    assert response.json()["value"] == [1, 0, "x"]


def test_a_selector_the_browser_cannot_parse_answers_400_not_502(api: httpx.Client, conforms: Conformance):
    """Found by fuzzing each action's parameters: a malformed selector was
    taken for a browser failure (502). It is the caller's mistake."""
    plugin, primitive = "/api/v1/{page_id}/plugin/{family}/{action}", "/api/v1/{page_id}/primitive/{name}"
    for path, url, body in (
        (plugin, "/main/plugin/web/text", {"selector": "}"}),
        (plugin, "/main/plugin/web/text", {"selector": "xpath=//["}),
        (plugin, "/main/plugin/web/text", {"selector": "nosuchengine=x"}),
        (plugin, "/main/plugin/web/screenshot", {"selector": "[["}),
        (plugin, "/main/plugin/web/collect", {"item_selector": "}", "max_seconds": 0.2}),
        (primitive, "/main/primitive/click", {"selector": "0", "timeout_ms": 100}),
        (primitive, "/main/primitive/wait", {"selector": "}", "timeout_ms": 100}),
    ):
        response = conforms("POST", path, api.post(url, json=body))
        assert response.status_code == 400, (url, body, response.text)
        assert "the selector is not valid" in response.json()["error"]
    # A valid selector that matches nothing is still the action's own answer.
    assert api.post("/main/primitive/click", json={"selector": "#nothing", "timeout_ms": 100}).status_code == 408


def test_too_many_query_parameters_answer_400_not_500(api: httpx.Client, conforms: Conformance):
    """Found by the schema work: more query parameters than Django reads
    (DATA_UPLOAD_MAX_NUMBER_FIELDS, 1000) raised out of the view as a 500."""
    query = "&".join(f"p{n}=1" for n in range(1001))
    for method, path, url in (
        ("GET", "/api/v1/{page_id}/plugin/{family}/{action}", "/main/plugin/web/state"),
        ("GET", "/api/v1/workload", "/workload"),
    ):
        response = conforms(method, path, api.get(f"{url}?{query}"))
        assert response.status_code == 400, response.text
        assert response.json()["error"] == "The request has more than 1000 parameters (DATA_UPLOAD_MAX_NUMBER_FIELDS)."
    # 1000 are read: web/state declares none of them, and says so.
    within = api.get("/main/plugin/web/state?" + "&".join(f"p{n}=1" for n in range(1000)))
    assert within.status_code == 400 and within.json()["error"].startswith("Unknown parameters 'p0', 'p1'"), within.text
    assert api.get("/workload?" + "&".join(f"p{n}=1" for n in range(1000))).status_code == 200


# --- schemathesis against the live worker -------------------------------------------------

PLUGIN_PATH = "/api/v1/{page_id}/plugin/{family}/{action}"
PRIMITIVE_PATH = "/api/v1/{page_id}/primitive/{name}"
# The families the product ships; `testing` is this suite's own stand-ins
# (a crash, a sleep of up to 600 s), fuzzed through the generic route only.
PRODUCT_FAMILIES = ("web", "demo")
FUZZ_PAGE = "main"
SCALAR_TYPES = ("string", "integer", "number", "boolean")


def action_operations(document: dict, methods: tuple[str, ...] = ("get", "post")) -> dict[str, dict]:
    """Every product action and every primitive as an operation of its own,
    on the page `main`: its parameters from its `x-actions` schema, as the
    JSON body (POST) and, those that are not objects or lists, as the query
    (GET). The job and lease headers are fuzzed on the generic routes."""
    components = document["components"]["schemas"]
    paths: dict[str, dict] = {}

    def derive(generic: dict, route: str, ref: dict, method: str) -> dict:
        params = components[ref["$ref"].rsplit("/", 1)[1]]
        derived = {
            key: value for key, value in generic.items() if key not in ("parameters", "requestBody", "callbacks", "x-actions")
        }
        derived["operationId"] = f"{generic['operationId']}.{route}"
        derived["parameters"] = []
        derived["x-fuzz-params"] = sorted(params["properties"])
        if method == "post":
            # Not required: a POST without a body is taken as `{}`.
            derived["requestBody"] = {"content": {"application/json": {"schema": ref}}}
        else:
            for name, schema in params["properties"].items():
                if schema.get("type", "string" if "enum" in schema else None) in SCALAR_TYPES:
                    required = name in params.get("required", ())
                    derived["parameters"].append({"name": name, "in": "query", "required": required, "schema": schema})
        return derived

    plugin = document["paths"][PLUGIN_PATH]
    for route, ref in plugin["get"]["x-actions"].items():
        if route.split("/")[0] in PRODUCT_FAMILIES:
            paths[f"/api/v1/{FUZZ_PAGE}/plugin/{route}"] = {
                method: derive(plugin[method], route, ref, method) for method in methods
            }
    primitive = document["paths"][PRIMITIVE_PATH]["post"]
    for name, ref in primitive["x-actions"].items():
        paths[f"/api/v1/{FUZZ_PAGE}/primitive/{name}"] = {"post": derive(primitive, name, ref, "post")}
    return paths


def test_every_product_action_and_primitive_is_fuzzed_as_its_own_operation(document: dict):
    derived = action_operations(document)
    actions = document["paths"][PLUGIN_PATH]["get"]["x-actions"]
    assert {path.split("/plugin/")[1] for path in derived if "/plugin/" in path} == {
        route for route in actions if route.split("/")[0] in PRODUCT_FAMILIES
    }
    assert {path.rsplit("/", 1)[1] for path in derived if "/primitive/" in path} == set(
        document["paths"][PRIMITIVE_PATH]["post"]["x-actions"]
    )
    opened = derived["/api/v1/main/plugin/web/open"]
    assert {p["name"] for p in opened["get"]["parameters"]} >= {"url", "timeout_ms", "wait_until", "user_agent"}
    assert "wait_for" not in {p["name"] for p in opened["get"]["parameters"]}  # an object: POST only
    assert opened["post"]["requestBody"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/web.open.params"}
    validate_schema({**document, "paths": {**document["paths"], **derived}})



# An action that answers 408, 502, 503 or 504 on purpose (it shows a retry).
FLAKY = "/plugin/demo/flaky"


def run_schemathesis(
    worker: WorkerProcess, schema_file: Path, workdir: Path, *selection: str, examples: int = FUZZ_EXAMPLES
) -> subprocess.CompletedProcess:
    config = workdir / "schemathesis.toml"
    config.write_text(
        f'[auth.openapi.bearerAuth]\nbearer = "{worker.key}"\n'
        # 502 is the browser failing a step, documented: behind the dead proxy every page load fails so.
        f"[checks.not_a_server_error]\nexpected-statuses = {json.dumps(NOT_SERVER_ERRORS)}\n"
        # 413 and 414 refuse too: a body, or a request line and headers, past the worker's limits.
        f"[checks.negative_data_rejection]\nexpected-statuses = {json.dumps(REFUSALS)}\n"
    )
    command = [
        sys.executable, "-m", "schemathesis.cli",
        "--config-file", str(config),
        "run", str(schema_file),
        "--url", worker.base_url,
        "--checks", ",".join(FUZZ_CHECKS),
        "--exclude-checks", ",".join(FUZZ_EXCLUDED_CHECKS),
        "--phases", "examples,coverage,fuzzing",
        "--max-examples", str(examples),
        "--seed", FUZZ_SEED,
        "--workers", "1",
        "--request-timeout", "30",
        "--no-color",
        *selection,
    ]  # fmt: skip
    env = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": "tests.support.schema_hooks",
        "PYTHONPATH": str(ROOT),
        "NO_PROXY": "127.0.0.1,localhost",  # the worker is on loopback, whatever proxy the environment names
    }
    # Run in the test's own directory: Hypothesis keeps its files where it runs.
    return subprocess.run(command, check=False, cwd=workdir, env=env, capture_output=True, text=True, timeout=600)


def test_schemathesis_finds_no_server_error_and_no_nonconforming_answer(
    worker: WorkerProcess, document: dict, tmp_path: Path
):
    schema_file = tmp_path / "schema.json"
    derived = action_operations(document)  # both methods listed: the Allow header check reads them
    schema_file.write_text(json.dumps({**document, "paths": {**document["paths"], **derived}}))
    began = time.monotonic()
    # Leases last: a lease the fuzzer takes on main (up to 600 s) would turn
    # every later call on main into a 423 and hide the answers behind it.
    actions = f"^/api/v1/{FUZZ_PAGE}/(plugin|primitive)/"
    runs = []
    for selection, examples in (
        (("--exclude-path-regex", f"/lease$|{actions}"), FUZZ_EXAMPLES),
        # Not FLAKY: its 5xx are its answers, no server error of ours.
        (("--include-path-regex", actions, "--exclude-path-regex", f"{FLAKY}$",
          *(() if "get" in ACTION_FUZZ_METHODS else ("--exclude-method", "GET"))), ACTION_FUZZ_EXAMPLES),
        (("--include-path-regex", "/lease$"), FUZZ_EXAMPLES),
    ):
        started = time.monotonic()
        runs.append(run_schemathesis(worker, schema_file, tmp_path, *selection, examples=examples))
        print(f"schemathesis {selection[1]}: {time.monotonic() - started:.1f} s")
    for run in runs:
        summary = run.stdout[-12000:]
        assert run.returncode == 0, f"schemathesis failed (seed {FUZZ_SEED}):\n{summary}\n{run.stderr[-4000:]}"
        cases = re.search(r"\d+ generated, \d+ passed", run.stdout)
        assert cases, summary
        print(f"schemathesis: {cases.group()}")
    # Every operation of the document was run (the lease's two last, the
    # others first), and every action's own operation but demo/flaky's.
    operations = [(path, method) for path, methods in document["paths"].items() for method in methods]
    leases = [(path, method) for path, method in operations if path.endswith("/lease")]
    assert len(operations) >= 39 and len(leases) == 2
    fuzzed = sum(
        1 for path, methods in derived.items() for method in methods
        if method in ACTION_FUZZ_METHODS and not path.endswith(FLAKY)
    )
    for run, tested in zip(runs, (len(operations) - len(leases), fuzzed, len(leases)), strict=True):
        assert re.search(rf"\bTested: {tested}\b", run.stdout), run.stdout[-3000:]
    print(f"schemathesis: {time.monotonic() - began:.1f} s, seed {FUZZ_SEED}, {FUZZ_EXAMPLES}/{ACTION_FUZZ_EXAMPLES} examples")
    # No view raised out to the envelope's last resort over the whole module.
    assert "unexpected error in" not in worker.log(), worker.log()
