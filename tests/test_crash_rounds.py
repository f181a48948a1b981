"""One crash round in the normal suite; `scripts/soak.sh` runs twenty."""

from __future__ import annotations

import random

from harness.receiver import Receiver
from tests.support.crash import crash_round


def test_a_crash_round_loses_no_job(tmp_path):
    with Receiver() as receiver:
        report = crash_round(tmp_path / "store", receiver, random.Random(7), pages=4)
    assert report.problems == []
    assert report.jobs == 4 and report.delivered == 2 and report.polled == 2
