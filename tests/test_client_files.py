"""The Python client's files, against a real worker and a loopback site:
`upload_file` then `upload` into a page's file input, `download` of a link
and of a click, as bytes and to a path, in both twins."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
from collections.abc import Iterator

import pytest

from harness.worker import ROOT, WorkerProcess, wait_until
from tests.conftest import worker_env

sys.path.insert(0, str(ROOT / "client"))  # the client's own package, from the checkout

from penelope_client import AsyncPenelope, NotFound, Penelope  # noqa: E402


@pytest.fixture(scope="module")
def worker(tmp_path_factory) -> Iterator[WorkerProcess]:
    running = WorkerProcess(tmp_path_factory.mktemp("store"), env=worker_env()).start()
    yield running
    running.stop()


@pytest.fixture
def client(worker) -> Iterator[Penelope]:
    with Penelope(worker.base_url, worker.key) as penelope:
        yield penelope


def test_a_file_goes_up_in_pieces_and_into_a_pages_file_input(client, site, tmp_path):
    data = os.urandom(3 * 1024 * 1024 + 5)  # more than one piece
    path = tmp_path / "scan.pdf"
    path.write_bytes(data)
    stored = client.upload_file(path)
    assert stored["filename"] == "scan.pdf" and stored["media"]["content_type"] == "application/pdf"
    assert stored["sha256"] == hashlib.sha256(data).hexdigest()
    client.call("main", "web/open", url=f"{site.url}/upload.html")
    set_ = client.upload("main", "#one", [stored["media"]])
    assert [file["filename"] for file in set_["files"]] == ["scan.pdf"]

    def seen():
        text = client.call("main", "web/text", selector="#seen")["text"]
        return text and json.loads(text)

    assert wait_until(seen, what="the page to read the file")[0]["sha256"] == stored["sha256"]
    with pytest.raises(NotFound):
        client.upload("main", "#one", ["/api/v1/media/made-up"])


def test_a_download_answers_its_bytes_or_writes_a_path(client, site, tmp_path):
    client.call("main", "web/open", url=f"{site.url}/download.html")
    assert client.download("main", selector="#blob") == b"made in the page\n"
    written = client.download("main", url=f"{site.url}/download?name=r.csv&kib=3000", to=tmp_path / "r.csv")
    assert written == tmp_path / "r.csv" and written.stat().st_size == 3000 * 1024
    with pytest.raises(TypeError):
        client.download("main")


def test_the_async_twin_moves_files_too(worker, site, tmp_path):
    path = tmp_path / "note.txt"
    path.write_text("from the async client\n")

    async def scenario():
        async with AsyncPenelope(worker.base_url, worker.key) as client:
            stored = await client.upload_file(path)
            await client.call("main", "web/open", url=f"{site.url}/download.html")
            downloaded = await client.download("main", selector="#blob")
            return stored, downloaded, await client.media(stored["media"])

    stored, downloaded, fetched = asyncio.run(scenario())
    assert stored["media"]["content_type"] == "text/plain" and downloaded == b"made in the page\n"
    assert fetched == b"from the async client\n"
