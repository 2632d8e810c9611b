"""The conformance rows run once per backend (tests/support/conformance_backends.py).

A test that takes the ``backend`` fixture is parametrized over every backend, with ids
``[cache]``, ``[synced]`` and ``[store]``. A row that applies to some backends only says so,
and why, in one line::

    @pytest.mark.backends("synced", why="consistent reads wait for etcd's current revision")

The etcd of ``synced`` and ``store`` is the module's (``module_etcd`` in tests/conftest.py,
started only when a module first needs it and stopped by PID when the module ends); each
test works under a key prefix of its own.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator

import pytest
from conformance_backends import BACKENDS, Backend, open_backend


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "backends(*names, why): run this conformance row on these backends only, for the "
        "reason given",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend_name" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("backends")
    names: tuple[str, ...] = BACKENDS
    if marker is not None:
        names = tuple(marker.args)
        unknown = set(names) - set(BACKENDS)
        if unknown or not names:
            raise pytest.UsageError(f"{metafunc.definition.nodeid}: unknown backends {unknown}")
        if set(names) != set(BACKENDS) and not marker.kwargs.get("why"):
            raise pytest.UsageError(
                f"{metafunc.definition.nodeid}: a row for some backends only says why"
            )
    metafunc.parametrize("backend_name", names, ids=names)


@pytest.fixture
def etcd_endpoints(request: pytest.FixtureRequest, backend_name: str) -> list[str] | None:
    """The module's etcd for the backends that need one (started on first use)."""
    if backend_name == "cache":
        return None
    endpoints: list[str] = request.getfixturevalue("module_etcd").endpoints
    return endpoints


@pytest.fixture
async def backend(
    backend_name: str, etcd_endpoints: list[str] | None, rng: random.Random
) -> AsyncIterator[Backend]:
    """This row's backend, not started yet (writes before ``start()`` are its initial
    state); stopped after the test, failed or not."""
    async with open_backend(backend_name, rng, etcd_endpoints) as opened:
        yield opened
