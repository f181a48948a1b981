"""A store gives the pages its sweeps freed back to the disk: made with
incremental auto-vacuum, its file shrinks once `release_free_pages` runs
(the store sweep's last step). In process, on the test database's real file."""

from __future__ import annotations

import pytest
from django.db import connection

from activity.models import RequestLogEntry
from core.db_thread import release_free_pages


def pragma(name: str) -> int:
    with connection.cursor() as cursor:
        return cursor.execute(f"PRAGMA {name}").fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_the_pages_a_sweep_freed_go_back_to_the_disk():
    assert pragma("auto_vacuum") == 2  # INCREMENTAL: set by the store's init command before its tables
    before = pragma("page_count")
    RequestLogEntry.objects.bulk_create(
        RequestLogEntry(started_at=n, method="GET", route="main", path="/api/v1/main" + "x" * 400, page_id="main",
                        status=200, duration_ms=1.0)
        for n in range(5000)
    )
    grown = pragma("page_count")
    assert grown > before + 400  # about 2 MB of rows
    RequestLogEntry.objects.all().delete()
    assert pragma("freelist_count") > 400 and pragma("page_count") == grown  # freed, but the file keeps them

    assert release_free_pages() > 400
    assert pragma("freelist_count") == 0
    assert pragma("page_count") <= before + 5
    assert release_free_pages() == 0  # nothing left to give back
