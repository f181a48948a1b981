"""Read-only admin page for the credentials: each one's origin, user name,
which secrets are set and when it was changed and used. Never its seal:
the admin opens none, and shows none."""

from __future__ import annotations

from django.contrib import admin

from core.admin_base import ReadOnlyAdmin, when
from credentials.models import Credential


@admin.register(Credential)
class CredentialAdmin(ReadOnlyAdmin):
    list_display = ("name", "url", "username", "secrets_set", "changed", "used")
    search_fields = ("name", "url", "username")
    fields = ("name", "url", "username", "secrets_set", "changed", "used")
    readonly_fields = fields

    def get_queryset(self, request):
        return super().get_queryset(request).defer("sealed")  # never even read here

    @admin.display(description="secrets set")
    def secrets_set(self, item: Credential) -> str:
        held = [what for what, has in (("password", item.has_password), ("TOTP", item.has_totp), ("notes", item.has_notes)) if has]
        return ", ".join(held) or "none"

    @admin.display(description="changed", ordering="changed_at")
    def changed(self, item: Credential) -> str:
        return when(item.changed_at)

    @admin.display(description="last used by a flow", ordering="used_at")
    def used(self, item: Credential) -> str:
        return when(item.used_at)
