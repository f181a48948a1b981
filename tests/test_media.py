"""Media files: one-shot links, expiry, the cap, orphans, holds, and tokens
that are never paths. The store's operations run in-process on a SQLite test
database; the route runs against real workers."""

from __future__ import annotations

import http.client
import json
import os
import secrets
import socket
import sqlite3
import time
from pathlib import Path

import pytest

from core.api import status_of
from core.errors import StoreFull
from harness.worker import WorkerProcess, wait_until
from media_store import store
from media_store.models import MediaFile
from tests.support.worker_store import WorkerStore

# --- helpers ---------------------------------------------------------------------


def files_in(directory: Path) -> list[str]:
    return sorted(entry.name for entry in directory.iterdir()) if directory.exists() else []


def put_blob(api, size: int = 1000) -> dict:
    response = api.get("/main/plugin/testing/media", params={"size": size})
    assert response.status_code == 200, response.text
    return response.json()["media"]


def blob(size: int) -> bytes:
    """What the testing plugin stores for `size`."""
    return bytes(i % 251 for i in range(size))


def raw_get(worker: WorkerProcess, target: str, key: str | None = None) -> tuple[int, bytes]:
    """GET an exact request target: no client-side normalisation of `..` or `%2F`."""
    connection = http.client.HTTPConnection("127.0.0.1", worker.port, timeout=30)
    try:
        connection.putrequest("GET", target, skip_accept_encoding=True)
        connection.putheader("Authorization", f"Bearer {key or worker.key}")
        connection.endheaders()
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def assert_404_envelope(status: int, body: bytes) -> dict:
    assert status == 404, body[:200]
    envelope = json.loads(body)
    assert set(envelope) == {"success", "error", "page_id"} and envelope["success"] is False
    return envelope


# --- the store, in-process ---------------------------------------------------------


@pytest.fixture
def media_dir(settings, tmp_path) -> Path:
    settings.MEDIA_DIR = tmp_path / "media"
    settings.MEDIA_TTL_S = 300
    settings.MEDIA_MAX_MB = 4096
    return settings.MEDIA_DIR


in_db = pytest.mark.django_db(transaction=True)


@in_db
def test_put_stores_a_file_under_a_random_name_unrelated_to_its_token(media_dir):
    item = store.put(b"abc", content_type="image/png", filename="shot.png")
    assert files_in(media_dir) == [item.path]
    assert item.path.endswith(".png") and item.token not in item.path
    assert (media_dir / item.path).read_bytes() == b"abc"
    link = item.link()
    assert link["url"] == f"/api/v1/media/{item.token}" and link["size"] == 3
    assert link["content_type"] == "image/png"
    assert link["expires_at"] == pytest.approx(item.created_at + 300, abs=0.01)


@in_db
def test_put_past_the_cap_answers_507_and_leaves_no_file(media_dir, settings):
    settings.MEDIA_MAX_MB = 0.01  # 10485 bytes
    store.put(b"x" * 6000, content_type="application/octet-stream", filename="a.bin")
    with pytest.raises(StoreFull) as refused:
        store.put(b"x" * 6000, content_type="application/octet-stream", filename="b.bin")
    assert status_of(refused.value) == 507 and "MEDIA_MAX_MB" in refused.value.message
    assert len(files_in(media_dir)) == 1 and MediaFile.objects.count() == 1


@in_db
def test_a_claimed_file_no_longer_counts_against_the_cap(media_dir, settings):
    settings.MEDIA_MAX_MB = 0.01
    first = store.put(b"x" * 6000, content_type="application/octet-stream", filename="a.bin")
    assert store.claim(first) is True
    store.put(b"x" * 6000, content_type="application/octet-stream", filename="b.bin")


@in_db
def test_claim_deletes_a_plain_file_once(media_dir):
    item = store.put(b"abc", content_type="text/plain", filename="a.txt")
    assert store.claim(item) is True
    assert store.claim(item) is False
    assert files_in(media_dir) == [] and store.find_available(item.token) is None


@in_db
def test_expiry_and_sweep(media_dir):
    item = store.put(b"abc", content_type="text/plain", filename="a.txt")
    assert store.sweep(item.expires_at - 1) == 0
    assert store.find_available(item.token, item.expires_at - 1) is not None
    assert store.find_available(item.token, item.expires_at + 1) is None
    assert store.sweep(item.expires_at + 1) == 1
    assert files_in(media_dir) == [] and not MediaFile.objects.exists()


@in_db
def test_a_held_file_outlives_its_link_and_survives_downloads(media_dir):
    item = store.put(b"abc", content_type="text/plain", filename="a.txt")
    until = item.expires_at + 100
    assert store.hold([item.token], holder="job-1", until=until) == 1
    item.refresh_from_db()
    # Past the link's own deadline, within the hold: still downloadable, not swept.
    assert store.find_available(item.token, item.expires_at + 50) is not None
    assert store.sweep(item.expires_at + 50) == 0
    # A held file is not used up by a download.
    assert store.claim(item) is False
    assert store.find_available(item.token) is not None
    # Past the hold: gone.
    assert store.sweep(until + 1) == 1
    assert files_in(media_dir) == []


@in_db
def test_a_hold_shorter_than_the_link_is_the_files_deadline(media_dir):
    item = store.put(b"abc", content_type="text/plain", filename="a.txt")
    store.hold([item.token], holder="job-3", until=item.created_at + 1)
    assert store.find_available(item.token, item.created_at + 2) is None
    assert store.sweep(item.created_at + 2) == 1
    assert files_in(media_dir) == []


@in_db
def test_expire_moves_the_end_of_a_hold(media_dir):
    item = store.put(b"abc", content_type="text/plain", filename="a.txt")
    store.hold([item.token], holder="job-2", until=item.expires_at + 1000)
    assert store.expire("job-2", until=item.expires_at + 10) == 1
    assert store.sweep(item.expires_at + 11) == 1


@in_db
def test_drop_deletes_a_holders_files_now_and_only_those(media_dir):
    held = store.put(b"abc", content_type="text/plain", filename="a.txt")
    other = store.put(b"def", content_type="text/plain", filename="b.txt")
    store.hold([held.token], holder="job-3", until=time.time() + 1000)
    assert store.drop("job-3") == 1
    assert files_in(media_dir) == [other.path]
    assert store.drop("job-3") == 0


@in_db
def test_drop_orphans_spares_young_files(media_dir):
    item = store.put(b"abc", content_type="text/plain", filename="a.txt")
    young = media_dir / "young.bin"
    young.write_bytes(b"in progress")
    old = media_dir / "old.bin"
    old.write_bytes(b"stray")
    past = time.time() - 3600
    os.utime(old, (past, past))
    MediaFile.objects.create(
        token="t" * 20, path="missing.bin", filename="m.bin", size=1, content_type="x/y",
        created_at=past, expires_at=time.time() + 100,
    )
    assert store.drop_orphans() == {"files": 1, "rows": 1}
    assert files_in(media_dir) == sorted([item.path, "young.bin"])
    assert list(MediaFile.objects.values_list("token", flat=True)) == [item.token]


@in_db
@pytest.mark.parametrize("token", ["", "x" * 65, "../key", "..", "' OR '1'='1", "%", "_"])
def test_find_available_never_matches_a_guess(media_dir, token):
    store.put(b"abc", content_type="text/plain", filename="a.txt")
    assert store.find_available(token) is None


# --- the route, against real workers --------------------------------------------------


@pytest.fixture(scope="module")
def worker_db(worker, django_db_blocker) -> WorkerStore:
    return WorkerStore(worker.store, django_db_blocker)


def file_of(worker: WorkerProcess, worker_db: WorkerStore, link: dict) -> Path:
    """The link's file in the worker's media folder (its name is in the store only)."""
    token = link["url"].rpartition("/")[2]
    [name] = worker_db.list(MediaFile.objects.filter(token=token).values_list("path", flat=True))
    return worker.store / "media" / name


def test_a_download_is_one_shot(api, worker, worker_db):
    link = put_blob(api, 3000)
    on_disk = file_of(worker, worker_db, link)
    assert on_disk.read_bytes() == blob(3000)
    response = api.get(worker.base_url + link["url"])
    assert response.status_code == 200
    assert response.content == blob(3000)
    assert response.headers["content-type"] == "application/octet-stream"
    assert response.headers["content-disposition"] == 'attachment; filename="blob.bin"'
    assert response.headers["content-length"] == "3000"
    # The complete download claimed it: the file goes, and the link with it.
    wait_until(lambda: not on_disk.exists(), timeout=10, what="the claimed file to be deleted")
    assert not worker_db.exists(MediaFile.objects.filter(path=on_disk.name))
    second = api.get(worker.base_url + link["url"])
    assert_404_envelope(second.status_code, second.content)


def test_a_one_shot_link_being_downloaded_cannot_be_downloaded_again(api, worker):
    link = put_blob(api, 8_000_000)
    with api.stream("GET", worker.base_url + link["url"]) as first:
        assert first.status_code == 200
        chunks = first.iter_raw()
        received = len(next(chunks))
        second = api.get(worker.base_url + link["url"])
        assert_404_envelope(second.status_code, second.content)
        received += sum(len(chunk) for chunk in chunks)
    assert received == 8_000_000
    third = api.get(worker.base_url + link["url"])
    assert_404_envelope(third.status_code, third.content)


def test_a_client_that_closes_at_the_last_byte_has_used_the_link(api, worker):
    """curl closes as soon as it has Content-Length bytes, before the stream is
    asked for more: the claim must not wait for that, or a download right after
    gets the file again (it did one time in twenty)."""
    for _ in range(20):
        link = put_blob(api, 300_000)
        with socket.create_connection(("127.0.0.1", worker.port)) as sock:
            sock.sendall(f"GET {link['url']} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {worker.key}\r\n\r\n".encode())
            received = b""
            while b"\r\n\r\n" not in received or len(received.split(b"\r\n\r\n", 1)[1]) < 300_000:
                received += sock.recv(65536)
        again = api.get(worker.base_url + link["url"])
        assert_404_envelope(again.status_code, again.content)


def test_a_download_needs_the_key(api, worker):
    link = put_blob(api, 100)
    status, _ = raw_get(worker, link["url"], key="wrong-key")
    assert status == 401
    assert api.get(worker.base_url + link["url"]).content == blob(100)


def test_an_unclaimed_link_expires_and_its_file_is_swept(make_worker, django_db_blocker):
    worker = make_worker({"MEDIA_TTL_S": "0.5", "SWEEP_S": "0.2"})
    with worker.client() as api:
        link = put_blob(api, 500)
        media = worker.store / "media"
        assert len(files_in(media)) == 1
        wait_until(lambda: files_in(media) == [], timeout=10, what="the sweep to delete the expired file")
        response = api.get(worker.base_url + link["url"])
        assert_404_envelope(response.status_code, response.content)
    assert not WorkerStore(worker.store, django_db_blocker).exists(MediaFile.objects.all())


def test_an_expired_link_answers_404_before_any_sweep(make_worker):
    worker = make_worker({"MEDIA_TTL_S": "0.5", "SWEEP_S": "3600"})
    with worker.client() as api:
        link = put_blob(api, 500)
        wait_until(lambda: time.time() > link["expires_at"], timeout=5, what="the link's deadline")
        response = api.get(worker.base_url + link["url"])
        assert_404_envelope(response.status_code, response.content)
        assert len(files_in(worker.store / "media")) == 1  # still on disk until the sweep


def test_past_the_cap_a_plugin_answers_507_and_writes_nothing(make_worker):
    worker = make_worker({"MEDIA_MAX_MB": "0.05"})  # 52428 bytes
    media = worker.store / "media"
    with worker.client() as api:
        first = put_blob(api, 30_000)
        on_disk = files_in(media)
        response = api.get("/main/plugin/testing/media", params={"size": 30_000})
        assert response.status_code == 507, response.text
        assert response.json() == {
            "success": False, "page_id": "main",
            "error": "The media store is full: this 30000-byte file would pass the 0.05 MB cap (MEDIA_MAX_MB).",
        }
        assert files_in(media) == on_disk  # no new file, no .part left behind
        # Downloading the first frees its room.
        assert api.get(worker.base_url + first["url"]).status_code == 200
        wait_until(lambda: files_in(media) == [], timeout=10, what="the claimed file to be deleted")
        put_blob(api, 30_000)


def test_orphans_are_removed_at_start(make_worker, django_db_blocker):
    worker = make_worker()
    with worker.client() as api:
        kept = put_blob(api, 200)
    assert worker.stop() == 0
    media = worker.store / "media"
    kept_files = files_in(media)
    stray = media / "stray.bin"
    stray.write_bytes(b"left by a crash")
    past = time.time() - 3600
    os.utime(stray, (past, past))
    with sqlite3.connect(worker.store / "penelope.db") as db:
        db.execute(
            "insert into media_store_mediafile (token, path, filename, size, content_type, created_at, expires_at)"
            " values (?, 'gone.png', 'gone.png', 10, 'image/png', ?, ?)",
            ("rowwithoutfile" + secrets.token_hex(8), time.time(), time.time() + 300),
        )
    db.close()
    worker.start()
    # The start-up step ran before the port opened.
    assert files_in(media) == kept_files
    assert not WorkerStore(worker.store, django_db_blocker).exists(MediaFile.objects.filter(path="gone.png"))
    with worker.client() as api:
        assert api.get(worker.base_url + kept["url"]).content == blob(200)


@pytest.mark.parametrize(
    "target",
    [
        "/api/v1/media/..%2F..%2Fpenelope.db",
        "/api/v1/media/..%2Fkey",
        "/api/v1/media/../key",
        "/api/v1/media/../../penelope.db",
        "/api/v1/media/%2e%2e%2fkey",
        "/api/v1/media/..",
        "/api/v1/media/.",
        "/api/v1/media/%2Fetc%2Fpasswd",
        "/api/v1/media/key",
        "/api/v1/media/penelope.db",
        "/api/v1/media/%27%20OR%20%271%27%3D%271",
        "/api/v1/media/%27%3B%20DROP%20TABLE%20media_store_mediafile%3B%20--",
        "/api/v1/media/%22quoted%22",
        "/api/v1/media/%25",
        "/api/v1/media/_",
        "/api/v1/media/" + "A" * 300,
        "/api/v1/media/%00",
    ],
)
def test_guessed_tokens_and_paths_answer_404_and_read_nothing(api, worker, target):
    link = put_blob(api, 100)
    status, body = raw_get(worker, target)
    assert_404_envelope(status, body)
    assert b"SQLite" not in body and worker.key.encode() not in body
    # The real file is untouched and its link still works.
    assert api.get(worker.base_url + link["url"]).content == blob(100)


def test_random_tokens_and_the_files_own_name_answer_404(api, worker, worker_db):
    link = put_blob(api, 100)
    name = file_of(worker, worker_db, link).name
    for guess in [secrets.token_urlsafe(24) for _ in range(20)] + [name, name.split(".")[0]]:
        status, body = raw_get(worker, "/api/v1/media/" + guess)
        assert_404_envelope(status, body)
    assert api.get(worker.base_url + link["url"]).content == blob(100)
