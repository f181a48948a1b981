"""Both webhook signatures on every attempt, checked by code that is not the
worker's: the `standardwebhooks` verifier, HMAC by hand, and the guide's
`verify()`."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from harness.receiver import Receiver
from harness.worker import free_port, wait_until
from tests.test_jobs import verify

ENV = {"WEBHOOK_ATTEMPTS_S": "0,0.3", "WEBHOOK_TIMEOUT_S": "0.5"}
RECEIVER = Path(__file__).resolve().parents[1] / "docs" / "guides" / "webhook_receiver.py"
SECRET_A = "whsec_" + base64.b64encode(bytes(range(32))).decode()
SECRET_B = "whsec_" + base64.b64encode(bytes(range(100, 124))).decode()


@pytest.fixture(scope="module")
def receiver():
    with Receiver() as running:
        yield running


def by_hand(secret: str, msg_id: str, timestamp: str, body: bytes) -> str:
    """The Standard Webhooks signature, written from the specification."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    digest = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def webhook_of(worker, receiver, path: str) -> list:
    with worker.client() as api:
        response = api.post("/main/plugin/web/state", headers={"X-Callback-Url": receiver.url + path})
        assert response.status_code == 202
        job_id = response.json()["job_id"]
    hits = wait_until(lambda: receiver.received(path), what="the webhook")
    assert all(hit.headers["webhook-id"] == job_id for hit in hits)
    return hits


def test_a_generated_secret_signs_every_attempt_both_ways(make_worker, receiver):
    worker = make_worker(ENV)
    secret = (worker.store / "webhook_secret").read_text().strip()
    assert secret.startswith("whsec_") and len(base64.b64decode(secret[6:])) >= 24
    assert oct((worker.store / "webhook_secret").stat().st_mode & 0o777) == "0o600"
    assert f"Generated WEBHOOK_SECRET: it is kept in {worker.store / 'webhook_secret'}" in worker.log()
    assert secret not in worker.log() and secret[6:] not in worker.log()
    path = "/500,200/signed"
    webhook_of(worker, receiver, path)
    hits = wait_until(lambda: len(receiver.received(path)) == 2 and receiver.received(path), what="two attempts")
    for hit in hits:
        headers = hit.headers
        assert verify(hit.body, headers["X-Penelope-Signature"], worker.key)  # the guide's check still holds
        assert Webhook(secret).verify(hit.body, headers) == json.loads(hit.body)
        assert headers["webhook-signature"] == by_hand(secret, headers["webhook-id"], headers["webhook-timestamp"], hit.body)
        assert abs(int(headers["webhook-timestamp"]) - hit.at) < 5
        with pytest.raises(WebhookVerificationError):  # a body changed in transit
            Webhook(secret).verify(hit.body + b" ", headers)
        with pytest.raises(WebhookVerificationError):  # a receiver with the API key as its secret
            Webhook("whsec_" + base64.b64encode(worker.key.encode()).decode()).verify(hit.body, headers)
    # The same id on every attempt, each with its own timestamp (the retry came later).
    assert hits[0].headers["webhook-id"] == hits[1].headers["webhook-id"]
    assert int(hits[1].headers["webhook-timestamp"]) >= int(hits[0].headers["webhook-timestamp"])


def test_a_replayed_delivery_is_refused_by_its_timestamp(make_worker, receiver):
    worker = make_worker({**ENV, "WEBHOOK_SECRET": SECRET_A})
    hit = webhook_of(worker, receiver, "/200/replay")[0]
    msg_id = hit.headers["webhook-id"]
    Webhook(SECRET_A).verify(hit.body, hit.headers)
    # The same delivery, seen six minutes after it was signed: past the 5-minute tolerance.
    old = str(int(time.time()) - 360)
    replayed = {**hit.headers, "webhook-timestamp": old, "webhook-signature": by_hand(SECRET_A, msg_id, old, hit.body)}
    with pytest.raises(WebhookVerificationError, match="too old"):
        Webhook(SECRET_A).verify(hit.body, replayed)
    # And a timestamp moved forward without the secret no longer matches its signature.
    moved = {**hit.headers, "webhook-timestamp": str(int(hit.headers["webhook-timestamp"]) + 1)}
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        Webhook(SECRET_A).verify(hit.body, moved)


def test_during_a_rotation_both_secrets_sign(make_worker, receiver):
    worker = make_worker({**ENV, "WEBHOOK_SECRET": f"{SECRET_A} {SECRET_B}"})
    assert not (worker.store / "webhook_secret").exists()  # set in the environment: nothing generated
    hit = webhook_of(worker, receiver, "/200/rotation")[0]
    signatures = hit.headers["webhook-signature"].split(" ")
    assert signatures == [
        by_hand(secret, hit.headers["webhook-id"], hit.headers["webhook-timestamp"], hit.body) for secret in (SECRET_A, SECRET_B)
    ]
    for secret in (SECRET_A, SECRET_B):  # a receiver on the old secret, and one on the new
        Webhook(secret).verify(hit.body, hit.headers)


@pytest.mark.parametrize(
    "secret",
    ["not-a-secret", "whsec_" + base64.b64encode(bytes(23)).decode(), "whsec_!!!!", f"{SECRET_A} {SECRET_B} {SECRET_A}"],
)
def test_a_malformed_secret_stops_the_start_with_one_sentence(make_worker, secret):
    worker = make_worker({**ENV, "WEBHOOK_SECRET": secret}, start=False)
    with pytest.raises(RuntimeError):
        worker.start(timeout=30)
    assert "WEBHOOK_SECRET" in worker.log() and "Traceback" not in worker.log()


@pytest.mark.parametrize("scheme", ["standard", "guide", "wrong secret"])
def test_the_docs_receiver_checks_either_scheme(make_worker, tmp_path, scheme):
    worker = make_worker({**ENV, "WEBHOOK_SECRET": SECRET_A})
    port = free_port()
    env = {key: value for key, value in os.environ.items() if key not in ("PENELOPE_KEY", "WEBHOOK_SECRET")}
    env.update({"standard": {"WEBHOOK_SECRET": SECRET_A}, "guide": {"PENELOPE_KEY": worker.key},
                "wrong secret": {"WEBHOOK_SECRET": SECRET_B}}[scheme])
    stored = tmp_path / "received"
    receiver = subprocess.Popen(
        [sys.executable, str(RECEIVER), str(port), str(stored)], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert receiver.stdout.readline().startswith("receiving on")
        with worker.client() as api:
            job_id = api.post("/main/plugin/web/state", headers={"X-Callback-Url": f"http://127.0.0.1:{port}/hook"}).json()["job_id"]
            if scheme == "wrong secret":  # 401: a final answer, the job is given up at once
                wait_until(lambda: api.get(f"/jobs/{job_id}").status_code == 404, what="the job to be given up")
                assert not (stored / f"{job_id}.json").exists()
            else:
                wait_until(lambda: (stored / f"{job_id}.json").exists(), what="the receiver to store the job")
                assert json.loads((stored / f"{job_id}.json").read_text())["job_id"] == job_id
    finally:
        receiver.terminate()
        receiver.wait(10)
