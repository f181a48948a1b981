"""The DRF layer every /api/v1 view stands on (core/auth.py, core/rest.py),
in process: the bearer key's authentication class, the body parser, and the
one exception handler that answers every failure with the envelope."""

from __future__ import annotations

import json
import logging
import random
import re

import pytest
from django.core.exceptions import TooManyFieldsSent
from django.http import Http404
from rest_framework import exceptions

from core.api import ApiError
from core.rest import ApiView, NoRoute, json_response
from jobs.options import TTL_PATTERN
from jobs.starting import ttl_pattern
from tests.support.runtime import RuntimeRequestFactory
from worker.runtime import Runtime

KEY = "rest-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
# Every request carries a runtime, as the worker's do: a request with a key
# takes its turn in the runtime's wrong keys (core/wrong_keys.py).
factory = RuntimeRequestFactory(Runtime())


@pytest.fixture(autouse=True)
def key(settings):
    settings.PENELOPE_KEY = KEY
    settings.KEY_REFUSAL_S = 0  # a wrong key's turn: tests/test_wrong_keys.py


class Echo(ApiView):
    """Answers the body it was sent; raises what `?raise=` names."""

    async def get(self, request, page_id: str | None = None):
        failure = FAILURES.get(request.query_params.get("raise", ""))
        if failure is not None:
            raise failure()
        return json_response({"success": True, "page_id": page_id, "query": dict(request.query_params.items())})

    async def post(self, request, page_id: str | None = None):
        return json_response({"success": True, "page_id": page_id, "body": request.data})


FAILURES = {
    "api-error": lambda: ApiError(409, "Busy now."),
    "api-error-own-page": lambda: ApiError(423, "Leased.", "other"),
    "http404": lambda: Http404("gone"),
    "too-many": lambda: TooManyFieldsSent("too many"),
    "throttled": lambda: exceptions.Throttled(),
    "bug": lambda: KeyError("a bug"),
}
echo = Echo.as_view()


async def call(method: str, path: str = "/api/v1/main/echo", *, headers=None, view=echo, page_id="main", **kwargs):
    request = getattr(factory, method)(path, headers=AUTH if headers is None else headers, **kwargs)
    response = await view(request, page_id=page_id)
    return response, json.loads(response.content) if response.content else None


# --- the key -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {KEY}"}, {"Authorization": KEY}, {"Authorization": f"Bearer {KEY}x"}],
)
async def test_a_missing_or_wrong_key_is_401_with_the_realm(headers):
    response, body = await call("get", headers=headers)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="penelope"'
    assert body == {"success": False, "error": "A valid key is required: send Authorization: Bearer <PENELOPE_KEY>.", "page_id": None}


async def test_the_key_is_accepted_in_any_case_of_the_scheme():
    for scheme in ("Bearer", "bearer", "BEARER"):
        response, body = await call("get", headers={"Authorization": f"{scheme} {KEY}"})
        assert response.status_code == 200, scheme
        assert body["page_id"] == "main"


async def test_a_worker_without_a_key_accepts_none(settings):
    settings.PENELOPE_KEY = ""
    response, _ = await call("get", headers={"Authorization": "Bearer "})
    assert response.status_code == 401


async def test_the_key_is_checked_before_the_method():
    response, _ = await call("put", headers={})
    assert response.status_code == 401


# --- the envelope for every failure ---------------------------------------------------------


async def test_an_api_error_takes_the_routes_page_unless_it_names_its_own():
    response, body = await call("get", data={"raise": "api-error"})
    assert (response.status_code, body) == (409, {"success": False, "error": "Busy now.", "page_id": "main"})
    response, body = await call("get", data={"raise": "api-error-own-page"})
    assert (response.status_code, body["page_id"]) == (423, "other")


@pytest.mark.parametrize("method", ["put", "patch", "delete", "head", "options", "trace"])
async def test_another_method_is_405_with_allow(method):
    response, body = await call(method)
    assert response.status_code == 405
    assert response["Allow"] == "GET, POST"
    # HEAD included: the view answers the same envelope.
    assert body == {"success": False, "error": f"Method {method.upper()} is not allowed here; use GET, POST.", "page_id": "main"}


async def test_too_many_parameters_is_400():
    response, body = await call("get", data={"raise": "too-many"})
    assert response.status_code == 400
    assert body["error"] == "The request has more than 1000 parameters (DATA_UPLOAD_MAX_NUMBER_FIELDS)."


async def test_not_found_and_drfs_own_errors_keep_their_status():
    response, body = await call("get", data={"raise": "http404"})
    assert (response.status_code, body["success"], body["page_id"]) == (404, False, "main")
    response, body = await call("get", data={"raise": "throttled"})
    assert response.status_code == 429 and body["success"] is False and body["error"]


async def test_an_unexpected_error_is_500_and_goes_to_the_log_only(caplog):
    with caplog.at_level(logging.ERROR, logger="penelope.api"):
        response, body = await call("get", data={"raise": "bug"})
    assert response.status_code == 500
    assert body == {"success": False, "error": "The worker hit an unexpected error; the details are in its log.", "page_id": "main"}
    assert "a bug" not in response.content.decode()
    assert any("a bug" in (record.exc_text or "") or record.exc_info for record in caplog.records)


async def test_a_value_json_cannot_carry_is_500_not_a_broken_body():
    class NotANumber(ApiView):
        async def get(self, request, page_id):
            return json_response({"success": True, "page_id": page_id, "value": float("nan")})

    response, body = await call("get", view=NotANumber.as_view())
    assert response.status_code == 500 and body["success"] is False


async def test_every_answer_is_compact_json_with_its_length():
    response, _ = await call("get", data={"q": "é"})
    assert response["Content-Type"] == "application/json"
    assert int(response["Content-Length"]) == len(response.content)
    assert response["X-Frame-Options"] == "DENY"
    assert b'"query":{"q":"\\u00e9"}' in response.content  # compact, non-ASCII escaped
    assert "Allow" not in response and "Vary" not in response


# --- the body -------------------------------------------------------------------------------


@pytest.mark.parametrize("content_type", ["application/json", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data"])
async def test_the_body_is_json_whatever_the_content_type(content_type):
    response, body = await call("post", data=b'{"a": [1, 2]}', content_type=content_type)
    assert response.status_code == 200
    assert body["body"] == {"a": [1, 2]}


@pytest.mark.parametrize(
    ("raw", "status", "error"),
    [
        (b"", 200, None),
        (b"  \n", 200, None),
        (b"{", 422, "The request body is not valid JSON."),
        (b"[" * 100_000, 422, "The request body is not valid JSON."),
        (b"[1]", 400, "The request body must be a JSON object."),
        (b'"text"', 400, "The request body must be a JSON object."),
    ],
)
async def test_bodies_that_are_not_an_object(raw, status, error):
    response, body = await call("post", data=raw, content_type="application/json")
    assert response.status_code == status
    if error is None:
        assert body["body"] == {}
    else:
        assert body == {"success": False, "error": error, "page_id": "main"}


async def test_a_body_past_the_limit_is_413(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    response, body = await call("post", data=json.dumps({"a": "x" * 200}).encode(), content_type="application/json")
    assert response.status_code == 413
    assert body["error"] == "The request body is larger than the worker accepts."


async def test_a_body_without_a_content_length_is_still_read():
    request = factory.post("/api/v1/main/echo", data=b'{"a": 1}', content_type="application/json", headers=AUTH)
    del request.META["CONTENT_LENGTH"]  # as a chunked request arrives
    response = await echo(request, page_id="main")
    assert json.loads(response.content)["body"] == {"a": 1}


# --- no route -------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "POST", "DELETE", "OPTIONS", "PROPFIND"])
async def test_no_route_is_404_for_any_method_but_only_with_the_key(method):
    view = NoRoute.as_view()
    request = factory.generic(method, "/api/v1/a/b/c/d", headers=AUTH)
    response = await view(request)
    assert response.status_code == 404
    assert json.loads(response.content) == {"success": False, "error": "No route /api/v1/a/b/c/d.", "page_id": None}
    response = await view(factory.generic(method, "/api/v1/a/b/c/d"))
    assert response.status_code == 401


# --- X-Result-Ttl: the schema's pattern is the server's rule ----------------------------------


@pytest.mark.parametrize("most", [600, 1, 5, 10, 99, 100, 3600])
def test_the_ttl_pattern_accepts_exactly_what_the_server_does(most):
    pattern = re.compile(f"^{ttl_pattern(most)}$")
    rng = random.Random(most)
    samples = ["0", "0.0", ".0", ".", "", "1e2", "5e-324", "-1", "+1", "1_0", "٣", str(most), f"{most}.0", f"{most}.01", str(most + 1)]
    samples += [f"{rng.uniform(0, most * 1.5):.{rng.randint(0, 4)}f}" for _ in range(2000)]
    samples += [("0" * rng.randint(0, 2)) + str(rng.randint(0, most * 2)) for _ in range(2000)]
    for sample in samples:
        server = bool(TTL_PATTERN.fullmatch(sample)) and 0 < float(sample) <= most
        assert bool(pattern.match(sample)) == server, sample
