"""The demo site's sign-in with its checkpoint, and `demo/sign-in`, which
asks a person to pass it: the site in-process, the whole loop against a real
worker with a second Chromium as the person, who reads the code in the demo
inbox and types it through the live view."""

from __future__ import annotations

import re

import httpx
import pytest

from demo_site import sign_in
from harness.worker import wait_until
from tests.support.live import click_and_type, fields_of, make_link, metric, pass_checkpoint, read_code, watch

# --- the site -----------------------------------------------------------------------------


@pytest.fixture
def client(runtime_client):
    return runtime_client


def code_of(response) -> str:
    return re.search(r'<strong id="code">(\d{6})</strong>', response.content.decode()).group(1)


def test_a_sign_in_stops_at_a_checkpoint_whose_code_is_in_the_inbox(client):
    form = client.get("/demo/sign-in/")
    assert form.status_code == 200 and 'name="handle"' in form.content.decode()
    assert "No code yet" in client.get("/demo/mail-inbox/alice/").content.decode()
    sent = client.post("/demo/sign-in/", {"handle": "alice"})
    assert sent.status_code == 303 and sent["Location"] == "/demo/check-point/alice/"
    checkpoint = client.get("/demo/check-point/alice/").content.decode()
    assert 'data-demo-page="checkpoint"' in checkpoint and 'name="code"' in checkpoint
    code = code_of(client.get("/demo/mail-inbox/alice/"))
    wrong = client.post("/demo/check-point/alice/", {"code": "x" + code[1:]})
    assert wrong.status_code == 403 and "That code is not right." in wrong.content.decode()
    passed = client.post("/demo/check-point/alice/", {"code": code})  # still good after one wrong try
    assert passed.status_code == 303 and passed["Location"] == "/demo/signed-in/"
    cookie = passed.cookies["demo_signed_in"]
    assert cookie.value == "alice" and cookie["httponly"] and cookie["path"] == "/demo/" and cookie["samesite"] == "Lax"
    home = client.get("/demo/signed-in/").content.decode()
    assert 'data-demo-page="signed-in"' in home and "Signed in as @alice" in home
    assert client.post("/demo/check-point/alice/", {"code": code}).status_code == 404  # used up


def test_five_wrong_codes_drop_it_and_a_missing_account_gets_none(client, runtime):
    assert client.post("/demo/sign-in/", {"handle": "ghost"}).status_code == 404
    assert "ghost" not in runtime.demo_codes.pending
    client.post("/demo/sign-in/", {"handle": "bob"})
    code = code_of(client.get("/demo/mail-inbox/bob/"))
    for _ in range(sign_in.MAX_TRIES):
        client.post("/demo/check-point/bob/", {"code": "000000" if code != "000000" else "111111"})
    assert client.post("/demo/check-point/bob/", {"code": code}).status_code == 404
    assert "Sign in again" in client.get("/demo/check-point/bob/").content.decode()


def test_the_fifth_wrong_code_says_to_sign_in_again_and_an_old_code_expires(client, monkeypatch):
    client.post("/demo/sign-in/", {"handle": "carol"})
    code = code_of(client.get("/demo/mail-inbox/carol/"))
    wrong = "000000" if code != "000000" else "111111"
    for _ in range(sign_in.MAX_TRIES - 1):
        assert "That code is not right." in client.post("/demo/check-point/carol/", {"code": wrong}).content.decode()
    fifth = client.post("/demo/check-point/carol/", {"code": wrong}).content.decode()
    assert "Sign in again" in fifth and 'name="code"' not in fifth
    monkeypatch.setattr(sign_in, "CODE_TTL_S", -1)  # every code sent now is already past its ten minutes
    client.post("/demo/sign-in/", {"handle": "carol"})
    assert "No code yet" in client.get("/demo/mail-inbox/carol/").content.decode()
    assert client.post("/demo/check-point/carol/", {"code": "123456"}).status_code == 404


def test_only_the_forms_take_posts_and_the_setting_turns_them_off(client, settings):
    assert client.post("/demo/alice/").status_code == 405
    assert client.post("/demo/mail-inbox/alice/").status_code == 405
    assert client.get("/demo/signed-in/")["Location"] == "/demo/sign-in/"  # not signed in
    settings.PENELOPE_DEMO = False
    for path in ("sign-in/", "check-point/alice/", "mail-inbox/alice/", "signed-in/"):
        assert client.get("/demo/" + path).status_code == 404


def test_pending_codes_are_bounded():
    codes = sign_in.SignInCodes()
    for number in range(sign_in.MAX_PENDING + 5):
        codes.send_code(f"user{number}")
    assert len(codes.pending) == sign_in.MAX_PENDING and "user0" not in codes.pending


# --- demo/sign-in, a person in the loop ----------------------------------------------------


def start_sign_in(api: httpx.Client, handle: str, **params) -> str:
    started = api.post("/main/plugin/demo/sign-in", json={"handle": handle, **params}, headers={"X-Result-Ttl": "60"})
    assert started.status_code == 202, started.text
    return started.json()["job_id"]


def human_of(api: httpx.Client, job_id: str) -> dict:
    return wait_until(lambda: api.get(f"/jobs/{job_id}").json().get("human"), what="the checkpoint's question")


def test_a_person_passes_the_checkpoint_through_the_live_view(api, worker, person):
    job_id = start_sign_in(api, "carol")
    human = human_of(api, job_id)
    assert "/demo/mail-inbox/carol/" in human["reason"]
    # First through a view-only link: nothing typed arrives (else the code
    # would be in the field twice, and the checkpoint would refuse it).
    code = read_code(person, worker.base_url, "carol")
    watcher = watch(person, worker.base_url, make_link(api)["url"])
    click_and_type(watcher, fields_of(person, watcher, f"{worker.base_url}/demo/check-point/carol/")["code"], code)
    watcher.close()
    wait_until(lambda: metric(api, "penelope_live_viewers") == 0, what="the view-only viewer gone")
    pass_checkpoint(person, worker.base_url + human["live_url"], worker.base_url, "carol")
    ended = api.get(f"/jobs/{job_id}", params={"wait": 30}).json()
    assert ended["status"] == 200, ended
    assert ended["result"] == {"success": True, "page_id": "main", "handle": "carol", "signed_in": True, "asked_human": True}


def test_give_up_and_no_answer_end_the_sign_in_as_the_plugin_says(api, worker, person):
    job_id = start_sign_in(api, "dave")
    tab = watch(person, worker.base_url, human_of(api, job_id)["live_url"])
    tab.click("#give-up")
    gave_up = api.get(f"/jobs/{job_id}", params={"wait": 30}).json()
    assert gave_up["status"] == 409 and gave_up["result"]["error"] == "A person gave up the checkpoint of dave."
    tab.close()
    job_id = start_sign_in(api, "erin", wait_s=1)
    timed_out = api.get(f"/jobs/{job_id}", params={"wait": 30}).json()
    assert timed_out["status"] == 504 and "within 1 s" in timed_out["result"]["error"]


def test_done_without_the_code_is_refused_and_a_missing_account_is_404(api, worker, person):
    job_id = start_sign_in(api, "alice")
    tab = watch(person, worker.base_url, human_of(api, job_id)["live_url"])
    tab.click("#done")
    ended = api.get(f"/jobs/{job_id}", params={"wait": 30}).json()
    assert ended["status"] == 409 and "was not passed" in ended["result"]["error"]
    tab.close()
    missing = api.post("/main/plugin/demo/sign-in", json={"handle": "ghost"}, headers={"X-Result-Ttl": "60"}).json()
    assert api.get(f"/jobs/{missing['job_id']}", params={"wait": 30}).json()["status"] == 404
