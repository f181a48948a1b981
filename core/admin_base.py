"""Shared pieces of the read-only admin pages: admin is for reading."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from django.contrib import admin
from django.utils.html import format_html


def pretty_json(value) -> str:
    """JSON indented, its non-ASCII characters as they are (not `\\u00e9`),
    and HTML-escaped by format_html."""
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
    return format_html("<pre style='white-space: pre-wrap'>{}</pre>", text)


def when(epoch: float | None) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC" if epoch else "-"


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
