"""Media operations: put, hold, expire, drop, claim, sweep, drop orphans.

The functions are sync (ORM and file system); async callers run them on the
database thread (`on_db_thread`). A holder is an opaque id (a job's), never an
import. Files are unlinked only after the commit that drops their rows: a
crash in between leaves a file without a row, which the next start removes.
"""

from __future__ import annotations

import asyncio
import logging
import mimetypes
import os
import re
import secrets
import shutil
import time
from collections.abc import Iterable
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Sum

from core.db_thread import BATCH_ROWS, drain, on_db_thread
from core.errors import StoreFull
from media_store.models import MediaFile

log = logging.getLogger("penelope.media")

MB = 1024 * 1024
ORPHAN_GRACE_S = 30


def media_dir() -> Path:
    settings.MEDIA_DIR.mkdir(parents=True, exist_ok=True)
    return settings.MEDIA_DIR


def incoming_dir() -> Path:
    """Where uploads are written as they arrive (media_store/uploads.py), apart
    from the files with rows: `drop_orphans` leaves an upload in progress alone."""
    directory = media_dir() / "incoming"
    directory.mkdir(exist_ok=True)
    return directory


def links_dir() -> Path:
    """Where `web/upload` links files under their own names for a page's file
    input (plugins/web/transfer.py); the links stay until the page's next upload."""
    return media_dir() / "links"


def file_path(item: MediaFile) -> Path:
    return media_dir() / item.path


def put(
    data: bytes, *, content_type: str, filename: str, holder: str | None = None, held_until: float | None = None
) -> MediaFile:
    """Store a file for a plain call's one-shot link (or held for `holder`
    until `held_until`), or 507 past MEDIA_MAX_MB."""
    partial = write_partial(data, content_type)
    return register(partial, size=len(data), content_type=content_type, filename=filename, holder=holder, held_until=held_until)


async def aput(
    data: bytes, *, content_type: str, filename: str, holder: str | None = None, held_until: float | None = None
) -> MediaFile:
    """`put` from the event loop: the bytes are written on a thread of their
    own, and only the row (and the rename) on the database thread."""
    partial = await asyncio.to_thread(write_partial, data, content_type)
    return await on_db_thread(register)(
        partial, size=len(data), content_type=content_type, filename=filename, holder=holder, held_until=held_until
    )


def write_partial(data: bytes, content_type: str) -> Path:
    """The file's bytes under a random name, as `<name>.part` until its row commits."""
    name = secrets.token_hex(16) + (mimetypes.guess_extension(content_type) or ".bin")
    partial = media_dir() / (name + ".part")
    try:
        partial.write_bytes(data)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return partial


def register(
    partial: Path, *, size: int, content_type: str, filename: str, holder: str | None, held_until: float | None
) -> MediaFile:
    """Add the row of a written file, or 507 past MEDIA_MAX_MB (the file is removed)."""
    final = partial.with_suffix("")
    now = time.time()
    try:
        with transaction.atomic():
            cap = settings.MEDIA_MAX_MB * MB
            if MediaFile.objects.unclaimed_bytes() + size > cap:
                raise StoreFull(
                    f"The media store is full: this {size}-byte file would pass the "
                    f"{settings.MEDIA_MAX_MB:g} MB cap (MEDIA_MAX_MB).",
                )
            item = MediaFile.objects.create(
                token=secrets.token_urlsafe(24),
                path=final.name,
                filename=filename,
                size=size,
                content_type=content_type,
                created_at=now,
                expires_at=now + settings.MEDIA_TTL_S,
                holder=holder,
                held_until=held_until if holder else None,
            )
            os.replace(partial, final)
    except BaseException:
        for leftover in (partial, final):
            leftover.unlink(missing_ok=True)
        raise
    return item


def register_file(
    source: Path,
    *,
    size: int,
    content_type: str,
    filename: str,
    holder: str | None = None,
    held_until: float | None = None,
) -> MediaFile:
    """`register` for a file written elsewhere (an upload's part, a finished
    download): moved into the media folder, never read."""
    partial = media_dir() / (secrets.token_hex(16) + (mimetypes.guess_extension(content_type) or ".bin") + ".part")
    try:
        shutil.move(source, partial)  # a rename on the store's own disk
    except BaseException:
        for leftover in (source, partial):
            leftover.unlink(missing_ok=True)
        raise
    return register(
        partial, size=size, content_type=content_type, filename=filename, holder=holder, held_until=held_until
    )


UNSAFE_IN_NAMES = re.compile(r'[\x00-\x1f\x7f/\\"]')
# Unicode's bidirectional controls (the marks LRM, RLM and ALM, the
# embeddings and overrides U+202A-U+202E, the isolates U+2066-U+2069): shown,
# they reorder what follows, so `invoice\u202efdp.exe` reads as
# `invoiceexe.pdf`. Taken out, not replaced: they show nothing of their own.
BIDI_CONTROLS = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
MAX_FILENAME = 200


# A compressed file's own type, where a name's last extension says it is
# compressed: `q3.csv.gz` holds gzip's bytes, not CSV's.
COMPRESSED_TYPES = {"gzip": "application/gzip", "bzip2": "application/x-bzip2", "xz": "application/x-xz"}
UNKNOWN_TYPE = "application/octet-stream"


def type_of_name(filename: str) -> str:
    """The type a file's name stands for (`notes.txt`: `text/plain`, a
    compressed file's its compression's), else `application/octet-stream`."""
    guessed, encoding = mimetypes.guess_type(filename, strict=False)
    if encoding is not None:
        return COMPRESSED_TYPES.get(encoding, UNKNOWN_TYPE)
    return guessed or UNKNOWN_TYPE


def safe_filename(given: str, fallback: str = "upload") -> str:
    """A name a file may be saved under anywhere: its last path part, with no
    control characters or quotes, no bidirectional controls, not hidden, at
    most 200 characters; else `fallback`."""
    name = BIDI_CONTROLS.sub("", given.replace("\\", "/").rsplit("/", 1)[-1])
    name = UNSAFE_IN_NAMES.sub("_", name).strip().lstrip(".")
    return name[:MAX_FILENAME] or fallback


def hold_unheld(tokens: Iterable[str], *, holder: str, until: float) -> int:
    """`hold`, but only for files no holder keeps yet: a file another job
    holds (its result's) stays that job's, to go when it goes."""
    return MediaFile.objects.filter(token__in=list(tokens), holder__isnull=True).update(holder=holder, held_until=until)


def hold(tokens: Iterable[str], *, holder: str, until: float) -> int:
    """Keep these files, and their links, for `holder` until `until`."""
    return MediaFile.objects.filter(token__in=list(tokens)).update(holder=holder, held_until=until)


def expire(holder: str, *, until: float) -> int:
    """Move the end of a holder's hold (e.g. 5 minutes after a delivery)."""
    return MediaFile.objects.held_by(holder).update(held_until=until)


def expire_all(holders: Iterable[str], *, until: float) -> int:
    """`expire` for many holders with the same deadline, in one update."""
    return MediaFile.objects.filter(holder__in=list(holders)).update(held_until=until)


def drop_rows(holders: Iterable[str]) -> list[str]:
    """Inside the caller's transaction: delete the rows of these holders' files
    and answer the file names, to `unlink` once the transaction has committed."""
    return _delete_rows(MediaFile.objects.filter(holder__in=list(holders)))


def drop(holder: str) -> int:
    """Delete a holder's files now."""
    with transaction.atomic():
        names = drop_rows([holder])
    unlink(names)
    return len(names)


def unlink(names: Iterable[str]) -> None:
    directory = media_dir()
    for name in names:
        (directory / name).unlink(missing_ok=True)


def totals() -> tuple[int, int]:
    """(files, bytes) on disk: every row, held, linked or waiting for the sweep."""
    found = MediaFile.objects.aggregate(files=Count("id"), size=Sum("size"))
    return found["files"], found["size"] or 0


def find_available(token: str, now: float | None = None) -> MediaFile | None:
    if not token or len(token) > 64:
        return None
    return MediaFile.objects.available(now or time.time()).filter(token=token).first()


def claim(item: MediaFile) -> bool:
    """After a complete download: a plain call's file is used up and deleted;
    a held file stays for its holder. Answers whether this download claimed it."""
    if item.held(time.time()):
        return False
    with transaction.atomic():
        claimed = MediaFile.objects.filter(pk=item.pk, claimed_at__isnull=True).update(claimed_at=time.time())
        if claimed:
            MediaFile.objects.filter(pk=item.pk).delete()
    if claimed:
        unlink([item.path])
    return bool(claimed)


def sweep_batch(now: float) -> int:
    """One batch of the sweep: claimed files and files past their deadline and hold."""
    with transaction.atomic():
        names = _delete_rows(MediaFile.objects.finished(now)[:BATCH_ROWS])
    unlink(names)
    return len(names)


def sweep(now: float | None = None) -> int:
    """Delete claimed files and files past their deadline and hold."""
    return drain(sweep_batch, now or time.time())


def drop_orphans(grace_s: float = ORPHAN_GRACE_S) -> dict[str, int]:
    """Remove files without a row and rows without a file. Files younger than
    `grace_s` are spared: a put in progress has its file on disk before its
    row commits. At start nothing is in progress, so there is no grace."""
    directory = media_dir()
    on_disk = {entry.name for entry in directory.iterdir() if entry.is_file()}
    known = set(MediaFile.objects.values_list("path", flat=True))
    files_removed = 0
    for name in on_disk - known:
        entry = directory / name
        try:
            # A put in progress has its file on disk before its row commits.
            if time.time() - entry.stat().st_mtime < grace_s:
                continue
        except FileNotFoundError:
            continue
        entry.unlink(missing_ok=True)
        files_removed += 1
    missing = sorted(known - on_disk)
    rows_removed = 0
    for first in range(0, len(missing), BATCH_ROWS):
        removed, _ = MediaFile.objects.filter(path__in=missing[first : first + BATCH_ROWS]).delete()
        rows_removed += removed
    if files_removed or rows_removed:
        log.info("removed %d orphan files and %d rows without a file", files_removed, rows_removed)
    return {"files": files_removed, "rows": rows_removed}


def _delete_rows(queryset) -> list[str]:
    """Delete the rows (inside the caller's transaction); answers their file names."""
    items = list(queryset.values_list("pk", "path"))
    MediaFile.objects.filter(pk__in=[pk for pk, _ in items]).delete()
    return [name for _, name in items]


async def adrop_orphans_at_start() -> dict[str, int]:
    """`drop_orphans` at the worker's start, before any put can run; uploads
    a stop cut short leave their parts in `incoming/`, and pages their
    uploads' links in `links/`: both are removed too."""
    for folder in (media_dir() / "incoming", links_dir()):
        shutil.rmtree(folder, ignore_errors=True)
    return await on_db_thread(drop_orphans)(grace_s=0)
