"""A child bound to its parent by the kernel (`PR_SET_PDEATHSIG`): it gets
SIGTERM when the parent dies, however the parent dies. Used for the waker's
workers and its worker template, and for the workers the template forks."""

from __future__ import annotations

import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1
# Loaded once, at import: `end_with` runs between a fork and an exec, where
# loading a library could wait on a lock another thread held at the fork.
_libc = ctypes.CDLL(None, use_errno=True)


def end_with(parent_pid: int) -> None:
    """In the child: SIGTERM when `parent_pid` dies, or now if it already has."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent_pid:  # the parent died before the line above
        os.kill(os.getpid(), signal.SIGTERM)
