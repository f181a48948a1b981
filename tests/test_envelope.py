"""One envelope for the worker and the waker (core/api.py): the body
parser, the renderer and the error answer both use, in process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import AsyncRequestFactory

from core.api import ApiError, error_response, json_response, read_json_object
from core.rest import represent
from core.shapes import ErrorEnvelope
from waker import supervisor as supervision
from waker.api import WakerError, error_body, waker_view

factory = AsyncRequestFactory()
ROOT = Path(__file__).resolve().parent.parent
WAKER_KEY = "envelope-test-key"
WAKER_AUTH = {"Authorization": f"Bearer {WAKER_KEY}"}


@pytest.fixture(autouse=True)
def waker_key(settings):
    settings.WAKER_KEY = WAKER_KEY


@pytest.fixture(autouse=True)
def waker_supervisor(settings, monkeypatch):
    """A supervisor of no persona, as `manage.py waker` sets one: its wrong
    keys' turns are the waker's (core/wrong_keys.py)."""
    settings.WAKER_FORK_WORKERS = False
    settings.KEY_REFUSAL_S = 0
    settings.KEY_REFUSAL_QUEUE = 16
    monkeypatch.setattr(supervision, "running", supervision.Supervisor([]))


@pytest.mark.parametrize("page_id", [None, "main"])
def test_the_envelope_is_what_its_schema_describes(page_id):
    """error_response writes `ApiError.envelope()` without the serializer;
    this holds the two together."""
    envelope = ApiError(409, "Page main is busy.", page_id).envelope()
    assert represent(ErrorEnvelope, envelope) == envelope
    assert list(envelope) == list(ErrorEnvelope().fields)


WAKER_ANSWER = """
import django
django.setup()
from waker.api import encode, error_body
import sys
sys.stdout.buffer.write(encode(error_body("No persona \\u00e9\\u2028.")))
"""


def test_the_waker_writes_its_answers_as_the_worker_does_on_its_own_settings():
    """The waker has no REST_FRAMEWORK settings, so DRF's UNICODE_JSON is on
    there; its answers are written as they always were (as json.dumps writes
    them), non-ASCII escaped, as the worker writes its own."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "penelope_site.waker_settings"}
    written = subprocess.run(
        [sys.executable, "-c", WAKER_ANSWER], env=env, cwd=ROOT, capture_output=True, check=True
    ).stdout
    expected = json.dumps(error_body("No persona \u00e9\u2028."), separators=(",", ":")).encode()
    assert written == expected == b'{"success":false,"error":"No persona \\u00e9\\u2028.","page_id":null}'
    assert json_response(error_body("No persona \u00e9\u2028.")).content == expected
    with pytest.raises(ValueError):
        json_response({"value": float("nan")})  # not JSON: a 500 with the envelope, never sent


def test_a_401_names_the_realm_of_who_refuses():
    worker = error_response(ApiError(401, "key"))
    assert worker["WWW-Authenticate"] == 'Bearer realm="penelope"'
    waker = error_response(WakerError(401, "key"), realm='Bearer realm="penelope-waker"')
    assert waker["WWW-Authenticate"] == 'Bearer realm="penelope-waker"'
    assert worker.content == waker.content == b'{"success":false,"error":"key","page_id":null}'
    assert worker["Content-Length"] == str(len(worker.content))


@waker_view("POST")
async def echo(request):
    return json_response({"success": True, "page_id": None, "body": read_json_object(request, server="waker")})


async def answer(body: bytes, **headers: str):
    response = await echo(factory.post("/api/v1/echo", data=body, content_type="text/plain", headers=headers))
    return response.status_code, json.loads(response.content)


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        (b"{", 422, "The request body is not valid JSON."),
        (b"[1]", 400, "The request body must be a JSON object."),
        (b"x" * 2000, 413, "The request body is larger than the waker accepts."),
    ],
)
async def test_the_waker_refuses_a_bad_body_with_the_worker_parser_in_its_own_words(settings, body, status, error):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    assert await answer(body, **WAKER_AUTH) == (status, {"success": False, "error": error, "page_id": None})


async def test_the_waker_reads_a_json_object_and_an_empty_body():
    assert await answer(b'{"force": true}', **WAKER_AUTH) == (
        200,
        {"success": True, "page_id": None, "body": {"force": True}},
    )
    assert await answer(b"  ", **WAKER_AUTH) == (200, {"success": True, "page_id": None, "body": {}})


async def test_the_waker_key_and_methods_come_first():
    status, body = await answer(b"{")
    assert status == 401 and body["error"] == "A valid key is required: send Authorization: Bearer <WAKER_KEY>."
    refused = await echo(factory.get("/api/v1/echo", headers=WAKER_AUTH))
    assert refused.status_code == 405 and refused["Allow"] == "POST"
    assert json.loads(refused.content)["error"] == "Method GET is not allowed here; use POST."
