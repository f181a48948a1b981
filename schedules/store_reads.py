"""The schedules (`schedules.models.Schedule`, `schedules_schedule`) read
straight from a persona's SQLite file: what the fleet console and the
overview route show of them, awake or asleep.

Plain `sqlite3` on a connection the caller opens (read-only:
console/persona_store.py), with no Django and no model, for the waker,
which reads a sleeping persona's store without starting its worker. This
module imports nothing but the standard library, so any floor may import it
(docs/design/LAYOUT.md, "Reads of a store"); tests/test_store_reads.py runs
every read here against a store the current migrations made.
"""

from __future__ import annotations

import sqlite3
from typing import Any


def listed(db: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every schedule, the running ones first, then by next fire (none last) and name."""
    rows = db.execute(
        "SELECT id, name, cron, timezone, page_id, plugin, paused, next_fire_at, last_fired_at, last_error "
        "FROM schedules_schedule ORDER BY paused, next_fire_at IS NULL, next_fire_at, name"
    )
    return [{**dict(row), "paused": bool(row["paused"])} for row in rows]


def next_fire(db: sqlite3.Connection) -> float | None:
    """The next fire of a schedule that is not paused; None when there is none."""
    (found,) = db.execute("SELECT min(next_fire_at) FROM schedules_schedule WHERE NOT paused").fetchone()
    return found
