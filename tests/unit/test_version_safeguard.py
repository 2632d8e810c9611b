"""The etcd version safeguard without etcd (docs/semantics.md §4): the version rule, the verdict
matrix of §4.4 through ``observe``, the probing loop against a scripted Status, and the
three consistent-reads modes. The same behaviour against real etcd 3.5.16 and 3.4.23 is in
tests/integration/test_version_safeguard.py.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable

import pytest

from watchcache.etcd.client import EtcdClient, EtcdUnavailableError
from watchcache.etcd.proto import rpc_pb2
from watchcache.etcd.version import (
    ConsistentReadsMode,
    ProgressRequestSupport,
    UnsafeEtcdVersionError,
    backoff_delays,
    supports_progress_requests,
)

LOGGER = "watchcache.etcd.version"
A, B, C = "10.0.0.1:2379", "10.0.0.2:2379", "10.0.0.3:2379"

Step = str | Exception


class ScriptedClient(EtcdClient):
    """Answers Maintenance.Status from a script instead of etcd: per endpoint, versions or
    exceptions consumed in order, the last one repeating. An endpoint with a gate waits for
    it before answering. Never opens a channel."""

    def __init__(self, script: dict[str, list[Step]]) -> None:
        super().__init__(list(script))
        self.script = script
        self.gates: dict[str, asyncio.Event] = {}
        self.calls: list[str] = []
        self._asked: dict[str, asyncio.Event] = {}

    def asked(self, endpoint: str) -> asyncio.Event:
        """Set once ``endpoint`` has been asked."""
        return self._asked.setdefault(endpoint, asyncio.Event())

    async def status(
        self, endpoint: str, *, timeout: float | None = None
    ) -> rpc_pb2.StatusResponse:
        self.calls.append(endpoint)
        self.asked(endpoint).set()
        gate = self.gates.get(endpoint)
        if gate is not None:
            await gate.wait()
        steps = self.script[endpoint]
        step = steps.pop(0) if len(steps) > 1 else steps[0]
        if isinstance(step, Exception):
            raise step
        return rpc_pb2.StatusResponse(version=step)


def down() -> EtcdUnavailableError:
    return EtcdUnavailableError("etcd unavailable: connection refused")


def fast() -> ProgressRequestSupport:
    return ProgressRequestSupport(backoff=0.001, backoff_factor=2.0, backoff_cap=0.004)


async def eventually(condition: Callable[[], bool], timeout: float = 2.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.001)


# -- the version rule ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "supported"),
    [
        # The thresholds of §4.2 on both sides.
        ("3.4.23", False),  # bookworm's etcd-server
        ("3.4.30", False),
        ("3.4.31", True),
        ("3.4.99", True),
        ("3.5.0", False),
        ("3.5.8", False),  # fixes #15220 only
        ("3.5.12", False),
        ("3.5.13", True),
        ("3.5.14", True),
        ("3.5.16", True),  # trixie's etcd-server
        ("3.6.0", True),
        ("3.7.1", True),
        ("4.0.0", True),
        ("2.3.8", False),
        ("0.0.0", False),
        # Pre-releases sort just below their release (Go's compareInternal) ...
        ("3.5.13-rc.0", False),
        ("3.4.31-rc.1", False),
        ("3.5.14-alpha.0", True),
        ("3.6.0-rc.0", True),
        # ... so, as in Kubernetes, a 3.5.0 pre-release sorts before 3.5.0 and passes as a
        # late 3.4.
        ("3.5.0-rc.0", True),
        # Build metadata does not count.
        ("3.5.13+dirty", True),
        ("3.5.12+dirty", False),
        ("3.5.13-rc.0+build.1", False),
        # What ParseSemantic tolerates: a leading "v", surrounding spaces.
        ("v3.5.16", True),
        (" 3.5.16\t", True),
        ("v3.4.30", False),
        # What it rejects: not exactly three numbers, leading zeros, junk after the patch.
        ("", False),
        ("garbage", False),
        ("3.5", False),  # ParseSemantic needs major.minor.patch; "3.5" is no etcd release
        ("3", False),
        ("3.5.16.1", False),
        ("3.05.16", False),
        ("03.5.16", False),
        ("3.5.016", False),
        ("3.5.16a", False),
        ("3.5.16-", False),
        ("3.5.16-rc..0", False),
        ("3.5.13-rc.01", False),  # numeric pre-release identifiers have no leading zero
        ("3.5.--a", False),  # Kubernetes' own "Malformed version" case
        ("V3.5.16", False),
        ("3.5.16\n", False),  # Go's "." stops at the newline, so this never matches
        ("18446744073709551616.0.0", False),  # does not fit Go's uint64
        ("\u0663.\u0665.\u0661\u0666", False),  # Arabic-Indic digits are not digits to Go
    ],
)
def test_supports_progress_requests(version: str, supported: bool) -> None:
    assert supports_progress_requests(version) is supported


def test_backoff_is_kubernetes_10ms_doubling_capped_at_15s() -> None:
    support = ProgressRequestSupport()
    delays = backoff_delays(support.backoff, support.backoff_factor, support.backoff_cap)
    first = list(itertools.islice(delays, 14))
    expected = [0.01 * 2**step for step in range(11)] + [15.0, 15.0, 15.0]
    assert first == pytest.approx(expected)


# -- the verdict (§4.3, §4.4) -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("versions", "supported"),
    [
        ([], False),
        (["3.4.31"], True),
        (["3.5.13"], True),
        (["3.5.14"], True),
        (["3.6.0"], True),
        (["3.4.30"], False),
        (["3.5.0"], False),
        (["3.5.12"], False),
        (["3.5.13", "3.5.10"], False),
        (["3.5.10", "3.5.13"], False),
        (["3.4.31", "3.5.13", "3.5.14", "3.6.0"], True),
        (["3.6.0", "garbage"], False),
    ],
)
def test_behaviour_matrix(versions: list[str], supported: bool) -> None:
    support = ProgressRequestSupport()
    for i, version in enumerate(versions):
        support.observe(f"10.0.0.{i}:2379", version)
    assert support.supported is supported
    assert support.verdict is (supported if versions else None)
    assert support.versions == {f"10.0.0.{i}:2379": v for i, v in enumerate(versions)}


def test_unsupported_is_sticky() -> None:
    support = ProgressRequestSupport()
    assert support.observe(A, "3.4.0") is False
    assert support.observe(B, "3.4.1") is False
    assert support.observe(C, "3.6.0") is True
    assert support.supported is False
    assert support.verdict is False
    assert support.unsupported_endpoints == {A: "3.4.0", B: "3.4.1"}


def test_supported_turns_false_when_an_unsupported_member_appears() -> None:
    support = ProgressRequestSupport()
    support.observe(A, "3.5.16")
    assert support.supported
    support.observe(B, "3.5.12")
    assert not support.supported


def test_unknown_is_not_supported_in_any_mode() -> None:
    support = ProgressRequestSupport()
    assert support.verdict is None
    assert not support.supported
    assert not any(support.enabled(mode) for mode in ConsistentReadsMode)


def test_enabled_follows_the_mode() -> None:
    support = ProgressRequestSupport()
    support.observe(A, "3.5.16")
    assert support.enabled(ConsistentReadsMode.AUTO)
    assert support.enabled(ConsistentReadsMode.FORCE)
    assert not support.enabled(ConsistentReadsMode.OFF)


def test_modes_parse_from_their_flag_values() -> None:
    assert [ConsistentReadsMode(v) for v in ("auto", "force", "off")] == list(ConsistentReadsMode)


# -- checking endpoints ---------------------------------------------------------------------------


async def test_check_asks_every_endpoint_once() -> None:
    client = ScriptedClient({A: ["3.5.16"], B: ["3.4.31"]})
    support = fast()
    await support.check(client)
    await support.check(client)
    assert sorted(client.calls) == [A, B]
    assert support.versions == {A: "3.5.16", B: "3.4.31"}
    assert support.supported


async def test_check_of_a_later_client_only_asks_new_endpoints_and_stays_false() -> None:
    support = fast()
    first = ScriptedClient({A: ["3.4.0"], B: ["3.4.1"]})
    await support.check(first)
    later = ScriptedClient({B: ["3.4.1"], C: ["3.6.0"]})
    await support.check(later)
    assert later.calls == [C]
    assert support.supported is False


async def test_check_of_explicit_endpoints() -> None:
    client = ScriptedClient({A: ["3.5.16"], B: ["3.4.23"]})
    support = fast()
    await support.check(client, [B, B])
    assert client.calls == [B]
    assert support.versions == {B: "3.4.23"}


async def test_endpoints_are_asked_concurrently() -> None:
    client = ScriptedClient({A: ["3.5.16"], B: ["3.5.16"]})
    # A answers only once B has been asked and B only once A has: one at a time would hang.
    client.gates[A] = client.asked(B)
    client.gates[B] = client.asked(A)
    support = fast()
    async with asyncio.timeout(2):
        await support.check(client)
    assert support.versions == {A: "3.5.16", B: "3.5.16"}


async def test_failing_status_is_retried_with_backoff(caplog: pytest.LogCaptureFixture) -> None:
    client = ScriptedClient({A: [down(), down(), down(), down(), "3.5.16"]})
    support = fast()
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        async with asyncio.timeout(2):
            await support.check(client)
    assert client.calls == [A] * 5
    assert support.supported
    pauses = [r.getMessage().split(" in ")[1].split("s:")[0] for r in caplog.records]
    assert pauses == ["0.001", "0.002", "0.004", "0.004"]


async def test_supported_stays_false_while_status_fails_and_cancel_is_clean() -> None:
    client = ScriptedClient({A: [down()]})
    support = fast()
    task = support.start(client)
    await eventually(lambda: len(client.calls) >= 5)
    assert support.verdict is None
    assert not support.supported
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert asyncio.all_tasks() == {asyncio.current_task()}
    # The endpoint never answered, so it is not "checked": the next check asks again.
    client.script[A] = ["3.5.16"]
    await support.check(client)
    assert support.versions == {A: "3.5.16"}
    assert support.supported


async def test_unexpected_error_is_raised_not_retried() -> None:
    client = ScriptedClient({A: [ValueError("bad endpoint")]})
    support = fast()
    with pytest.raises(ValueError, match="bad endpoint"):
        await support.check(client)
    assert client.calls == [A]
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_concurrent_checks_share_one_status_call() -> None:
    client = ScriptedClient({A: ["3.5.16"]})
    client.gates[A] = asyncio.Event()
    support = fast()
    first = asyncio.create_task(support.check(client))
    second = asyncio.create_task(support.check(client))
    await eventually(lambda: client.calls == [A])
    client.gates[A].set()
    await asyncio.gather(first, second)
    assert client.calls == [A]
    assert support.supported


async def test_a_waiting_check_takes_over_when_the_owner_is_cancelled() -> None:
    client = ScriptedClient({A: ["3.5.16"]})
    client.gates[A] = asyncio.Event()
    support = fast()
    owner = asyncio.create_task(support.check(client))
    await eventually(lambda: client.calls == [A])
    waiter = asyncio.create_task(support.check(client))
    await asyncio.sleep(0)
    owner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await owner
    await eventually(lambda: client.calls == [A, A])
    client.gates[A].set()
    async with asyncio.timeout(2):
        await waiter
    assert support.versions == {A: "3.5.16"}


# -- modes --------------------------------------------------------------------------------------


async def test_auto_supported_returns_true_silently(caplog: pytest.LogCaptureFixture) -> None:
    client = ScriptedClient({A: ["3.5.16"], B: ["3.4.31"]})
    support = fast()
    assert await support.verify(client) is True
    assert await support.verify(client, ConsistentReadsMode.AUTO) is True
    assert [r for r in caplog.records if r.name == LOGGER] == []


async def test_auto_unsupported_returns_false_and_warns_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = ScriptedClient({A: ["3.5.16"], B: ["3.5.10"]})
    support = fast()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert await support.verify(client, ConsistentReadsMode.AUTO) is False
        assert await support.verify(client, ConsistentReadsMode.AUTO) is False
    warnings = [r for r in caplog.records if r.name == LOGGER]
    assert len(warnings) == 1
    assert warnings[0].levelno == logging.WARNING
    message = warnings[0].getMessage()
    assert f"{B} runs etcd 3.5.10" in message
    assert A not in message
    assert "3.4.31" in message
    assert "3.5.0-3.5.12" in message


async def test_force_supported_returns_true() -> None:
    client = ScriptedClient({A: ["3.5.13"], B: ["3.6.0"]})
    assert await fast().verify(client, ConsistentReadsMode.FORCE) is True


async def test_force_unsupported_refuses_naming_endpoint_and_version(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = ScriptedClient({A: ["3.5.16"], B: ["3.4.23"]})
    support = fast()
    with pytest.raises(UnsafeEtcdVersionError) as raised:
        await support.verify(client, ConsistentReadsMode.FORCE)
    assert raised.value.endpoints == {B: "3.4.23"}
    message = str(raised.value)
    assert f"{B} runs etcd 3.4.23" in message
    assert ">= 3.4.31" in message
    assert "not 3.5.0-3.5.12" in message
    assert [r for r in caplog.records if r.name == LOGGER and r.levelno >= logging.WARNING] == []
    assert not support.enabled(ConsistentReadsMode.FORCE)


async def test_force_names_an_unparsable_version() -> None:
    client = ScriptedClient({A: [""]})
    with pytest.raises(UnsafeEtcdVersionError, match=f"{A} reports an unparsable etcd version ''"):
        await fast().verify(client, ConsistentReadsMode.FORCE)


async def test_an_unsupported_member_decides_without_waiting_for_an_unreachable_one() -> None:
    client = ScriptedClient({A: [down()], B: ["3.4.23"]})
    support = fast()
    async with asyncio.timeout(2):
        with pytest.raises(UnsafeEtcdVersionError):
            await support.verify(client, ConsistentReadsMode.FORCE)
        assert await support.verify(client, ConsistentReadsMode.AUTO) is False
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_off_never_asks_etcd() -> None:
    client = ScriptedClient({A: ["3.5.16"]})
    support = fast()
    assert await support.verify(client, ConsistentReadsMode.OFF) is False
    assert client.calls == []
    assert support.verdict is None
