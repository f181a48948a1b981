"""The `web` actions that move files between a site and the worker's media:
`download` takes a file the site serves as a download, or one the browser
shows instead of saving (text, JSON, an image, a PDF: plugins/downloads.py),
and `upload` puts media files (a client's, from `POST /api/v1/media`, or a
plugin's) into a page's file input.

A file input gets files by path, and the page sees each path's last part as
the file's name; a media file's path is a random name. So the files of an
upload are linked (hard links: no copy) under their own names into the
page's folder under the media's `links/`, and set from there. The page
reads a file's bytes when its script or its form asks, maybe long after the
call: the links stay until the page's next upload, or the worker's next start.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page
from playwright.async_api import TimeoutError as PlaywrightTimeoutError
from rest_framework import serializers

from core.api import first_line
from core.db_thread import on_db_thread
from core.shapes import Text, Url
from media_store import store
from media_store.models import MediaFile
from plugins.framework import Context, PluginError
from plugins.web.base import SELECTOR, WebParams, action, first_match
from plugins.web.error_page import navigate, settle_after

MEDIA_PREFIX = "/api/v1/media/"
MAX_FILES = 100

IS_FILE_INPUT_JS = "(element) => element instanceof HTMLInputElement && element.type === 'file'"


class UploadParams(WebParams):
    selector = SELECTOR
    files = serializers.ListField(
        child=Text(max_length=200),
        min_length=1,
        max_length=MAX_FILES,
        help_text="Media links this worker holds (`/api/v1/media/<token>`, as an upload or a plugin answered them), in order.",
    )
    timeout_ms = serializers.IntegerField(
        min_value=0,
        max_value=600_000,
        default=30_000,
        help_text="How long the element may take to appear, and its click to open a file chooser.",
    )


def token_of(link: str) -> str:
    return link.removeprefix(MEDIA_PREFIX).split("?", 1)[0]


def held_files(links: list[str]) -> list[MediaFile]:
    """The media files of `links`, in order, or 404 naming the first unknown one."""
    found = []
    for link in links:
        item = store.find_available(token_of(link))
        if item is None or not store.file_path(item).is_file():
            raise PluginError(404, f"No such media file: {link[:100]} is unknown, used or expired.")
        found.append(item)
    return found


def link_files(page_id: str, items: list[MediaFile]) -> list[Path]:
    """Each file linked under its own name in a fresh folder of the page's
    (one folder a file, so two files may share a name); the page's folder of
    its previous upload goes."""
    folder = store.links_dir() / page_id
    shutil.rmtree(folder, ignore_errors=True)
    paths = []
    for index, item in enumerate(items):
        target = folder / str(index) / item.filename
        target.parent.mkdir(parents=True)
        os.link(store.file_path(item), target)
        paths.append(target)
    return paths


@action("upload", params=UploadParams)
async def upload(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Set media files on a file input, as a person's file chooser would: the
    element is an `<input type=file>`, or an element whose click opens a file
    chooser. Answers the files set, in order."""
    items = await on_db_thread(held_files)(params["files"])
    timeout = params["timeout_ms"]
    try:
        await page.wait_for_selector(params["selector"], state="attached", timeout=timeout)
    except PlaywrightTimeoutError:
        raise PluginError(404, f"Nothing on the page matches {params['selector']!r}.") from None
    element = await first_match(page, params["selector"])
    paths = await asyncio.to_thread(link_files, ctx.page_id, items)  # files only: not the database thread's work
    try:
        if await element.evaluate(IS_FILE_INPUT_JS):
            await element.set_input_files(paths, timeout=timeout)
        else:
            try:
                async with page.expect_file_chooser(timeout=timeout) as chosen:
                    await element.click(timeout=timeout)
            except PlaywrightTimeoutError:
                raise PluginError(
                    408, f"Clicking {params['selector']!r} opened no file chooser within {timeout} ms."
                ) from None
            chooser = await chosen.value
            await chooser.set_files(paths, timeout=timeout)
    except PlaywrightError as error:
        if "multiple" in error.message.lower():
            raise PluginError(400, f"{params['selector']!r} takes one file; {len(paths)} were given.") from None
        if page.is_closed():
            raise
        raise PluginError(400, f"The files could not be set: {first_line(error.message)}") from None
    if ctx.media_holder is not None:  # a job's: the files stay as long as the job holds its own
        tokens = [item.token for item in items]
        await on_db_thread(store.hold_unheld)(tokens, holder=ctx.media_holder, until=ctx.media_held_until)
        ctx.media_tokens += tokens
    return {"files": [{"url": f"{MEDIA_PREFIX}{item.token}", "filename": item.filename, "size": item.size,
                       "content_type": item.content_type} for item in items]}  # fmt: skip


# --- downloads -------------------------------------------------------------------------


class DownloadParams(WebParams):
    url = Url(
        required=False,
        help_text="Open it and take the file it answers with, downloaded or shown (any type but HTML). Not with selector.",
    )
    selector = Text(
        max_length=1000,
        required=False,
        help_text="Click it and take what the click downloads, or the file it opens (any type but HTML). Not with url.",
    )
    timeout_ms = serializers.IntegerField(
        min_value=1, max_value=600_000, default=30_000, help_text="How long the download may take to start."
    )

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if ("url" in data) == ("selector" in data):
            raise serializers.ValidationError("give either url or selector.")
        return data


@action("download", params=DownloadParams)
async def download(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Take a file the site serves: the one `url` answers with, or the one
    (or ones) a click on `selector` starts. A file the browser would show
    instead of saving (the page opens an answer that is not HTML) is saved
    as a download instead, and the page stays where it was. Answers `media` and its `filename`, `size`, `content_type` and `sha256`,
    and `files`, every file in the order they started."""
    timeout = params["timeout_ms"]
    async with ctx.expect_download(page, timeout_ms=timeout, inline=True) as downloads:
        if "url" in params:
            try:
                await navigate(page, params["url"], wait_until="commit", timeout=timeout)
            except PlaywrightError as error:
                # A download aborts the navigation that found it; any other failure is the navigation's.
                if "Download is starting" not in error.message and not downloads.started:
                    await settle_after(page, error)
                    raise
        else:
            element = await first_match(page, params["selector"])
            await element.click(timeout=timeout)
    files = await downloads.store()
    first = files[0]
    media = {key: first[key] for key in ("url", "expires_at", "content_type", "size")}
    return {
        "media": media,
        **{key: first[key] for key in ("filename", "size", "content_type", "sha256")},
        "files": files,
    }
