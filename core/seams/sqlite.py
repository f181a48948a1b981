"""The SQLite connection under Django's (piece 12; docs/design/SEAMS.md
says what it relies on, and why). A module of its own because
core/db_thread.py uses it, and piece 8 uses core/db_thread.py."""

from __future__ import annotations

from typing import Any


def run_sqlite_script(connection: Any, script: str) -> None:
    """Run `script` on the SQLite connection under Django's `connection`,
    each statement stepped to its end: a cursor's `execute` steps a PRAGMA
    once (Python's sqlite3), and each step of `incremental_vacuum` frees one
    page. Outside a transaction only (`executescript` commits first).
    SQLite's errors come out as Django's."""
    connection.ensure_connection()
    with connection.wrap_database_errors:
        connection.connection.executescript(script)
