"""A persona's credentials over HTTP, against a real worker: stored, read,
listed and deleted; a read key's names and origins; every bad input a 400
that stores nothing; the Python client in both twins; the key rotated by the
command beside the running worker. And no answer, log line, request-log row
or byte of the store (its SQLite file, journal and all, the browser's
profile too) carries a planted password, TOTP secret or notes in plain text.
tests/test_credential_domain.py has their rules in-process."""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from core.errors import CredentialUnreadable
from credentials import sealing
from credentials.models import Credential
from harness.worker import ROOT, WorkerProcess, wait_until
from tests.conftest import worker_env
from tests.support.worker_store import WorkerStore

sys.path.insert(0, str(ROOT / "client"))  # the client's own package, from the checkout

from penelope_client import AsyncPenelope, Forbidden, NotFound, Penelope, Refused  # noqa: E402

READ_KEY = "read-only-key-0123456789abcdefghij"
PASSWORD = "pw-Planted-3b9e correct horse"
TOTP_SENT = "rgdb uweu 3a5d ufuh zo7g 5aqb 6lo7 rwqm"  # as a site shows it
TOTP_SECRET = "RGDBUWEU3A5DUFUHZO7G5AQB6LO7RWQM"  # as it is sealed
NOTES = "planted-notes-1f7c recovery 1234-5678"
PLANTED = (PASSWORD, TOTP_SENT, TOTP_SECRET, NOTES)
GITHUB = {"url": "https://github.com", "username": "octo", "password": PASSWORD, "totp_secret": TOTP_SENT, "notes": NOTES}


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    running = WorkerProcess(
        tmp_path_factory.mktemp("store"), env=worker_env(PENELOPE_READ_KEYS=READ_KEY, REQUEST_LOG_FLUSH_S="0.05")
    ).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def reader(worker: WorkerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=worker.base_url + "/api/v1", headers={"Authorization": f"Bearer {READ_KEY}"}) as client:
        yield client


def names(api: httpx.Client) -> list[str]:
    return [item["name"] for item in api.get("/credentials").json()["credentials"]]


def holds_no_secret(text: str) -> bool:
    return not any(secret in text for secret in PLANTED)


# --- store, read, list, delete ------------------------------------------------------------------


def test_a_credential_is_stored_read_listed_replaced_and_deleted(api):
    made = api.put("/credentials/github", json=GITHUB)
    assert made.status_code == 201, made.text
    body = made.json()
    assert body == {
        "success": True, "page_id": None, "name": "github", "url": "https://github.com", "username": "octo",
        "secrets": {"password": True, "totp": True, "notes": True}, "changed_at": body["changed_at"], "used_at": None,
    }
    assert holds_no_secret(made.text)
    shown = api.get("/credentials/github")
    assert shown.status_code == 200 and shown.json() == body
    listed = api.get("/credentials").json()
    assert listed["success"] is True and {key: value for key, value in body.items() if key not in ("success", "page_id")} in listed["credentials"]
    replaced = api.put("/credentials/github", json={"url": "HTTPS://GitHub.com:443/", "username": "octo", "password": PASSWORD})
    assert replaced.status_code == 200, replaced.text
    assert replaced.json()["url"] == "https://github.com"
    assert replaced.json()["secrets"] == {"password": True, "totp": False, "notes": False}
    assert replaced.json()["changed_at"] >= body["changed_at"]
    api.put("/credentials/github", json=GITHUB)  # as the other tests find it
    assert api.put("/credentials/doomed", json={"url": "http://127.0.0.1:8080"}).status_code == 201
    deleted = api.delete("/credentials/doomed")
    assert deleted.status_code == 200 and deleted.json() == {"success": True, "page_id": None, "deleted": "doomed"}
    for method in ("GET", "DELETE"):
        gone = api.request(method, "/credentials/doomed")
        assert gone.status_code == 404 and gone.json()["error"].startswith("No credential named doomed")
    assert api.get("/credentials/No%20Such").status_code == 404


def test_the_first_credential_makes_the_key_file_and_the_log_says_where_never_the_key(api, worker):
    api.put("/credentials/github", json=GITHUB)
    key_file = worker.store / "credentials_key"
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    log = worker.log_path.read_text()
    assert log.count(f"made a new credentials key at {key_file}") == 1
    assert key_file.read_text().strip() not in log


def test_a_read_key_reads_names_and_origins_only_and_stores_or_deletes_nothing(api, reader, worker):
    api.put("/credentials/github", json=GITHUB)
    listed = reader.get("/credentials")
    assert listed.status_code == 200
    assert {"name": "github", "url": "https://github.com"} in listed.json()["credentials"]
    assert all(set(item) == {"name", "url"} for item in listed.json()["credentials"])
    one = reader.get("/credentials/github")
    assert one.status_code == 200 and one.json() == {"success": True, "page_id": None, "name": "github", "url": "https://github.com"}
    stored = reader.put("/credentials/github", json={"url": "https://evil.example", "password": "theirs"})
    assert stored.status_code == 403 and "storing a credential needs the worker's key" in stored.json()["error"]
    removed = reader.delete("/credentials/github")
    assert removed.status_code == 403 and "deleting a credential needs the worker's key" in removed.json()["error"]
    assert api.get("/credentials/github").json()["url"] == "https://github.com"
    for method, path in (("GET", "/credentials"), ("GET", "/credentials/github"), ("PUT", "/credentials/github"),
                         ("DELETE", "/credentials/github")):  # fmt: skip
        refused = httpx.request(method, worker.base_url + "/api/v1" + path, json=GITHUB)
        assert refused.status_code == 401 and holds_no_secret(refused.text), (method, path)
    assert "github" in names(api)


BAD = [
    ("github", {**GITHUB, "url": "https://github.com/login"}, "url"),
    ("github", {**GITHUB, "url": "ftp://github.com"}, "url"),
    ("github", {**GITHUB, "url": f"https://octo:{PASSWORD}@github.com"}, "url"),
    ("github", {**GITHUB, "url": PASSWORD}, "url"),
    ("github", {**GITHUB, "totp_secret": PASSWORD}, "totp_secret"),
    ("github", {**GITHUB, "totp_secret": "not base32 at all!"}, "totp_secret"),
    ("Bad.Name", GITHUB, "name"),
    ("x" * 65, GITHUB, "name"),
    ("github", {**GITHUB, "token": "x"}, "'token'"),
    ("github", {**GITHUB, "password": 12345678}, "password"),
    ("github", {**GITHUB, "password": {"value": PASSWORD}}, "password"),
    ("github", {key: value for key, value in GITHUB.items() if key != "url"}, "url"),
]


@pytest.mark.parametrize(("name", "body", "named"), BAD)
def test_every_bad_input_answers_400_naming_it_never_its_value_and_stores_nothing(api, name, body, named):
    api.put("/credentials/github", json=GITHUB)
    before = api.get("/credentials").json()
    refused = api.put(f"/credentials/{name}", json=body)
    assert refused.status_code == 400, refused.text
    assert refused.json()["success"] is False and named in refused.json()["error"]
    assert holds_no_secret(refused.text)
    assert api.get("/credentials").json() == before


def test_a_body_that_is_no_object_and_fields_in_the_query_string_answer_400(api):
    before = api.get("/credentials").json()
    assert api.put("/credentials/listed", json=[GITHUB]).status_code == 400
    in_query = api.put("/credentials/queried", params={"password": PASSWORD}, json={"url": "https://q.example"})
    assert in_query.status_code == 400 and "query string" in in_query.json()["error"] and holds_no_secret(in_query.text)
    assert api.get("/credentials").json() == before


# --- the Python client ---------------------------------------------------------------------------


def test_the_client_stores_reads_and_deletes_in_both_twins(worker):
    with Penelope(worker.base_url, worker.key) as client, Penelope(worker.base_url, READ_KEY) as reading:
        made = client.put_credential("cl-site", url="https://cl.example", username="me", password=PASSWORD, totp_secret=TOTP_SENT)
        assert made["secrets"] == {"password": True, "totp": True, "notes": False}
        assert client.credential("cl-site")["username"] == "me"
        assert "cl-site" in [item["name"] for item in client.credentials()]
        assert {"name": "cl-site", "url": "https://cl.example"} in reading.credentials()
        with pytest.raises(Forbidden):
            reading.delete_credential("cl-site")
        with pytest.raises(Refused) as refused:
            client.put_credential("cl-site", url="ftp://cl.example", password=PASSWORD)
        assert "url" in str(refused.value) and PASSWORD not in str(refused.value)
        client.delete_credential("cl-site")
        with pytest.raises(NotFound):
            client.credential("cl-site")

    async def twin() -> None:
        async with AsyncPenelope(worker.base_url, worker.key) as client:
            made = await client.put_credential("cl-async", url="http://127.0.0.1:9", notes=NOTES)
            assert made["url"] == "http://127.0.0.1:9" and made["secrets"]["notes"] is True
            assert (await client.credential("cl-async"))["secrets"]["password"] is False
            assert "cl-async" in [item["name"] for item in await client.credentials()]
            await client.delete_credential("cl-async")
            with pytest.raises(NotFound):
                await client.delete_credential("cl-async")

    asyncio.run(twin())


# --- rotation beside the running worker --------------------------------------------------------------


def manage(worker: WorkerProcess, *args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PENELOPE_STORE": str(worker.store), "PENELOPE_KEY": worker.key, **worker.env, **env}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )


def opened(worker_db: WorkerStore, keyring: sealing.Keyring | None = None) -> dict[str, dict]:
    """Every credential of the worker's store, opened here with the worker's key files (read-only)."""
    return {
        row.name: sealing.unseal(row.name, row.url, row.sealed, keyring)
        for row in worker_db.list(Credential.objects.all())
    }


def test_rotate_key_beside_the_running_worker_reseals_every_credential(api, worker, settings, django_db_blocker):
    settings.STORE_DIR, settings.CREDENTIALS_KEY = worker.store, ""  # this process reads the worker's key files
    worker_db = WorkerStore(worker.store, django_db_blocker)
    api.put("/credentials/github", json=GITHUB)
    api.put("/credentials/gitlab", json={"url": "https://gitlab.com", "password": "lab-" + PASSWORD})
    before = opened(worker_db)
    old = sealing.read_key_file(worker.store / "credentials_key")
    done = manage(worker, "credentials", "rotate-key")
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(rf"Re-sealed {len(before)} credentials with a new key, now in .*\n", done.stdout), done.stdout
    assert sealing.encode_key(old) not in done.stdout + done.stderr
    new = sealing.read_key_file(worker.store / "credentials_key")
    assert new != old and not (worker.store / "credentials_key.new").exists()
    assert opened(worker_db, sealing.Keyring.of(new)) == before
    with pytest.raises(CredentialUnreadable, match="a key this worker does not have"):
        opened(worker_db, sealing.Keyring.of(old))
    # The worker seals with the new key at once, and still answers every credential.
    api.put("/credentials/after", json={"url": "https://after.example", "password": "after-" + PASSWORD})
    assert opened(worker_db, sealing.Keyring.of(new))["after"]["password"] == "after-" + PASSWORD
    assert api.get("/credentials/github").json()["secrets"] == {"password": True, "totp": True, "notes": True}
    # An environment key's rotation needs the worker stopped: it seals with the key it was given.
    keys = {"CREDENTIALS_KEY": sealing.encode_key(sealing.make_key()), "CREDENTIALS_NEW_KEY": sealing.encode_key(sealing.make_key())}
    refused = manage(worker, "credentials", "rotate-key", **keys)
    assert refused.returncode != 0 and "is serving the store" in refused.stderr
    assert not any(key in refused.stdout + refused.stderr for key in keys.values())


# --- no secret anywhere: last, over all the module did ------------------------------------------------


def files_holding(root: Path, secrets: tuple[str, ...]) -> list[str]:
    """The files under `root` (every one, recursively, but the key files)
    that hold one of `secrets` in plain text."""
    found = []
    needles = [secret.encode() for secret in secrets]
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.name.startswith(sealing.KEY_FILE_NAME):
            continue
        try:
            content = path.read_bytes()
        except OSError:  # a socket or a file the browser removed meanwhile
            continue
        found += [f"{path.relative_to(root)}: {needle.decode()}" for needle in needles if needle in content]
    return found


def test_no_answer_log_line_request_log_row_or_stored_byte_holds_a_secret(api, worker):
    shown = [
        api.put("/credentials/github", json=GITHUB), api.get("/credentials/github"), api.get("/credentials"),
        api.put("/credentials/github", json={**GITHUB, "url": f"https://octo:{PASSWORD}@github.com"}),
        api.put("/credentials/github", json={**GITHUB, "totp_secret": PASSWORD}),
        api.put("/credentials/github", json={**GITHUB, "password": [PASSWORD]}),
    ]
    assert [response.status_code for response in shown] == [200, 200, 200, 400, 400, 400]
    assert all(holds_no_secret(response.text) and holds_no_secret(str(response.headers)) for response in shown)
    # Every request is in the request log once it is flushed (REQUEST_LOG_FLUSH_S), in order: a last one marks it.
    assert api.get("/credentials/flush-marker").status_code == 404

    def request_log() -> list[tuple]:
        with sqlite3.connect(worker.store / "penelope.db") as db:
            rows = db.execute("select * from activity_requestlogentry").fetchall()
        db.close()
        return rows

    wait_until(lambda: "/api/v1/credentials/flush-marker" in repr(request_log()), what="the request log's last row")
    assert holds_no_secret(repr(request_log()))
    assert holds_no_secret(worker.log_path.read_text(errors="replace"))
    assert (worker.store / "penelope.db").exists() and files_holding(worker.store, PLANTED) == []
    # The check itself finds what is there: the user name is stored in plain text, as it is answered.
    assert files_holding(worker.store, ("octo",))
