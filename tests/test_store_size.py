"""A store gives the pages its sweeps freed back to the disk: made with
incremental auto-vacuum, its file shrinks once `release_free_pages` runs
(the store sweep's last step). In process, on the test database's real file."""

from __future__ import annotations

import sqlite3

import pytest
from django.db import connection, connections

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


@pytest.mark.django_db(transaction=True)
def test_a_new_connection_to_an_existing_store_writes_nothing():
    """The auto-vacuum PRAGMA is given to a store only while it has no
    tables: on one that has them, it would rewrite the file's header (a write,
    and the write lock) on every connection, an admin page's or a reading
    command's among them."""
    path = connection.settings_dict["NAME"]
    with sqlite3.connect(path) as watcher:
        before = watcher.execute("PRAGMA data_version").fetchone()[0]
        other = connections.create_connection("default")
        try:
            other.ensure_connection()
            with other.cursor() as cursor:
                assert cursor.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
        finally:
            other.close()
        assert watcher.execute("PRAGMA data_version").fetchone()[0] == before  # nobody else wrote


@pytest.mark.django_db(transaction=True)  # lets a connection of the test's own open
def test_a_store_made_now_takes_incremental_auto_vacuum(tmp_path):
    """What a new store's first connection does, on a real empty file in WAL
    mode (the store's init command), and on a file that already has tables."""
    from core.db_thread import new_store_vacuums

    for name, has_table in (("new.db", False), ("old.db", True)):
        wrapper = connections.create_connection("default")
        wrapper.settings_dict = {**wrapper.settings_dict, "NAME": str(tmp_path / name)}
        if has_table:
            with sqlite3.connect(tmp_path / name) as made:
                made.execute("CREATE TABLE t (x)")
        try:
            wrapper.ensure_connection()  # connection_created: new_store_vacuums (core/apps.py)
            with wrapper.cursor() as cursor:
                vacuum = cursor.execute("PRAGMA auto_vacuum").fetchone()[0]
                mode = cursor.execute("PRAGMA journal_mode").fetchone()[0]
                new_store_vacuums(sender=None, connection=wrapper)  # once it has tables: nothing more
                cursor.execute("CREATE TABLE IF NOT EXISTS u (x)")
                new_store_vacuums(sender=None, connection=wrapper)
                assert cursor.execute("PRAGMA auto_vacuum").fetchone()[0] == vacuum
        finally:
            wrapper.close()
        assert (vacuum, mode) == ((0, "wal") if has_table else (2, "wal"))
