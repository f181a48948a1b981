"""Uploads (`POST /api/v1/media`) and `web/upload`, on a real worker: the key
and the bounds are checked before the body is read, the body goes to disk as
it arrives, nothing is kept of a refused or broken upload, and a page's file
input gets the real bytes under the real names."""

from __future__ import annotations

import hashlib
import json
import os
import socket

import httpx
import pytest

from harness.worker import wait_until
from tests.support.raw_socket import http_head

pytestmark = pytest.mark.usefixtures("worker")

READ_KEY = "read-key-" + "r" * 32


def upload(worker, data: bytes, *, filename: str = "report.pdf", content_type: str = "application/pdf", **headers):
    with worker.client() as client:
        return client.post(
            "/media", content=data, headers={"Content-Type": content_type, "X-Filename": filename, **headers}
        )


def stored_files(worker) -> list[str]:
    media = worker.store / "media"
    return sorted(str(path.relative_to(media)) for path in media.rglob("*") if path.is_file()) if media.exists() else []


def test_an_upload_is_stored_and_answers_its_link_name_and_hash(worker):
    data = os.urandom(300_000)
    answer = upload(worker, data, filename="../../etc/Q3%20report%C3%A9.pdf")
    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert body["success"] is True and body["page_id"] is None
    assert body["filename"] == "Q3 reporté.pdf"  # the last part of the path, decoded
    assert body["sha256"] == hashlib.sha256(data).hexdigest()
    assert body["media"]["size"] == len(data) and body["media"]["content_type"] == "application/pdf"
    with worker.client() as client:
        fetched = client.get(body["media"]["url"].removeprefix("/api/v1"))
    assert fetched.content == data
    assert fetched.headers["content-disposition"] == (
        "attachment; filename=\"Q3 report_.pdf\"; filename*=UTF-8''Q3%20report%C3%A9.pdf"
    )


@pytest.mark.parametrize(
    ("given", "filename", "stored"),
    [
        ("application/x-www-form-urlencoded", "notes.txt", "text/plain"),  # curl --data-binary's own type
        ("application/x-www-form-urlencoded", "", "application/octet-stream"),
        ("", "scan.png", "image/png"),
        ("", "q3.csv.gz", "application/gzip"),  # a compressed file's bytes are its compression's, not CSV's
        ("text/csv", "notes.txt", "text/csv"),  # a type given is the file's own
    ],
)
def test_a_form_type_or_none_is_no_type_the_name_says_it(worker, given, filename, stored):
    answer = upload(worker, b"Q3 figures\n", filename=filename, content_type=given)
    assert answer.status_code == 201, answer.text
    media = answer.json()["media"]
    assert media["content_type"] == stored
    with worker.client() as client:
        assert client.get(media["url"].removeprefix("/api/v1")).headers["content-type"] == stored


def test_a_chunked_upload_without_a_length_is_taken_too(worker):
    data = os.urandom(200_000)

    def chunks():
        for start in range(0, len(data), 65536):
            yield data[start : start + 65536]

    with worker.client() as client:
        answer = client.post("/media", content=chunks(), headers={"Content-Type": "image/png", "X-Filename": "a.png"})
    assert answer.status_code == 201, answer.text
    assert answer.json()["sha256"] == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize(
    ("authorization", "status", "says"),
    [
        (None, "401 Unauthorized", "A valid key is required"),
        ("Bearer wrong-key", "401 Unauthorized", "A valid key is required"),
    ],
)
def test_without_the_key_the_upload_is_refused_before_its_body_is_sent(worker, authorization, status, says):
    # Only the head goes out: the answer comes without a byte of the 50 MB body.
    before = stored_files(worker)
    head = b"POST /api/v1/media HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nContent-Length: 52428800\r\n"
    if authorization:
        head += f"Authorization: {authorization}\r\n".encode()
    status_line, headers = http_head("127.0.0.1", worker.port, head + b"\r\n")
    assert status_line == f"HTTP/1.1 {status}"
    assert headers["www-authenticate"] == 'Bearer realm="penelope"'
    assert stored_files(worker) == before


def test_bad_headers_are_refused_and_store_nothing(worker):
    before = stored_files(worker)
    answer = upload(worker, b"x", content_type="not a type")
    assert answer.status_code == 400 and "Content-Type must be a media type" in answer.json()["error"]
    with worker.client() as client:
        assert client.get("/media").status_code == 405  # `media` is a route, not a page
    assert stored_files(worker) == before


def test_a_read_key_may_not_upload(make_worker):
    worker = make_worker({"PENELOPE_READ_KEYS": READ_KEY})
    head = (
        b"POST /api/v1/media HTTP/1.1\r\nHost: x\r\nContent-Length: 52428800\r\n"
        + f"Authorization: Bearer {READ_KEY}\r\n\r\n".encode()
    )
    status_line, _ = http_head("127.0.0.1", worker.port, head)
    assert status_line == "HTTP/1.1 403 Forbidden"
    with httpx.Client(base_url=worker.base_url + "/api/v1", headers={"Authorization": f"Bearer {READ_KEY}"}) as client:
        refused = client.post("/media", content=b"x")
    assert refused.json()["error"] == (
        "This key may only read (PENELOPE_READ_KEYS): uploading a file needs the worker's key."
    )


def test_the_upload_bound_and_the_store_cap_keep_nothing_of_a_refused_file(make_worker):
    worker = make_worker({"UPLOAD_MAX_MB": "1", "MEDIA_MAX_MB": "1.5"})
    head = f"POST /api/v1/media HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {worker.key}\r\nContent-Length: 1048577\r\n\r\n"
    status_line, _ = http_head("127.0.0.1", worker.port, head.encode())
    assert status_line == "HTTP/1.1 413 Request Entity Too Large"
    with worker.client() as client:
        # A chunked body declares no length: it is cut off once it passes the bound.
        too_long = client.post("/media", content=iter([b"x" * 600_000, b"x" * 600_000]))
        assert too_long.status_code == 413
        assert too_long.json()["error"] == "The file is larger than the worker takes (UPLOAD_MAX_MB, 1 MB)."
        assert client.post("/media", content=b"y" * 1_000_000).status_code == 201
        full = client.post("/media", content=b"z" * 1_000_000)  # 2 MB held would pass MEDIA_MAX_MB
        assert full.status_code == 507 and "MEDIA_MAX_MB" in full.json()["error"]
    assert len([name for name in stored_files(worker) if "/" not in name]) == 1
    assert not [name for name in stored_files(worker) if name.startswith("incoming/")]


def test_an_upload_cut_short_leaves_nothing(worker):
    before = stored_files(worker)
    with socket.create_connection(("127.0.0.1", worker.port)) as sock:
        sock.sendall(
            b"POST /api/v1/media HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n"
            + f"Authorization: Bearer {worker.key}\r\n\r\n".encode()
            + b"x" * 300_000
        )
        wait_until(lambda: any(name.startswith("incoming/") for name in stored_files(worker)), what="the part on disk")
    wait_until(lambda: stored_files(worker) == before, what="the part of the upload cut short to go")


def test_a_client_cannot_name_the_part_the_server_wrote(worker):
    answer = upload(worker, b"mine", **{"Penelope-Streamed": "0123456789abcdef0123456789abcdef.pdf 4 00"})
    assert answer.status_code == 201
    assert answer.json()["sha256"] == hashlib.sha256(b"mine").hexdigest()


# --- web/upload ---------------------------------------------------------------------------


def call(worker, action: str, **params):
    with worker.client() as client:
        return client.post(f"/main/plugin/web/{action}", json=params)


def seen(worker) -> list[dict]:
    def shown():
        text = call(worker, "text", selector="#seen").json().get("text")
        return text and json.loads(text)

    return wait_until(shown, what="the page to read the files")


def test_a_file_input_gets_the_bytes_and_names_uploaded(worker, site):
    first, second = os.urandom(250_000), os.urandom(1000)
    links = [
        upload(worker, data, filename=name).json()["media"]["url"]
        for data, name in ((first, "a.pdf"), (second, "b.pdf"))
    ]
    assert call(worker, "open", url=f"{site.url}/upload.html").status_code == 200
    answer = call(worker, "upload", selector="#many", files=links)
    assert answer.status_code == 200, answer.text
    assert [file["filename"] for file in answer.json()["files"]] == ["a.pdf", "b.pdf"]
    assert seen(worker) == [
        {"name": "a.pdf", "size": len(first), "type": "application/pdf", "sha256": hashlib.sha256(first).hexdigest()},
        {"name": "b.pdf", "size": len(second), "type": "application/pdf", "sha256": hashlib.sha256(second).hexdigest()},
    ]


def test_a_button_that_opens_a_file_chooser_gets_the_files_too(worker, site):
    data = os.urandom(5000)
    link = upload(worker, data, filename="photo.png", content_type="image/png").json()["media"]["url"]
    call(worker, "open", url=f"{site.url}/upload.html")
    assert call(worker, "upload", selector="#pick", files=[link]).status_code == 200
    assert seen(worker) == [
        {"name": "photo.png", "size": 5000, "type": "image/png", "sha256": hashlib.sha256(data).hexdigest()}
    ]


def test_web_upload_refuses_what_it_cannot_do_and_sets_nothing(worker, site):
    link = upload(worker, b"hello", filename="h.txt", content_type="text/plain").json()["media"]["url"]
    call(worker, "open", url=f"{site.url}/upload.html")
    unknown = call(worker, "upload", selector="#one", files=[link, "/api/v1/media/made-up"])
    assert unknown.status_code == 404 and "made-up" in unknown.json()["error"]
    two = call(worker, "upload", selector="#one", files=[link, link])
    assert two.status_code == 400 and two.json()["error"] == "'#one' takes one file; 2 were given."
    chooser = call(worker, "upload", selector="#seen", files=[link], timeout_ms=300)
    assert chooser.status_code == 408 and "opened no file chooser" in chooser.json()["error"]
    missing = call(worker, "upload", selector="#nothing", files=[link], timeout_ms=300)
    assert missing.status_code == 404
    counts = call(
        worker,
        "evaluate",
        expression="() => ['one', 'many', 'hidden'].map((id) => document.getElementById(id).files.length)",
    )
    assert counts.json()["value"] == [0, 0, 0]


def test_a_jobs_upload_does_not_take_a_file_another_job_holds(worker, site):
    with worker.client() as client:

        def job(route: str, **params) -> dict:
            started = client.post(f"/main/plugin/{route}", json=params, headers={"X-Result-Ttl": "60"})
            assert started.status_code == 202, started.text
            return client.get(f"/jobs/{started.json()['job_id']}", params={"wait": 30}).json()

        first = job("testing/media", size=1000)
        link = first["result"]["media"]["url"]
        call(worker, "open", url=f"{site.url}/upload.html")
        second = job("web/upload", selector="#one", files=[link])
        assert second["state"] == "done", second
        assert client.delete(f"/jobs/{second['job_id']}").status_code == 204  # forgotten: its files go
        kept = client.get(link.removeprefix("/api/v1"))
        assert kept.status_code == 200 and len(kept.content) == 1000  # the first job's file stayed its own
