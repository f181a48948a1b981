"""`GET /api/v1/media/{token}`: stream a plugin's file; `POST /api/v1/media`:
store a client's (media_store/uploads.py)."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

from django.http import HttpResponse, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers

from core.api import ApiError
from core.db_thread import on_db_thread
from core.rest import ApiView, answer
from core.runtime import Tasks, runtime_of
from core.schema import operation
from core.seams import close_with
from core.shapes import Success
from media_store import store, uploads
from media_store.models import MediaFile

CHUNK = 256 * 1024
NOT_FOUND = "No such media file: the link is unknown, used or expired."
# On every media answer, a file's and a refusal's: a browser takes a file for
# its Content-Type alone, never for what it sniffs in the bytes (a plugin's
# `text/plain` that holds HTML is not run as a page).
MEDIA_HEADERS = {**ApiView.response_headers, **uploads.NOSNIFF}


class Download(ApiView):
    response_headers = MEDIA_HEADERS

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
                        ("X-Content-Type-Options", str, "nosniff: the file is its Content-Type, never sniffed."),
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
    response["Content-Disposition"] = disposition(item.filename)
    response["Cache-Control"] = "no-store"
    return response


def disposition(filename: str) -> str:
    """`attachment` with the file's name; a name that is not ASCII also goes
    percent-encoded as UTF-8 (RFC 6266's `filename*`), beside an ASCII one."""
    if filename.isascii():
        return f'attachment; filename="{filename}"'
    fallback = filename.encode("ascii", "replace").decode().replace("?", "_")
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename)}"


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


class MediaLink(serializers.Serializer):
    url = serializers.CharField(help_text="`/api/v1/media/<token>`: give it to `web/upload`, or download it.")
    expires_at = serializers.FloatField(
        help_text="When the link lapses (MEDIA_TTL_S after the upload), unless a job holds it."
    )
    content_type = serializers.CharField()
    size = serializers.IntegerField()


class Uploaded(Success):
    media = MediaLink()
    filename = serializers.CharField(help_text="X-Filename, made safe to save under.")
    sha256 = serializers.CharField(help_text="The SHA-256 of the bytes received, in hex.")


class Upload(ApiView):
    does = {"POST": "uploading a file"}
    response_headers = MEDIA_HEADERS

    @extend_schema(
        **operation(
            operation_id="uploadMedia",
            summary="Upload a file for a plugin",
            description=(
                "The raw body is the file, its `Content-Type` the file's own and `X-Filename` its name "
                "(percent-encoded when it is not ASCII). The key is checked before the body is read, and "
                "the body goes to disk as it arrives. At most UPLOAD_MAX_MB; the store's MEDIA_MAX_MB applies."
            ),
            tags=["media"],
            request={"application/octet-stream": OpenApiTypes.BINARY},  # or any type: the file's own
            answers={201: Uploaded},
            errors={
                400: "Content-Type is not a media type.",
                413: "Larger than UPLOAD_MAX_MB.",
                507: "The media store is full (MEDIA_MAX_MB).",
            },
        )
    )
    async def post(self, request: Any) -> HttpResponse:
        part = uploads.received(request.META.get(uploads.MARKER_META, ""))
        try:
            headers = {
                "content-type": request.META.get("CONTENT_TYPE", ""),
                "x-filename": request.META.get("HTTP_X_FILENAME", ""),
            }
            content_type = uploads.content_type_of(headers)
            if content_type is None:  # the server refuses it first; a request that came another way is checked here
                raise ApiError(400, "Content-Type must be a media type (type/subtype), the file's own.")
            filename = uploads.filename_of(headers)
            if (
                part is None
            ):  # not through the worker's server (an in-process client): the body is here, within MAX_BODY_BYTES
                body = request.body
                item = await store.aput(body, content_type=content_type, filename=filename)
                digest = hashlib.sha256(body).hexdigest()
            else:
                path, size, digest = part
                item = await on_db_thread(store.register_file)(
                    path, size=size, content_type=content_type, filename=filename
                )
        except BaseException:
            if part is not None:
                part[0].unlink(missing_ok=True)  # refused or failed: no file is kept
            raise
        return answer(
            Uploaded,
            {"success": True, "page_id": None, "media": item.link(), "filename": filename, "sha256": digest},
            201,
        )
