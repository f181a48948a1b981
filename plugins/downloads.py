"""Downloads a page's own steps start, taken as media files.

    async with ctx.expect_download(page) as downloads:
        await page.get_by_role("link", name="Export").click()
    files = await downloads.store()

Every download the page starts from the `async with` on is watched: `store()`
waits up to `timeout_ms` for the first to start (408 if none does), then for
each to end, and keeps each as a media file (`ctx.put_media_file`: moved, not
read into memory), answering their links with `filename`, `sha256` and the
rest, in the order they started. A download that starts while another runs,
or within SETTLE_S of the last one's end, is taken too: one click may start
two. Each is bounded by DOWNLOAD_MAX_MB as it grows (cancelled past it: 507);
one that fails answers 502. Whatever is not kept (a failure, a cancel, an
error in the steps, and one that starts within SETTLE_S after them, its
news late) is cancelled and deleted: nothing is left behind.

The browser writes downloads into the worker's own folder (DOWNLOADS_DIR,
browser/runner.py), never one a plugin or a client names; its cookies and
proxy apply, and BROWSER_REFUSE_PRIVATE's guard sees every connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import mimetypes
from pathlib import Path
from typing import Any

from django.conf import settings
from playwright.async_api import Download, Page
from playwright.async_api import Error as PlaywrightError

from core.api import StatusError
from core.seams import download_file_of
from media_store.store import MB, safe_filename

# How often a running download's size is read against DOWNLOAD_MAX_MB.
WATCH_S = 0.05
# How long after the last download ends another may still start and be taken.
SETTLE_S = 0.3
# How long a cancel or a delete may take before it is given up (a closed tab).
CLEANUP_S = 5
HASH_CHUNK = 1024 * 1024


def hash_file(path: Path) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as file:
        while chunk := file.read(HASH_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


class Downloads:
    """The downloads `page` starts while it is watched (`Context.expect_download`)."""

    def __init__(self, page: Page, ctx: Any, timeout_ms: int) -> None:
        self.page, self.ctx, self.timeout_ms = page, ctx, timeout_ms
        self.started: list[Download] = []
        self.kept: set[int] = set()  # indexes in `started`
        self._news = asyncio.Event()

    def _started(self, download: Download) -> None:
        self.started.append(download)
        self._news.set()

    async def __aenter__(self) -> Downloads:
        self.page.on("download", self._started)
        return self

    async def __aexit__(self, kind: type[BaseException] | None, *_: Any) -> None:
        if kind is not None:  # the steps failed (or were cancelled): nothing of theirs is kept
            await self.close()

    async def store(self) -> list[dict[str, Any]]:
        """Wait for the downloads and keep each as a media file (see the module's docstring)."""
        try:
            if not await self._next(self.timeout_ms / 1000):
                raise StatusError(408, f"No download started within {self.timeout_ms} ms.")
            files: list[dict[str, Any]] = []
            while len(files) < len(self.started) or await self._next(SETTLE_S):
                index = len(files)
                files.append(await self._keep(self.started[index]))
                self.kept.add(index)
        except BaseException:
            await self.close()
            raise
        await self.close(settled=True)
        return files

    async def _next(self, within_s: float) -> bool:
        """Whether a download not yet taken has started, waiting `within_s` for one."""
        self._news.clear()
        if len(self.kept) < len(self.started):
            return True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._news.wait(), within_s)
        return len(self.kept) < len(self.started)

    async def _keep(self, download: Download) -> dict[str, Any]:
        path = await self._finished(download)
        filename = safe_filename(download.suggested_filename, fallback="download")
        content_type = mimetypes.guess_type(filename)[0] or "application/octet-stream"
        digest, size = await asyncio.to_thread(hash_file, path)
        link = await self.ctx.put_media_file(path, size=size, content_type=content_type, filename=filename)
        return {**link, "filename": filename, "sha256": digest}

    async def _finished(self, download: Download) -> Path:
        """The finished download's file; 507 past DOWNLOAD_MAX_MB (cancelled as it
        grows), 502 if it failed."""
        limit = int(settings.DOWNLOAD_MAX_MB * MB)
        growing = download_file_of(download)
        ended = asyncio.ensure_future(download.failure())  # None once it finished well
        try:
            while not ended.done():
                await asyncio.wait({ended}, timeout=WATCH_S)
                size = size_of(growing)
                if size > limit:
                    raise StatusError(
                        507,
                        f"The download passed the worker's bound (DOWNLOAD_MAX_MB, {settings.DOWNLOAD_MAX_MB:g} MB) "
                        f"at {size} bytes; it was cancelled.",
                    )
        finally:
            ended.cancel()
        failure = ended.result()
        if failure:
            raise StatusError(502, f"The download of {download.url[:200]} failed: {failure}.")
        return Path(await download.path())

    async def close(self, *, settled: bool = False) -> None:
        """Stop watching; cancel and delete every download not kept. Unless the
        downloads `settled` (store() waited SETTLE_S past the last), one the
        steps started may still be on its way: it is waited for as long."""

        async def cleanup() -> None:
            if not settled:
                await asyncio.sleep(SETTLE_S)
            self.page.remove_listener("download", self._started)
            for index, download in enumerate(self.started):
                if index not in self.kept:
                    await forget(download)

        await finish(cleanup())


async def finish(work: Any) -> None:
    """Run `work` to its end even while the caller is cancelled (then for at
    most CLEANUP_S × 3, and the cancel is passed on)."""
    task = asyncio.ensure_future(work)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait({task}, timeout=CLEANUP_S * 3)
        raise


async def forget(download: Download) -> None:
    """Cancel a download and delete its file (a cancelled one answers the
    delete with an error: its file is gone already)."""
    for step in (download.cancel, download.delete):
        with contextlib.suppress(PlaywrightError, TimeoutError):
            await asyncio.wait_for(step(), CLEANUP_S)


def size_of(path: Path) -> int:
    """The bytes a download has written: Chromium writes `<name>.crdownload`
    while it runs and renames it `<name>` at its end."""
    for candidate in (path.with_name(path.name + ".crdownload"), path):
        try:
            return candidate.stat().st_size
        except FileNotFoundError:
            continue
    return 0
