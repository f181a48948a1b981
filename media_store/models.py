"""Files that plugins produce, on disk under `store/media/`, with expiring tokens."""

from __future__ import annotations

from django.db import models
from django.db.models import Q, Sum


class MediaFileQuerySet(models.QuerySet):
    def unclaimed(self) -> MediaFileQuerySet:
        return self.filter(claimed_at__isnull=True)

    def unclaimed_bytes(self) -> int:
        return self.unclaimed().aggregate(total=Sum("size"))["total"] or 0

    def held_by(self, holder: str) -> MediaFileQuerySet:
        return self.filter(holder=holder)

    def available(self, now: float) -> MediaFileQuerySet:
        """Files a download may still read: unclaimed and within their deadline
        (a held file's is its hold; a plain call's is its link's)."""
        return self.unclaimed().filter(Q(held_until__gt=now) | Q(held_until__isnull=True, expires_at__gt=now))

    def finished(self, now: float) -> MediaFileQuerySet:
        """Files to delete: claimed, or past their deadline."""
        past_hold = Q(held_until__lte=now)
        past_link = Q(held_until__isnull=True, expires_at__lte=now)
        return self.filter(Q(claimed_at__isnull=False) | past_hold | past_link)


class MediaFile(models.Model):
    token = models.CharField(max_length=64, unique=True)
    # A random name under MEDIA_DIR, unrelated to the token.
    path = models.CharField(max_length=100, unique=True)
    filename = models.CharField(max_length=200)
    size = models.BigIntegerField()
    content_type = models.CharField(max_length=100)
    created_at = models.FloatField()
    # When the plain call's link lapses (MEDIA_TTL_S after the put).
    expires_at = models.FloatField(db_index=True)
    claimed_at = models.FloatField(null=True, blank=True)
    # An optional holder (a job id) keeps the file, and its link, until
    # held_until; from then on the hold, not expires_at, is the file's deadline.
    holder = models.CharField(max_length=64, null=True, blank=True, db_index=True)
    held_until = models.FloatField(null=True, blank=True)

    objects = MediaFileQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.filename} ({self.size} bytes)"

    def link(self) -> dict:
        return {
            "url": f"/api/v1/media/{self.token}",
            "expires_at": round(self.expires_at, 3),
            "content_type": self.content_type,
            "size": self.size,
        }

    def held(self, now: float) -> bool:
        return self.holder is not None and self.held_until is not None and self.held_until > now
