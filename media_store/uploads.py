"""Uploads: `POST /api/v1/media` takes a file's raw body and stores it as a
media file, without ever holding the body in memory.

daphne reads a whole body before the application sees it, and queues it to
the application in memory; so an upload is decided on its headers alone, as
they arrive (`chooser`, given to the server, core/serving.py): a missing key
answers 401, a read key 403, a declared size past UPLOAD_MAX_MB 413, and a
bad `Content-Type` or `X-Filename` 400, each before a byte of the body is
read. A wrong key is judged here by the worker's rule (core/wrong_keys.py),
as on every other route: its 401 comes at its turn, its body dropped
meanwhile and never given to the view, and an address whose wrong keys wait
KEY_REFUSAL_QUEUE turns gets 429, its key not compared (else the server
would be a route that compares keys at full speed, answering a read key's
403 or a right key's 400 at once). An accepted body goes to a file of its
own under the media folder's `incoming/` as it arrives (`Upload`, hashing
it on the way), bounded by UPLOAD_MAX_MB as it grows; the view
(media_store/views.py) then finds the file's name, size and SHA-256 in the
`Penelope-Streamed` header, which only the server sets, and stores it like
any other media file (MEDIA_MAX_MB applies, and it expires after
MEDIA_TTL_S unless a job holds it).
"""

from __future__ import annotations

import hashlib
import mimetypes
import re
import secrets
import time
from pathlib import Path
from urllib.parse import unquote

from django.conf import settings

from core.api import REALM
from core.auth import KEY_REQUIRED, READ, key_role, read_only
from core.bounded_http import envelope_answer
from core.routes import MEDIA
from core.seams import STREAMED_HEADER, AnswerLater, StreamChoice
from core.wrong_keys import KeyFlood, WrongKeys
from media_store.store import MB, incoming_dir, safe_filename, type_of_name

UPLOAD_PATH = f"/api/v1/{MEDIA}"
# Where the view finds the part the server wrote (a client's own is removed,
# core/seams/server.py): Django's name for the STREAMED_HEADER.
MARKER_META = "HTTP_" + STREAMED_HEADER.decode().upper().replace("-", "_")
CONTENT_TYPE = re.compile(r"^[\w.+-]+/[\w.+-]+$")
PART_NAME = re.compile(r"^[0-9a-f]{32}(\.\w{1,10})?$")
DEFAULT_TYPE = "application/octet-stream"
# What `curl --data-binary @file` sends when no type is given: a form's type,
# never a file's own; taken as no type at all.
NOT_A_FILES_TYPE = ("", "application/x-www-form-urlencoded")
# What every media answer carries (media_store/views.py), the server's refusals of an upload too.
NOSNIFF = {"X-Content-Type-Options": "nosniff"}


def upload_limit() -> int:
    return int(settings.UPLOAD_MAX_MB * MB)


def content_type_of(headers: dict[str, str]) -> str | None:
    """The upload's type (without parameters), or None when it is not one.
    None given, or curl's form type, is the type X-Filename's extension
    names, else `application/octet-stream`."""
    given = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if given in NOT_A_FILES_TYPE:
        return type_of_name(filename_of(headers))
    return given if len(given) <= 100 and CONTENT_TYPE.match(given) else None


def filename_of(headers: dict[str, str]) -> str:
    """X-Filename, percent-decoded as UTF-8 (a name that is not ASCII comes percent-encoded)."""
    return safe_filename(unquote(headers.get("x-filename", ""), errors="replace"))


class Upload:
    """One upload's body, written to `incoming/` as it arrives."""

    def __init__(self, content_type: str) -> None:
        self.limit = upload_limit()
        self.name = secrets.token_hex(16) + (mimetypes.guess_extension(content_type) or ".bin")
        self.path = incoming_dir() / self.name
        self.file = open(self.path, "wb")  # noqa: SIM115 - closed by finish or abort
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> None:
        self.file.write(data)
        self.digest.update(data)
        self.size += len(data)

    def finish(self) -> str:
        self.file.close()
        return f"{self.name} {self.size} {self.digest.hexdigest()}"

    def abort(self) -> None:
        self.file.close()
        self.path.unlink(missing_ok=True)

    def too_large(self) -> bytes:
        return envelope_answer(b"413 Request Entity Too Large", too_large_sentence(), None, NOSNIFF)


def too_large_sentence() -> str:
    return f"The file is larger than the worker takes (UPLOAD_MAX_MB, {settings.UPLOAD_MAX_MB:g} MB)."


def chooser(guard: WrongKeys) -> StreamChoice:
    """The server's choice for a request to the media route (UPLOAD_PATH), from
    its headers (core/seams/server.py, `bound_request_bodies`): an Upload for a
    POST that may upload, the whole refusal for one that may not (a wrong
    key's at its turn, `guard` the worker's turns: its Runtime's), None for
    any other method."""

    def choose(
        method: str, path: str, headers: dict[str, str], length: int | None, address: str
    ) -> Upload | bytes | AnswerLater | None:
        if method != "POST":
            return None
        authorization = headers.get("authorization")
        if authorization is None:  # no key: nothing guessed, refused at once
            return envelope_answer(b"401 Unauthorized", KEY_REQUIRED, None, {"WWW-Authenticate": REALM, **NOSNIFF})
        roles: list[str | None] = []  # the key's, once compared

        def matches() -> bool:
            roles.append(key_role(authorization))
            return roles[0] is not None

        try:
            due = guard.judge(address, matches)
        except KeyFlood as flood:
            return envelope_answer(
                b"429 Too Many Requests", flood.message, None, {"Retry-After": str(flood.retry_after_s), **NOSNIFF}
            )
        if due is not None:
            return AnswerLater(
                envelope_answer(b"401 Unauthorized", KEY_REQUIRED, None, {"WWW-Authenticate": REALM, **NOSNIFF}),
                due - time.monotonic(),
                lambda: guard.answered(address, due),
            )
        return chosen(roles[0], headers, length)

    return choose


def chosen(role: str | None, headers: dict[str, str], length: int | None) -> Upload | bytes:
    """A right key's upload: refused at once for a read key, a declared size
    past UPLOAD_MAX_MB or a bad type; else its Upload."""
    if role == READ:
        return envelope_answer(b"403 Forbidden", read_only("uploading a file"), None, NOSNIFF)
    if length is not None and length > upload_limit():
        return envelope_answer(b"413 Request Entity Too Large", too_large_sentence(), None, NOSNIFF)
    content_type = content_type_of(headers)
    if content_type is None:
        return envelope_answer(
            b"400 Bad Request", "Content-Type must be a media type (type/subtype), the file's own.", None, NOSNIFF
        )
    return Upload(content_type)


def received(value: str) -> tuple[Path, int, str] | None:
    """The part the server wrote for a request (`Penelope-Upload`): its path,
    size and SHA-256, or None when the request carries none."""
    try:
        name, size, digest = value.split(" ")
    except ValueError:
        return None
    if not PART_NAME.match(name):
        return None
    return incoming_dir() / name, int(size), digest
