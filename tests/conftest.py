"""Shared test configuration: hypothesis profiles and the reproducible random seed.

Hypothesis profiles (pick one with env ``HYPOTHESIS_PROFILE``; the default is ``ci`` when env
``CI`` is set, else ``dev``):

* ``ci``: bounded so the whole property suite runs in about two minutes on two cores;
* ``dev``: hypothesis' usual example counts, for the edit-test loop;
* ``nightly``: many more examples and longer state-machine runs.

No profile has a deadline: native calls, ``gc.collect()`` and ``check_invariants()`` vary too
much in time for a per-example deadline to mean anything.

Real etcd for the tests that need it (never a fake): ``etcd`` is one member of trixie's etcd
3.5, ``second_etcd`` another such cluster (for resources placed on an etcd of their own),
``etcd_cluster`` three members, ``etcd_34`` bookworm's 3.4.23 (progress-notify bug; for the
version safeguard). Members start on free loopback ports with a temporary data dir and
are stopped by PID when the test ends, failed or not.

Randomness outside hypothesis comes from the ``rng`` fixture, seeded from env
``WATCHCACHE_SEED`` (a random seed when unset). The seed is printed in the report header and
in the captured output of every test that uses it; rerun with ``WATCHCACHE_SEED=<seed>``.
Each test's generator is derived from the seed and the test's id, so a single test reproduces
on its own, whatever ran before it.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from watchcache.etcd.process import EtcdCluster

_SLOW_DATA_CHECKS = [HealthCheck.too_slow, HealthCheck.data_too_large]

settings.register_profile(
    "ci",
    max_examples=300,
    stateful_step_count=60,
    deadline=None,
    print_blob=True,
    suppress_health_check=_SLOW_DATA_CHECKS,
)
settings.register_profile(
    "dev",
    max_examples=100,
    stateful_step_count=50,
    deadline=None,
    print_blob=True,
    suppress_health_check=_SLOW_DATA_CHECKS,
)
settings.register_profile(
    "nightly",
    max_examples=2_000,
    stateful_step_count=200,
    deadline=None,
    print_blob=True,
    suppress_health_check=_SLOW_DATA_CHECKS,
)

HYPOTHESIS_PROFILE = os.environ.get("HYPOTHESIS_PROFILE") or (
    "ci" if os.environ.get("CI") else "dev"
)
settings.load_profile(HYPOTHESIS_PROFILE)


def _session_seed() -> int:
    raw = os.environ.get("WATCHCACHE_SEED", "").strip()
    if not raw:
        return random.SystemRandom().randrange(2**32)
    try:
        return int(raw, 0)
    except ValueError:
        raise pytest.UsageError(f"WATCHCACHE_SEED must be an integer, got {raw!r}") from None


SEED = _session_seed()


def pytest_report_header() -> list[str]:
    return [f"WATCHCACHE_SEED={SEED}  HYPOTHESIS_PROFILE={HYPOTHESIS_PROFILE}"]


@pytest.fixture
def seed(request: pytest.FixtureRequest) -> int:
    """This test's seed: derived from ``WATCHCACHE_SEED`` and the test id, and printed."""
    derived = random.Random(f"{SEED}:{request.node.nodeid}").randrange(2**63)
    print(f"WATCHCACHE_SEED={SEED} (this test: {derived})")
    return derived


@pytest.fixture
def rng(seed: int) -> random.Random:
    """A generator for non-hypothesis randomness, reproducible through ``WATCHCACHE_SEED``."""
    return random.Random(seed)


@pytest.fixture
def etcd() -> Iterator[EtcdCluster]:
    with EtcdCluster(1) as cluster:
        yield cluster


@pytest.fixture
def second_etcd() -> Iterator[EtcdCluster]:
    """Another one-member cluster, independent of ``etcd`` (its own ports, data and
    revisions): where ``--etcd-servers-overrides`` puts a resource."""
    with EtcdCluster(1) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def module_etcd() -> Iterator[EtcdCluster]:
    """One etcd member shared by a test module (stopped by PID when the module ends): for
    modules whose tests each work in keys or namespaces of their own."""
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
def etcd_34() -> Iterator[EtcdCluster]:
    with EtcdCluster(1, suite="bookworm") as cluster:
        yield cluster
