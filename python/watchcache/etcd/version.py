"""Which etcd versions may back consistent reads from the cache (docs/semantics.md §4).

A consistent read from the cache asks etcd for a progress notification and then waits
until the cache has reached the revision in the answer. That is only sound when the
answer never claims a revision whose events have not yet been delivered on the watch
stream, and when an answer arrives at all. Two etcd bugs break it:

- etcd-io/etcd#15220: the answer to a progress request skipped the stream's event queue,
  so it could report a revision ahead of events still waiting to be sent — a cache
  trusting it would serve a list that misses writes it claims to include (fixed in 3.4.25
  and 3.5.8);
- etcd-io/etcd#17507: a watch that has not received an event yet is never marked as
  synced, and etcd only answers once every watch on the stream is synced, so the request
  can go unanswered and every consistent read would time out (fixed in 3.4.31 and 3.5.13).

Kubernetes therefore serves consistent reads from its watch cache only when every etcd
member runs 3.4.31 or newer and none runs 3.5.0 to 3.5.12 (``defaultFeatureSupportChecker``
in ``apiserver/pkg/storage/feature``). This module follows that rule: each endpoint's
version comes from Maintenance.Status, is parsed the way Kubernetes'
``version.ParseSemantic`` parses it (anything unparsable counts as too old), and a single
unsupported member disables the feature for good: the watch stream and the progress
request may be served by any member, so one bad member is enough to break a read.

On top of Kubernetes' rule, :class:`ConsistentReadsMode` says what the user asked for:
follow the verdict (AUTO), insist on it and refuse to start otherwise (FORCE), or never
read consistently from the cache (OFF).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import re
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from watchcache.etcd.client import EtcdClient, EtcdError
from watchcache.wire.gostrconv import is_uint64

log = logging.getLogger(__name__)

#: How the requirement reads in messages.
REQUIRED_VERSIONS = "etcd >= 3.4.31 and not 3.5.0-3.5.12 (that is 3.4.31+ or 3.5.13+)"

# Go's RE2 ``\s`` is ASCII whitespace without \v; Python's would also accept Unicode spaces.
_WS = r"[\t\n\f\r ]"
# ``.`` excludes "\n" as in Go, so a trailing newline is rejected exactly like Kubernetes does.
_VERSION = re.compile(rf"{_WS}*v?([0-9]+(?:\.[0-9]+)*)(.*)", re.ASCII)
_IDENTIFIERS = r"[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*"
_EXTRA = re.compile(rf"(?:-({_IDENTIFIERS}))?(?:\+({_IDENTIFIERS}))?{_WS}*", re.ASCII)


class _Semver(NamedTuple):
    """Sort key of a semantic version against release thresholds: a pre-release sorts just
    below its release and build metadata is ignored, as in Go's ``compareInternal``."""

    major: int
    minor: int
    patch: int
    release: bool


_V3_4_31 = _Semver(3, 4, 31, release=True)
_V3_5_0 = _Semver(3, 5, 0, release=True)
_V3_5_13 = _Semver(3, 5, 13, release=True)


def _parse_semantic(text: str) -> _Semver | None:
    numbers = _VERSION.fullmatch(text)
    if numbers is None:
        return None
    parts = numbers.group(1).split(".")
    if len(parts) != 3 or any(p.startswith("0") and p != "0" for p in parts):
        return None
    # Go parses components with strconv.ParseUint into a uint64: larger numbers are errors.
    if not all(is_uint64(p) for p in parts):
        return None
    components = [int(p) for p in parts]
    extra = _EXTRA.fullmatch(numbers.group(2))
    if extra is None:
        return None
    pre_release = extra.group(1) or ""
    for identifier in pre_release.split("."):
        numeric = is_uint64(identifier)
        if numeric and identifier.startswith("0") and identifier != "0":
            return None
    major, minor, patch = components
    return _Semver(major, minor, patch, release=not pre_release)


def supports_progress_requests(version: str) -> bool:
    """Whether an etcd member reporting ``version`` answers progress requests correctly.

    The version must be a full semantic version (``3.5`` is rejected, a leading ``v`` and
    surrounding spaces are accepted); an unparsable one is unsupported. A pre-release sorts
    below its release: ``3.5.13-rc.0`` is unsupported, but like in Kubernetes
    ``3.5.0-rc.0`` is not inside 3.5.0-3.5.12 and therefore passes.
    """
    parsed = _parse_semantic(version)
    if parsed is None:
        return False
    return not (parsed < _V3_4_31 or _V3_5_0 <= parsed < _V3_5_13)


def backoff_delays(initial: float, factor: float, cap: float) -> Iterator[float]:
    """The pauses between failed Status calls: ``initial``, then multiplied by ``factor``
    each time, never above ``cap``."""
    delay = initial
    while True:
        yield delay
        delay = min(delay * factor, cap)


class ConsistentReadsMode(enum.StrEnum):
    """What the user asked for about consistent reads (RV "") from the cache."""

    #: Kubernetes' behaviour: from the cache when every etcd member supports it, else from
    #: etcd with a warning.
    AUTO = "auto"
    #: From the cache or not at all: an unsupported member stops the server from starting.
    FORCE = "force"
    #: Never from the cache: every consistent read goes to etcd.
    OFF = "off"


class UnsafeEtcdVersionError(RuntimeError):
    """FORCE mode met an etcd member whose progress notifications cannot be trusted.
    ``endpoints`` maps each such endpoint to the version it reported."""

    def __init__(self, endpoints: dict[str, str]) -> None:
        self.endpoints = dict(endpoints)
        super().__init__(
            "refusing to serve consistent reads from the cache: "
            f"{_describe(self.endpoints)}; they need {REQUIRED_VERSIONS} "
            "(etcd-io/etcd#15220, #17507). Upgrade etcd, or choose consistent reads mode "
            "'auto' (served from etcd while unsupported) or 'off'."
        )


def _describe(endpoints: dict[str, str]) -> str:
    parts = []
    for endpoint, version in sorted(endpoints.items()):
        if _parse_semantic(version) is None:
            parts.append(f"{endpoint} reports an unparsable etcd version {version!r}")
        else:
            parts.append(f"{endpoint} runs etcd {version}")
    return ", ".join(parts)


class ProgressRequestSupport:
    """Whether the etcd members this process reads from answer progress requests correctly.

    The verdict starts unknown, and :attr:`supported` is False until a member has answered,
    so consistent reads go to etcd right after startup. The first supported member makes it
    True; any unsupported member makes it False for the life of the instance. Every endpoint
    is asked once; a failing Status call is retried with a growing pause (10 ms doubling up
    to 15 s, as in Kubernetes) until it succeeds or the check is cancelled.
    """

    def __init__(
        self,
        *,
        backoff: float = 0.01,
        backoff_factor: float = 2.0,
        backoff_cap: float = 15.0,
    ) -> None:
        self.backoff = backoff
        self.backoff_factor = backoff_factor
        self.backoff_cap = backoff_cap
        #: endpoint → version it reported, for every endpoint that answered.
        self.versions: dict[str, str] = {}
        self._verdict: bool | None = None
        self._probes: dict[str, asyncio.Task[None]] = {}
        self._warned = False

    @property
    def verdict(self) -> bool | None:
        """True, False, or None while no member has answered."""
        return self._verdict

    @property
    def supported(self) -> bool:
        return self._verdict is True

    @property
    def unsupported_endpoints(self) -> dict[str, str]:
        """The endpoints that answered with an unsupported version, and their versions."""
        return {e: v for e, v in self.versions.items() if not supports_progress_requests(v)}

    def observe(self, endpoint: str, version: str) -> bool:
        """Record the version ``endpoint`` reported; returns whether that version is
        supported."""
        self.versions[endpoint] = version
        ok = supports_progress_requests(version)
        if not ok:
            self._verdict = False
        elif self._verdict is None:
            self._verdict = True
        return ok

    def enabled(self, mode: ConsistentReadsMode) -> bool:
        """Whether a consistent read may be served from the cache right now."""
        return mode is not ConsistentReadsMode.OFF and self.supported

    async def check(self, client: EtcdClient, endpoints: Sequence[str] | None = None) -> None:
        """Ask every endpoint (the client's by default) not asked yet for its version, all at
        once, and return when each has answered. Cancelling it stops the retries; endpoints
        that had not answered are asked again by the next check."""
        await self._settle(client, endpoints, stop_when_unsupported=False)

    def start(self, client: EtcdClient) -> asyncio.Task[None]:
        """Run :meth:`check` in the background, as Kubernetes does when a store is created;
        :attr:`supported` stays False until the answers arrive."""
        return asyncio.create_task(self.check(client), name="etcd version check")

    async def verify(
        self, client: EtcdClient, mode: ConsistentReadsMode = ConsistentReadsMode.AUTO
    ) -> bool:
        """Decide at startup whether consistent reads are served from the cache.

        OFF: False without asking etcd. AUTO and FORCE wait for every member's version
        (an unreachable member is retried until it answers: bound the wait with
        ``asyncio.timeout`` if needed), but stop at the first unsupported member since the
        verdict cannot change after it. AUTO then logs one warning per instance and returns
        False; FORCE raises :class:`UnsafeEtcdVersionError`.
        """
        if mode is ConsistentReadsMode.OFF:
            return False
        await self._settle(client, None, stop_when_unsupported=True)
        offenders = self.unsupported_endpoints
        if offenders and mode is ConsistentReadsMode.FORCE:
            raise UnsafeEtcdVersionError(offenders)
        if offenders and not self._warned:
            self._warned = True
            log.warning(
                "consistent reads are served from etcd, not from the cache: %s; serving them "
                "from the cache needs %s (etcd-io/etcd#15220, #17507)",
                _describe(offenders),
                REQUIRED_VERSIONS,
            )
        return self.enabled(mode)

    async def _settle(
        self,
        client: EtcdClient,
        endpoints: Sequence[str] | None,
        *,
        stop_when_unsupported: bool,
    ) -> None:
        targets = list(dict.fromkeys(client.endpoints if endpoints is None else endpoints))
        # A probe belongs to the call that started it and dies with it; a concurrent call
        # for the same endpoint waits on it instead of asking twice, and takes over if the
        # owner is cancelled.
        owned: list[asyncio.Task[None]] = []
        try:
            while True:
                pending = [e for e in targets if e not in self.versions]
                if not pending or (stop_when_unsupported and self._verdict is False):
                    return
                waiting = []
                for endpoint in pending:
                    probe = self._probes.get(endpoint)
                    if probe is None or probe.done():
                        probe = asyncio.create_task(
                            self._probe(client, endpoint), name=f"etcd version of {endpoint}"
                        )
                        self._probes[endpoint] = probe
                        owned.append(probe)
                    waiting.append(probe)
                # asyncio.wait, unlike gather, leaves the probes running when this call is
                # cancelled, so the finally below decides which ones to stop.
                done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                for probe in done:
                    error = None if probe.cancelled() else probe.exception()
                    if error is not None and probe in owned:
                        raise error
        finally:
            for probe in owned:
                probe.cancel()
            if owned:
                await asyncio.gather(*owned, return_exceptions=True)
            for endpoint, probe in list(self._probes.items()):
                if probe.done():
                    del self._probes[endpoint]

    async def _probe(self, client: EtcdClient, endpoint: str) -> None:
        delays = backoff_delays(self.backoff, self.backoff_factor, self.backoff_cap)
        while True:
            try:
                status = await client.status(endpoint)
            except EtcdError as error:
                delay = next(delays)
                log.debug(
                    "etcd version of %s unknown, asking again in %gs: %s", endpoint, delay, error
                )
                await asyncio.sleep(delay)
                continue
            self.observe(endpoint, status.version)
            return
