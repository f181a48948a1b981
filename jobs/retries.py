"""Retries (X-Retry): which attempts' ends are worth another attempt, and
when the next one goes back in line.

An attempt that fails for a reason that may pass (a time limit, the browser
or the site failing, a restart) goes back to its page's queue after a
back-off of `X-Retry-Backoff × 2^(k-1)` seconds (k the attempt that just
ended), within ±20 % so that jobs failing together do not come back
together. Everything else ends the job as it would without X-Retry.

Which failures may pass is the errors' to say (`transient`, core/errors.py),
not their statuses': the attempt's outcome carries its error's word.
"""

from __future__ import annotations

import random

from jobs.options import MAX_QUEUE_TIMEOUT_S
from plugins.running import Outcome

JITTER = 0.2


def transient(outcome: Outcome) -> bool:
    """Whether the attempt's end is worth another: it failed, and its error
    may pass (a PluginError's `retry=` is its word)."""
    return bool(outcome.transient) and outcome.status != 200


def back_off_s(first_s: float, ended_attempt: int, *, rng: random.Random | None = None) -> float:
    """Seconds before the attempt after `ended_attempt` (from 1) goes back in line."""
    spread = (rng or random).uniform(1 - JITTER, 1 + JITTER)
    return first_s * 2 ** (ended_attempt - 1) * spread


def wait_in_line_s(queue_timeout: float | None) -> float:
    """How long a retry may wait for its page once back in line: the job's
    X-Queue-Timeout, or the longest a queued job may wait when it sent none
    (it was accepted already: a busy page delays it rather than ends it)."""
    return queue_timeout if queue_timeout is not None else MAX_QUEUE_TIMEOUT_S
