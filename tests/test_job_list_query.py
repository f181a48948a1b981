"""The job list reads the store in one indexed query, whatever the filters."""

from __future__ import annotations

import time

import pytest

from jobs.models import Job


@pytest.mark.parametrize(
    "query",
    [
        {},
        {"state": "running"},
        {"page_id": "main"},
        {"plugin": "demo/get-following"},
        {"state": "done", "page_id": "main", "after": (1796206657.058, "a47363e4e411c34b")},
    ],
)
def test_every_list_query_is_served_by_an_index(db, query):
    plan = Job.objects.held(time.time()).listed(**query)[:51].explain()
    # SQLite's plan names the index it searches or scans; "SCAN jobs_job" alone would read every row.
    assert "USING INDEX" in plan or "USING COVERING INDEX" in plan, plan
