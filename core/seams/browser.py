"""Seams in Playwright (piece 15; docs/design/SEAMS.md says what it relies
on, and why). Piece 17 (`send_cdp`, `on_cdp_events`) went back to
Playwright's public `CDPSession.send` and `on`: SEAMS.md says why."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def download_file_of(download: Any) -> Path:
    """The file a running download is written to, from its start: Playwright
    gives it (`Download.path()`) only once the download has finished, but its
    artifact knows it from the first byte, in the folder the browser was
    launched with (`downloads_path`)."""
    return Path(download._impl_obj._artifact._initializer["absolutePath"])
