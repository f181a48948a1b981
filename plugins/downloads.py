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

A file the browser shows instead of saving (text, JSON, an image, a PDF in
Chromium's viewer) starts no download. Watched with `inline=True`, the answer
to a main-frame navigation that is not HTML is let through with
`Content-Disposition: attachment` (`Shown`): Chromium saves it as it saves
any download, so it is stored, named, hashed and bounded by DOWNLOAD_MAX_MB
exactly as one, under the type the site gave it. Nothing is fetched again and
nothing is read into the worker's memory: the bytes are the browser's own
answer, through its proxy and BROWSER_REFUSE_PRIVATE's guard like any page's.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import mimetypes
from email.message import Message
from email.utils import collapse_rfc2231_value
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from django.conf import settings
from playwright.async_api import CDPSession, Download, Page
from playwright.async_api import Error as PlaywrightError

from core.api import StatusError
from core.seams import download_file_of
from media_store.store import MB, safe_filename, type_of_name

log = logging.getLogger("penelope.plugins")

# How often a running download's size is read against DOWNLOAD_MAX_MB.
WATCH_S = 0.05
# How long after the last download ends another may still start and be taken.
SETTLE_S = 0.3
# How long a cancel or a delete may take before it is given up (a closed tab).
CLEANUP_S = 5
HASH_CHUNK = 1024 * 1024
# The documents a page shows that are pages, not files: a click that opens one
# is a navigation, and `url` mode waits on it for a download as before.
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
# The type Chromium always saves: an answer of it (or an attachment) is a
# download already, and stays one exactly as before (its type from its name).
SAVED_TYPE = "application/octet-stream"


def hash_file(path: Path) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as file:
        while chunk := file.read(HASH_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


class Downloads:
    """The downloads `page` starts while it is watched (`Context.expect_download`)."""

    def __init__(self, page: Page, ctx: Any, timeout_ms: int, *, inline: bool = False) -> None:
        self.page, self.ctx, self.timeout_ms = page, ctx, timeout_ms
        self.started: list[Download] = []
        self.kept: set[int] = set()  # indexes in `started`
        self._news = asyncio.Event()
        # Files the page would show instead of saving, saved instead, when asked for (the module's docstring).
        self.shown = Shown(page, self._news) if inline else None

    def _started(self, download: Download) -> None:
        self.started.append(download)
        self._news.set()

    async def __aenter__(self) -> Downloads:
        self.page.on("download", self._started)
        if self.shown is not None:
            try:
                await self.shown.start()
            except BaseException:
                await self.close(settled=True)
                raise
        return self

    async def __aexit__(self, kind: type[BaseException] | None, *_: Any) -> None:
        if kind is not None:  # the steps failed (or were cancelled): nothing of theirs is kept
            await self.close()

    async def store(self) -> list[dict[str, Any]]:
        """Wait for the downloads and keep each as a media file (see the module's docstring)."""
        try:
            if not await self._first():
                raise StatusError(408, f"No download started within {self.timeout_ms} ms.")
            if not self.started and self.shown is not None and self.shown.failure is not None:
                raise self.shown.failure
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

    async def _first(self) -> bool:
        """Whether a download started, or a shown file failed (when watched
        for one), within `timeout_ms`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_ms / 1000
        while not (self.started or (self.shown is not None and self.shown.failure is not None)):
            left = deadline - loop.time()
            if left <= 0:
                return False
            self._news.clear()  # no await since the check: nothing can be missed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._news.wait(), left)
        return True

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
        shown_type = self.shown.type_of(download.url) if self.shown is not None else None
        content_type = shown_type or type_of_name(filename)
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
            if self.shown is not None:
                await self.shown.stop()
            for index, download in enumerate(self.started):
                if index not in self.kept:
                    await forget(download)

        await finish(cleanup())


class Shown:
    """Files the page's main frame would show instead of saving, while
    watched: each answer to a main-frame navigation (2xx, any type but HTML,
    not an attachment or SAVED_TYPE already) is let through with
    `Content-Disposition: attachment` and its name, so that Chromium saves it
    as a download (a DevTools session of its own, the Fetch domain at the
    response stage: the answer's headers only, its body untouched). Its type
    is kept by URL, for the download to be stored under (`type_of`). A
    main-frame answer that is not HTML and failed (4xx, 5xx) is the call's
    `failure`."""

    def __init__(self, page: Page, news: asyncio.Event) -> None:
        self.page, self._news = page, news
        self.session: CDPSession | None = None
        self.failure: StatusError | None = None
        self._main_frame_id = ""
        self._types: dict[str, str] = {}  # URL of an answer turned into a download: its type
        self._answering: set[asyncio.Future] = set()

    async def start(self) -> None:
        self.session = await self.page.context.new_cdp_session(self.page)
        tree = await self.session.send("Page.getFrameTree")
        self._main_frame_id = tree["frameTree"]["frame"]["id"]
        self.session.on("Fetch.requestPaused", self._paused)
        patterns = [{"resourceType": "Document", "requestStage": "Response"}]
        await self.session.send("Fetch.enable", {"patterns": patterns})

    def type_of(self, url: str) -> str | None:
        return self._types.get(url)

    def _paused(self, event: dict[str, Any]) -> None:
        answering = asyncio.ensure_future(self._answer(event))
        self._answering.add(answering)
        answering.add_done_callback(self._answering.discard)

    async def _answer(self, event: dict[str, Any]) -> None:
        """Let a paused answer through: as an attachment when it is a shown
        file; as it came when anything about it goes wrong (a paused answer
        must never stay paused)."""
        try:
            let_through = self._let_through(event)
        except Exception:  # an answer this code did not foresee: the page gets it unchanged
            log.exception("a shown file's answer could not be read; it is let through as it came")
            let_through = {"requestId": event["requestId"]}
        # Changed headers Chromium refuses are let through unchanged too.
        for answer in (let_through, {"requestId": event["requestId"]}):
            try:
                if self.session is not None:
                    await self.session.send("Fetch.continueResponse", answer)
                return
            except PlaywrightError:
                if self.page.is_closed():
                    return  # nothing waits for it

    def _let_through(self, event: dict[str, Any]) -> dict[str, Any]:
        """How a paused answer goes on: `Fetch.continueResponse`'s parameters."""
        headers = event.get("responseHeaders") or []
        status = event.get("responseStatusCode") or 0
        content_type = media_type(header_of(headers, "content-type"))
        let_through: dict[str, Any] = {"requestId": event["requestId"]}
        disposition = header_of(headers, "content-disposition")
        saved_anyway = disposition.strip().lower().startswith("attachment") or content_type == SAVED_TYPE
        if event.get("frameId") == self._main_frame_id and content_type not in HTML_TYPES and not saved_anyway:
            url = event["request"]["url"]
            if 200 <= status < 300 and content_type:  # an answer without a type: the browser judges it
                name = shown_filename(url, disposition, content_type)
                self._types[url] = content_type
                kept = [header for header in headers if header["name"].lower() != "content-disposition"]
                attachment = f"attachment; filename*=UTF-8''{quote(name)}"
                let_through |= {
                    "responseCode": status,
                    "responseHeaders": [*kept, {"name": "Content-Disposition", "value": attachment}],
                }
            elif status >= 400 and self.failure is None:
                self.failure = StatusError(502, f"The download of {url[:200]} failed: the site answered {status}.")
                self._news.set()
        return let_through

    async def stop(self) -> None:
        """Stop watching: the answers paused are let through, the interception
        ends (should the session outlive a detach that fails, it pauses
        nothing more), and the session goes."""
        if self._answering:
            await asyncio.wait(set(self._answering), timeout=CLEANUP_S)
            for answering in self._answering:
                answering.cancel()
        session, self.session = self.session, None
        if session is not None:
            session.remove_listener("Fetch.requestPaused", self._paused)
            for step in (session.send("Fetch.disable"), session.detach()):
                with contextlib.suppress(PlaywrightError, TimeoutError):
                    await asyncio.wait_for(step, CLEANUP_S)


def header_of(headers: list[dict[str, str]], name: str) -> str:
    return next((header["value"] for header in headers if header["name"].lower() == name), "")


def media_type(header: str) -> str:
    """A Content-Type without its parameters: `text/plain; charset=utf-8` is `text/plain`."""
    return header.split(";", 1)[0].strip().lower()


def shown_filename(url: str, disposition: str, content_type: str) -> str:
    """The name a shown file is kept under: Content-Disposition's filename,
    else the URL's last path part, else `download`; with the type's extension
    when it has none; made safe."""
    message = Message()
    message["content-disposition"] = disposition
    named = [value for key, value in message.get_params([], header="content-disposition") if key == "filename"]
    # `filename*` (RFC 6266, read as Chromium reads it) before `filename`: an encoded value is a tuple here.
    given = next((collapse_rfc2231_value(value) for value in named if isinstance(value, tuple)), None)
    given = given or next((value for value in named if isinstance(value, str)), "")
    name = given or unquote(urlsplit(url).path.rsplit("/", 1)[-1])  # "" for a path ending in /
    extension = (mimetypes.guess_extension(content_type) if content_type else None) or ""
    if not PurePosixPath(name).suffix:
        name = (name or "download") + extension
    return safe_filename(name, fallback="download" + extension)


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
