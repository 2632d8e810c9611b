"""Fixtures for the reliability tests: real etcd processes and a tally printed at the end.

The etcd fixtures (``etcd``, ``etcd_cluster``: never shared, since fault tests leave
members killed, frozen or restarted) are tests/conftest.py's. Here:

* ``etcd_client``: an :class:`EtcdClient` on ``etcd``;
* ``reliability_tally``: the session's counts of faults injected and watch events checked,
  printed as one summary line at the end of the run (``pytest_terminal_summary``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

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
async def etcd_client(etcd: EtcdCluster) -> AsyncIterator[EtcdClient]:
    async with EtcdClient(etcd.endpoints, timeout=10.0) as client:
        yield client
