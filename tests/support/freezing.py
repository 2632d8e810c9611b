"""Freezing a process (SIGSTOP) in a test, and knowing it is frozen.

``kill(pid, SIGSTOP)`` returns as soon as the signal is queued; the process's threads stop
when each next runs. A member frozen that way can still answer a request sent right after
the kill, so a test that times a call against a frozen member must first see every thread
in the stopped state (``T`` in ``/proc/<pid>/task/<tid>/stat``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path


def _thread_states(pid: int) -> list[str]:
    states = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            stat = (task / "stat").read_text()
            # The command name is in parentheses and may hold spaces: the state follows it.
            states.append(stat[stat.rindex(")") + 2])
    return states


def wait_until_stopped(pid: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not all(state in "Tt" for state in _thread_states(pid)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"process {pid} did not stop within {timeout} s of SIGSTOP")
        time.sleep(0.001)


@contextlib.contextmanager
def frozen(pid: int) -> Iterator[None]:
    """SIGSTOP ``pid`` and wait until all its threads are stopped; SIGCONT on leaving the
    block, whatever happens in it."""
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_until_stopped(pid)
        yield
    finally:
        os.kill(pid, signal.SIGCONT)
