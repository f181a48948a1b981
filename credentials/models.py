"""A persona's credentials: for each site (its origin), a user name in plain
text and its secrets (password, TOTP secret, notes) sealed together
(credentials/sealing.py). Nothing but the seal holds a secret: which ones
are set is kept beside it, so a listing never opens a seal."""

from __future__ import annotations

from typing import Any

from django.db import models


class CredentialQuerySet(models.QuerySet):
    def named(self, name: str) -> CredentialQuerySet:
        return self.filter(name=name)

    def by_name(self) -> CredentialQuerySet:
        return self.order_by("name")


class Credential(models.Model):
    # 1 to 64 of a-z, 0-9, '_' and '-' (credentials/rules.py).
    name = models.CharField(max_length=64, primary_key=True)
    # The site's origin, `scheme://host[:port]`, as a browser writes it.
    url = models.CharField(max_length=300)
    # Not a secret: a read of the credential answers it.
    username = models.TextField(blank=True, default="")
    # The secrets, sealed for this row's name and url: a seal copied onto
    # another row does not open.
    sealed = models.TextField()
    has_password = models.BooleanField(default=False)
    has_totp = models.BooleanField(default=False)
    has_notes = models.BooleanField(default=False)
    changed_at = models.FloatField()  # epoch seconds of the last PUT
    used_at = models.FloatField(null=True, blank=True)  # epoch seconds of the last reveal to a flow

    objects = CredentialQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.url})"

    def shown(self) -> dict[str, Any]:
        """What a full key reads: never a secret, only which are set."""
        return {
            "name": self.name,
            "url": self.url,
            "username": self.username,
            "secrets": {"password": self.has_password, "totp": self.has_totp, "notes": self.has_notes},
            "changed_at": self.changed_at,
            "used_at": self.used_at,
        }

    def for_reader(self) -> dict[str, Any]:
        """What a read key reads (PENELOPE_READ_KEYS): the name and the origin."""
        return {"name": self.name, "url": self.url}
