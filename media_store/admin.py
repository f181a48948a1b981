"""Read-only admin page for the media files on disk."""

from __future__ import annotations

from django.contrib import admin

from core.admin_base import ReadOnlyAdmin, when
from media_store.models import MediaFile


@admin.register(MediaFile)
class MediaFileAdmin(ReadOnlyAdmin):
    list_display = ("filename", "content_type", "size", "created", "expires", "claimed", "holder", "held")
    list_filter = ("content_type",)
    search_fields = ("holder", "filename")
    exclude = ("token",)  # a token is a download right; the admin does not show it

    @admin.display(description="created", ordering="created_at")
    def created(self, item: MediaFile) -> str:
        return when(item.created_at)

    @admin.display(description="link expires")
    def expires(self, item: MediaFile) -> str:
        return when(item.expires_at)

    @admin.display(description="claimed")
    def claimed(self, item: MediaFile) -> str:
        return when(item.claimed_at)

    @admin.display(description="held until")
    def held(self, item: MediaFile) -> str:
        return when(item.held_until)
