"""`GET /api/v1/media/{token}`: stream a plugin's file."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema

from core.api import ApiError
from core.db_thread import on_db_thread
from core.rest import ApiView
from core.runtime import runtime_of
from core.schema import operation
from core.seams import close_with
from media_store import store
from media_store.models import MediaFile

CHUNK = 256 * 1024
NOT_FOUND = "No such media file: the link is unknown, used or expired."


class Download(ApiView):
    @extend_schema(
        **operation(
            operation_id="downloadMedia",
            summary="Download a plugin's file",
            description="A plain call's link is one-shot: the first download that reaches its last byte uses it up.",
            tags=["media"],
            parameters=[
                OpenApiParameter("token", str, OpenApiParameter.PATH, description="The token in a `media.url`."),
                *(
                    OpenApiParameter(name, kind, OpenApiParameter.HEADER, required=True, response=[200], description=what)
                    for name, kind, what in (
                        ("Content-Length", int, "The file's size in bytes."),
                        ("Content-Disposition", str, 'attachment; filename="..."'),
                        ("Cache-Control", str, "no-store"),
                    )
                ),
            ],
            answers={(200, "*/*"): OpenApiResponse(OpenApiTypes.BINARY, "The file, with its own Content-Type.")},
            errors={404: "No such media file: unknown, used or expired."},
        )
    )
    async def get(self, request: Any, token: str) -> StreamingHttpResponse:
        return await download(token, runtime_of(request).downloading)


async def download(token: str, downloading: set[str]) -> StreamingHttpResponse:
    """`downloading`: the worker's one-shot links being downloaded right now;
    a second download of the same link waits for nothing and answers 404, so
    a one-shot file leaves once."""
    item = await on_db_thread(store.find_available)(token)
    if item is None or item.token in downloading:
        raise ApiError(404, NOT_FOUND)
    try:
        handle = open(store.file_path(item), "rb")  # noqa: SIM115 - closed by the stream
    except FileNotFoundError:
        raise ApiError(404, NOT_FOUND) from None
    one_shot = not item.held(time.time())
    response = StreamingHttpResponse(_stream(handle, item, downloading if one_shot else None), content_type=item.content_type)
    if one_shot:
        downloading.add(item.token)
        # A client gone before the stream started never runs the stream's
        # `finally`; Django closes every response, so free the link there too.
        close_with(response, lambda: downloading.discard(item.token))
    response["Content-Length"] = str(item.size)
    response["Content-Disposition"] = f'attachment; filename="{item.filename}"'
    response["Cache-Control"] = "no-store"
    return response


async def _stream(handle, item: MediaFile, downloading: set[str] | None) -> AsyncIterator[bytes]:
    """Send the file; only a download that reached its end claims it. One cut
    short frees the link (a one-shot one, in `downloading`) for another try."""
    try:
        while chunk := await asyncio.to_thread(handle.read, CHUNK):
            yield chunk
        await on_db_thread(store.claim)(item)
    finally:
        handle.close()
        if downloading is not None:
            downloading.discard(item.token)
