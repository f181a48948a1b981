"""`GET /api/v1/media/{token}`: stream a plugin's file."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from asgiref.sync import sync_to_async
from django.http import HttpRequest, StreamingHttpResponse

from media_store import store
from media_store.models import MediaFile
from penelope_site.api import ApiError, api_view

CHUNK = 256 * 1024


@api_view("GET")
async def download(request: HttpRequest, token: str) -> StreamingHttpResponse:
    item = await sync_to_async(store.find_available)(token)
    if item is None:
        raise ApiError(404, "No such media file: the link is unknown, used or expired.")
    try:
        handle = open(store.file_path(item), "rb")  # noqa: SIM115 - closed by the stream
    except FileNotFoundError:
        raise ApiError(404, "No such media file: the link is unknown, used or expired.") from None
    response = StreamingHttpResponse(_stream(handle, item), content_type=item.content_type)
    response["Content-Length"] = str(item.size)
    response["Content-Disposition"] = f'attachment; filename="{item.filename}"'
    response["Cache-Control"] = "no-store"
    return response


async def _stream(handle, item: MediaFile) -> AsyncIterator[bytes]:
    """Send the file; only a download that reached its end claims it."""
    try:
        while chunk := await asyncio.to_thread(handle.read, CHUNK):
            yield chunk
    finally:
        handle.close()
    await sync_to_async(store.claim)(item)
