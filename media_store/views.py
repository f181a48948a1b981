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
from core.tasks import Tasks
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
        runtime = runtime_of(request)
        return await download(token, runtime.downloading, runtime.tasks)


async def download(token: str, downloading: set[str], tasks: Tasks) -> StreamingHttpResponse:
    """`downloading`: the worker's one-shot links being downloaded right now;
    a second download of the same link waits for nothing and answers 404, so
    a one-shot file leaves once. A link is used up by the download that sent
    its last byte, claimed when its answer is closed (`tasks` runs the claim):
    a client may close the moment it has every byte (curl does), before the
    stream is asked for more, and the link stays in `downloading` until then."""
    item = await on_db_thread(store.find_available)(token)
    if item is None or item.token in downloading:
        raise ApiError(404, NOT_FOUND)
    try:
        handle = open(store.file_path(item), "rb")  # noqa: SIM115 - closed by the stream or the answer's close
    except FileNotFoundError:
        raise ApiError(404, NOT_FOUND) from None
    sent = [0]  # bytes handed to the server so far
    response = StreamingHttpResponse(_stream(handle, sent), content_type=item.content_type)
    close_with(response, handle.close)
    if not item.held(time.time()):
        downloading.add(item.token)

        def closed() -> None:
            if sent[0] >= item.size:
                tasks.spawn(_claim(item, downloading), about=f"media {item.path}")
            else:  # cut short (or never started): the link stays for another try
                downloading.discard(item.token)

        close_with(response, closed)
    response["Content-Length"] = str(item.size)
    response["Content-Disposition"] = f'attachment; filename="{item.filename}"'
    response["Cache-Control"] = "no-store"
    return response


async def _stream(handle, sent: list[int]) -> AsyncIterator[bytes]:
    """Send the file, counting what goes out (the count is taken before each
    piece is handed over: the stream may be left at that yield)."""
    try:
        while chunk := await asyncio.to_thread(handle.read, CHUNK):
            sent[0] += len(chunk)
            yield chunk
    finally:
        handle.close()


async def _claim(item: MediaFile, downloading: set[str]) -> None:
    try:
        await on_db_thread(store.claim)(item)
    finally:
        downloading.discard(item.token)
