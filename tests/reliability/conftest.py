"""Fixtures for the reliability tests: real etcd processes and a tally printed at the end.

tests/integration/conftest.py is not visible from here, so the etcd fixtures are repeated:

* ``etcd``: one etcd 3.5 member on free loopback ports, a fresh data dir, stopped by PID;
* ``etcd_cluster``: three members, for one test (fault tests leave members killed, frozen
  or restarted: never shared);
* ``etcd_client``: an :class:`EtcdClient` on ``etcd``;
* ``reliability_tally``: the session's counts of faults injected and watch events checked,
  printed as one summary line at the end of the run (``pytest_terminal_summary``).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncIterator, Iterator

import pytest
from watch_validator import Tally

from watchcache.etcd.client import EtcdClient
from watchcache.etcd.process import EtcdCluster

_TALLY = Tally()


@pytest.fixture(scope="session")
def reliability_tally() -> Tally:
    return _TALLY


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _TALLY.faults or _TALLY.events_checked:
        terminalreporter.write_line(f"reliability: {_TALLY.line()}")


@pytest.fixture
def etcd() -> Iterator[EtcdCluster]:
    with EtcdCluster(1) as cluster:
        yield cluster


@pytest.fixture
def etcd_cluster() -> Iterator[EtcdCluster]:
    cluster = EtcdCluster(3)
    try:
        cluster.start()
        yield cluster
    finally:
        # A member a failed test left frozen (SIGSTOP) would ignore the SIGTERM of stop()
        # for its whole timeout: wake every member first.
        for member in cluster.members:
            if member.running and member.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(member.pid, signal.SIGCONT)
        cluster.stop()


@pytest.fixture
async def etcd_client(etcd: EtcdCluster) -> AsyncIterator[EtcdClient]:
    async with EtcdClient(etcd.endpoints, timeout=10.0) as client:
        yield client
