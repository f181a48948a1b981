"""The API's error: the one exception every layer raises for an answer other
than success. `core.rest` turns it (and every other failure) into the envelope."""

from __future__ import annotations

from typing import Any

API_PREFIX = "/api/v1/"


class ApiError(Exception):
    """An answer other than success: its status and one sentence for the client."""

    def __init__(self, status: int, message: str, page_id: str | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.page_id = page_id

    def envelope(self) -> dict[str, Any]:
        return error_body(self.message, self.page_id)


def error_body(message: str, page_id: str | None) -> dict[str, Any]:
    return {"success": False, "error": message, "page_id": page_id}


def first_line(text: str) -> str:
    """The first line of a message, at most 300 characters ("no detail" when empty)."""
    return (text or "").strip().splitlines()[0][:300] if (text or "").strip() else "no detail"


def error_line(error: BaseException) -> str:
    """`first_line` of an exception: Playwright's `message`, else its text, else its class."""
    return first_line(getattr(error, "message", None) or str(error) or type(error).__name__)


def internal_error(page_id: str | None = None) -> ApiError:
    return ApiError(500, "The worker hit an unexpected error; the details are in its log.", page_id)
