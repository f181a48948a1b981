"""Flows that use a persona's credentials, against a real worker: a loopback
sign-in form that checks a password and a one-time code against its own
clock, filled by `web/fill-credential`; the origin rule, for the page and
for every frame a keystroke could reach (another loopback origin that sends
home whatever is typed into it); and a search of
everything the worker keeps or shows (answers, the request log, jobs and
re-runs, every X-Debug artifact with the trace's zip members, the worker's
output, every byte of the store) for the planted password and secret."""

from __future__ import annotations

import io
import sqlite3
import zipfile
from pathlib import Path

import pyotp
import pytest

from harness.worker import WorkerProcess, wait_until
from tests.conftest import TEST_PLUGINS, worker_env
from tests.support.sign_in_site import SignInSite, TellingSite

PASSWORD = "Planted-pa55word-7Qx"
SECRET = pyotp.random_base32()
USERNAME = "robin"
FIELDS = {"username_selector": "#user", "password_selector": "#pass", "totp_selector": "#otp", "submit_selector": "#go"}


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory):
    plugins = f"{TEST_PLUGINS},tests.support.credential_plugins"  # credtest/type-password
    env = worker_env(REQUEST_LOG_FLUSH_S="0.05", PENELOPE_PLUGINS=plugins)
    running = WorkerProcess(tmp_path_factory.mktemp("store"), env=env).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def form():
    with SignInSite(USERNAME, PASSWORD, SECRET) as running:
        yield running


@pytest.fixture
def credential(api, form):
    body = {"url": form.url, "username": USERNAME, "password": PASSWORD, "totp_secret": SECRET}
    assert api.put("/credentials/robin", json=body).status_code in (200, 201)
    return "robin"


def open_form(api, url: str) -> None:
    opened = api.post("/main/plugin/web/open", json={"url": url})
    assert opened.status_code == 200, opened.text


def leaked(data: bytes) -> list[str]:
    return [name for name, secret in (("password", PASSWORD), ("totp secret", SECRET)) if secret.encode() in data]


def log_rows(worker: WorkerProcess, route: str) -> list[tuple]:
    with sqlite3.connect(worker.store / "penelope.db") as db:
        rows = db.execute(
            "select path, page_id, job_id, status from activity_requestlogentry where route = ? order by id", (route,)
        ).fetchall()
    db.close()
    return rows


def test_fill_credential_signs_in_and_answers_no_value(api, worker, form, credential):
    open_form(api, f"{form.url}/sign-in")
    signed_before = form.signed_in
    filled = api.post("/main/plugin/web/fill-credential", json={"credential": credential, **FIELDS})
    assert filled.status_code == 200, filled.text
    body = filled.json()
    assert body["filled"] == ["username", "password", "totp"] and body["submitted"] is True
    assert body["left_the_form"] is True and body["url"] == f"{form.url}/welcome"
    assert form.signed_in == signed_before + 1  # the site took the password and the code, by its own clock
    assert not leaked(filled.content)
    used = wait_until(lambda: log_rows(worker, "credentials/used"), what="the use's row")
    assert used[-1] == (f"robin by web/fill-credential on {form.url}", "main", None, None)


def test_a_credential_is_refused_off_its_origin_and_nothing_is_typed(api, worker, form, credential, site):
    open_form(api, f"{site.url}/list?page=1&pages=2")  # another port: another origin
    rows_before = len(log_rows(worker, "credentials/used"))
    refused = api.post("/main/plugin/web/fill-credential", json={"credential": credential, **FIELDS})
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert form.url in error and site.url in error and not leaked(refused.content)
    assert len(log_rows(worker, "credentials/used")) == rows_before  # refused: not used
    assert api.get("/credentials/robin").json()["used_at"] is not None  # from the earlier test, not this one


def test_a_form_that_stays_after_its_submit_is_emptied_and_x_debug_records_no_value(api, worker, form, credential):
    wrong = {"url": form.url, "username": USERNAME, "password": PASSWORD + "-old", "totp_secret": SECRET}
    assert api.put("/credentials/stale", json=wrong).status_code in (200, 201)
    open_form(api, f"{form.url}/sign-in")
    refused_before = form.refused
    answer = api.post(
        "/main/plugin/web/fill-credential", json={"credential": "stale", **FIELDS}, headers={"X-Debug": "always"}
    )
    assert answer.status_code == 200, answer.text
    assert form.refused == refused_before + 1
    artifacts = answer.json()["artifacts"]
    for name, link in artifacts.items():
        if not isinstance(link, dict):
            continue
        data = api.get(worker.base_url + link["url"]).content
        assert not leaked(data), name
        if name == "trace":
            with zipfile.ZipFile(io.BytesIO(data)) as trace:
                for member in trace.namelist():
                    assert not leaked(trace.read(member)), member
    # What the page holds now, read by a recorded step: no value is left in the form.
    values = api.post("/main/primitive/evaluate", json={
        "expression": "[...document.querySelectorAll('input')].map(i => i.value).join('|')",
    }).json()["value"]
    assert PASSWORD not in values


def test_a_form_whose_page_stays_is_emptied_after_its_submit(api, form, credential):
    open_form(api, f"{form.url}/scripted")
    signed_before = form.signed_in
    filled = api.post("/main/plugin/web/fill-credential", json={"credential": credential, **FIELDS})
    assert filled.status_code == 200, filled.text
    assert filled.json()["left_the_form"] is False
    wait_until(lambda: form.signed_in == signed_before + 1, what="the scripted sign-in")
    values = api.post("/main/primitive/evaluate", json={
        "expression": "[...document.querySelectorAll('input')].map(i => i.value).join('|')",
    }).json()["value"]
    assert values == "||"  # emptied: the next recorded step's snapshot holds no value


def test_a_form_that_submits_itself_once_its_code_is_typed_is_not_pressed(api, form, credential):
    """The code field submits its form when its sixth digit arrives: the
    form is leaving before the button's turn, so the button is not pressed,
    and the answer says the form was left."""
    form.pages["/self-submitting"] = (
        '<title>Sign in</title><form id=form method=post action="/sign-in">'
        "<input id=user name=user><input id=pass name=pass type=password><input id=otp name=otp>"
        "<button id=go>Sign in</button></form>"
        "<script>otp.addEventListener('input', () => otp.value.length === 6 && form.submit());</script>"
    )
    open_form(api, f"{form.url}/self-submitting")
    signed_before = form.signed_in
    filled = api.post("/main/plugin/web/fill-credential", json={"credential": credential, **FIELDS})
    assert filled.status_code == 200, filled.text
    body = filled.json()
    assert body["filled"] == ["username", "password", "totp"] and body["submitted"] is False
    assert body["left_the_form"] is True
    wait_until(lambda: form.signed_in == signed_before + 1, what="the form's own submit")


def test_a_job_and_its_rerun_hold_the_name_only(api, worker, form, credential):
    open_form(api, f"{form.url}/sign-in")
    started = api.post("/main/plugin/web/fill-credential", json={"credential": credential, **FIELDS}, headers={"X-Result-Ttl": "600"})
    assert started.status_code == 202, started.text
    job_id = started.json()["job_id"]
    ended = wait_until(lambda: (body := api.get(f"/jobs/{job_id}").json())["state"] == "done" and body, what="the job")
    assert ended["result"]["left_the_form"] is True
    used = wait_until(lambda: [row for row in log_rows(worker, "credentials/used") if row[2] == job_id], what="its row")
    assert used[0][0] == f"robin by web/fill-credential on {form.url}"
    open_form(api, f"{form.url}/sign-in")
    rerun = api.post(f"/jobs/{job_id}/rerun")
    assert rerun.status_code == 202, rerun.text
    wait_until(lambda: api.get(f"/jobs/{rerun.json()['job_id']}").json()["state"] == "done", what="the re-run")


def test_demo_sign_in_signs_in_unattended_with_a_credential(api, worker):
    from demo_site.accounts import SECURE_HANDLE, SECURE_PASSWORD, SECURE_TOTP_SECRET

    body = {"url": worker.base_url, "username": SECURE_HANDLE, "password": SECURE_PASSWORD, "totp_secret": SECURE_TOTP_SECRET}
    assert api.put("/credentials/demo", json=body).status_code in (200, 201)
    signed = api.post("/main/plugin/demo/sign-in", json={"handle": SECURE_HANDLE, "credential": "demo"})
    assert signed.status_code == 200, signed.text
    assert signed.json() == {"success": True, "page_id": "main", "handle": SECURE_HANDLE, "signed_in": True, "asked_human": False}
    assert api.post("/main/primitive/evaluate", json={"expression": "location.pathname"}).json()["value"] == "/demo/signed-in/"


def report(api, elsewhere: TellingSite, pages: set[str]) -> dict[str, str]:
    """What the other origin's fields hold, by the path of their page: every
    frame of the page (or the page itself, when it has none) is asked by a
    message, and each of `pages` sends its field's value home."""
    ask = "(frames.length ? [...Array(frames.length).keys()].map(i => frames[i]) : [window]).forEach(w => w.postMessage('', '*'))"

    def answered() -> dict[str, str] | None:
        said = {report["at"]: report["v"] for report in elsewhere.said("/report")}
        if set(said) >= pages:
            return said
        api.post("/main/primitive/evaluate", json={"expression": ask})  # a page still loading misses it: asked again
        return None

    return wait_until(answered, what="the other origin's report")


@pytest.fixture(params=["127.0.0.1", "localhost"])
def elsewhere(request):
    """Another origin: another port of the form's host (the same site, so the
    same renderer), or `localhost` (another site, so a process of its own)."""
    with TellingSite(request.param) as running:
        yield running


def test_a_form_in_a_frame_of_its_own_origin_is_filled(api, form, credential):
    form.pages["/framed"] = '<title>Framed</title><iframe id=login src="/sign-in"></iframe>'
    open_form(api, f"{form.url}/framed")
    signed_before = form.signed_in
    framed = {"credential": credential, "frame_selector": "#login", **FIELDS}
    filled = api.post("/main/plugin/web/fill-credential", json=framed)
    assert filled.status_code == 200, filled.text
    assert filled.json() == {
        "success": True,
        "page_id": "main",
        "credential": "robin",
        "filled": ["username", "password", "totp"],
        "submitted": True,
        "left_the_form": True,
        "url": f"{form.url}/framed",
    }
    assert form.signed_in == signed_before + 1


def test_a_frame_of_another_origin_is_refused_and_its_server_gets_nothing(api, form, credential, elsewhere):
    form.pages["/embeds"] = (
        f'<title>Embeds</title><input id=user><iframe id=other src="{elsewhere.url}/frame"></iframe>'
        f'<object id=obj type=text/html data="{elsewhere.url}/object"></object>'
        f'<embed id=emb type=text/html src="{elsewhere.url}/embed">'
        '<iframe id=boxed sandbox src="/sign-in"></iframe>'  # the form's own address, in a sandbox: no origin
    )
    open_form(api, f"{form.url}/embeds")
    asks = [  # the audit's request (the iframe as the field), the other elements that hold a document, ...
        ({"password_selector": "#other"}, 422, "the password field (#other) is an iframe"),
        ({"password_selector": "#obj"}, 422, "the password field (#obj) is an object"),
        ({"username_selector": "#user", "password_selector": "#emb"}, 422, "the password field (#emb) is an embed"),
        # ... the frame named as the form's, and a selector of Playwright's that enters it
        ({"frame_selector": "#other", "password_selector": "#field"}, 403, f"{form.url}; the frame #other is on "),
        ({"password_selector": "#other >> internal:control=enter-frame >> #field"}, 422, "is not a CSS selector"),
        ({"frame_selector": "#boxed", "password_selector": "#pass"}, 403, f"{form.url}; the frame #boxed is on "),
    ]
    for params, status, said in asks:
        refused = api.post("/main/plugin/web/fill-credential", json={"credential": credential, **params})
        assert refused.status_code == status, (params, refused.text)
        assert said in refused.json()["error"] and not leaked(refused.content), refused.text
    # A plugin of one's own that leaves fill_form's refusal to the framework: the same 403.
    own = {"credential": credential, "frame": "#other", "password_selector": "#field"}
    refused = api.post("/main/plugin/credtest/type-password", json=own)
    assert refused.status_code == 403, refused.text
    assert f"{form.url}; the frame #other is on " in refused.json()["error"] and not leaked(refused.content)
    said = report(api, elsewhere, {"/frame", "/object", "/embed"})
    assert said == {"/frame": "", "/object": "", "/embed": ""}  # no field of the other origin holds a thing
    assert elsewhere.said("/typed") == [] and not [seen for seen in elsewhere.requests if PASSWORD in seen]


@pytest.mark.parametrize("where", ["frame", "page"])
@pytest.mark.parametrize("arrival", ["held", "at once"])
def test_a_document_that_leaves_between_focus_and_typing_is_refused(api, form, credential, where, arrival):
    """The username field's focus sends its document (the page's, or a
    frame's) to another origin, whose field takes the focus as it loads.
    Whether that origin's answer is held (the form's document is still
    there, leaving) or comes at once (it may be gone already), the fill stops
    there and the other origin gets nothing."""
    with TellingSite() as elsewhere:
        if arrival == "held":
            elsewhere.held.add("/landing")
        form.pages["/leaving"] = (
            f"<title>Leaving</title><input id=user onfocus=\"location.href = '{elsewhere.url}/landing'\">"
            "<input id=pass type=password>"
        )
        form.pages["/holds-leaving"] = '<title>Holds</title><iframe id=login src="/leaving"></iframe>'
        open_form(api, f"{form.url}/holds-leaving" if where == "frame" else f"{form.url}/leaving")
        frame = {"frame_selector": "#login"} if where == "frame" else {}
        refused = api.post(
            "/main/plugin/web/fill-credential",
            json={"credential": credential, "username_selector": "#user", "password_selector": "#pass", **frame},
        )
        assert refused.status_code == 403, refused.text
        error = refused.json()["error"]
        assert f"Credential robin belongs to {form.url}; the document of the username field (#user) " in error
        if arrival == "held":
            assert f"began to navigate to {elsewhere.url} while the form was filled" in error
        assert not leaked(refused.content)
        elsewhere.release.set()
        assert report(api, elsewhere, {"/landing"}) == {"/landing": ""}
        assert elsewhere.said("/typed") == []
        assert not [seen for seen in elsewhere.requests if PASSWORD in seen or USERNAME in seen]


def test_nothing_the_worker_keeps_or_prints_holds_a_secret(api, worker):
    """Last: after every flow above, every byte of the store but its keys,
    and the worker's own output, is searched for the password and the secret."""
    api.get("/activity")
    for path in Path(worker.store).rglob("*"):
        if path.is_file() and not path.name.startswith(("credentials_key", "key")):
            assert not leaked(path.read_bytes()), path
    assert not leaked(worker.log().encode())
