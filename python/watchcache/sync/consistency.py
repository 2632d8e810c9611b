"""The inconsistency detector: does the cache hold exactly what etcd held at its revision?

Kubernetes' checker (docs/semantics.md §8.1) lists the cache, then lists etcd at exactly the
cache's revision and compares digests of every item's identity and version. Here the
identity is the etcd key and the version its mod revision, hashed with FNV-1a 64 in key
order: the cache side comes from one snapshot without touching values, the etcd side from
keys-only ranges (pages of 10,000 at the pinned revision), so a check costs neither JSON
decoding nor value transfer.

Outcomes are counted as Kubernetes labels them: ``success`` (equal), ``failure``
(different: a bug or a missed event; logged with both digests) and ``error`` (the check
could not run: cache not ready, revision compacted, etcd unreachable).

On by default as in Kubernetes 1.34 (``DetectCacheInconsistency``), every 5 minutes times
a jitter of 1 to 1.5. What a failure does (:meth:`ConsistencyChecker.run`): the cache is
marked inconsistent — its snapshots are dropped and its LISTs and GETs go to etcd
(``WatchCache.mark_inconsistent``, planner row I) — and rebuilt by a relist; then it is
checked again at once, and again after each further relist until a check passes, and only
then serves reads again. Kubernetes only drops the snapshots and keeps serving the latest
state until a later check passes; a cache known to be wrong serving nothing is the
stricter choice, and the relist makes the wait short.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Final

from watchcache.cache.watch_cache import WatchCache
from watchcache.etcd.client import EtcdClient, EtcdError, prefix_range_end
from watchcache.wire.errors import StatusError

log = logging.getLogger(__name__)

_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK = (1 << 64) - 1
PAGE = 10_000
#: Kubernetes' ``consistency.CheckPeriod``.
DEFAULT_CHECK_INTERVAL: Final = 300.0
#: Between rebuilds of a cache that is still found wrong after a relist.
REBUILD_BACKOFF_SECONDS: Final = 1.0


def digest(entries: Iterable[tuple[bytes, int]]) -> str:
    """FNV-1a 64 over ``key`` NUL ``mod revision`` NUL of each entry, as 16 hex digits."""
    h = _FNV_OFFSET
    for key, revision in entries:
        for byte in b"%s\0%d\0" % (key, revision):
            h = ((h ^ byte) * _FNV_PRIME) & _MASK
    return f"{h:016x}"


@dataclass(slots=True)
class CheckResult:
    status: str  # success | failure | error
    resource_version: int = 0
    cache_digest: str = ""
    etcd_digest: str = ""
    detail: str = ""


@dataclass(slots=True)
class ConsistencyChecker:
    """Compares ``cache`` with etcd; ``counts`` is the
    ``apiserver_storage_consistency_checks_total`` counter by status."""

    client: EtcdClient
    cache: WatchCache
    counts: dict[str, int] = field(default_factory=lambda: {"success": 0, "failure": 0, "error": 0})
    last: CheckResult | None = None

    async def check(self) -> CheckResult:
        result = await self._check()
        self.counts[result.status] += 1
        self.last = result
        if result.status == "failure":
            log.error(
                "watch cache %s is inconsistent with etcd at revision %d: cache %s, etcd %s",
                self.cache.prefix,
                result.resource_version,
                result.cache_digest,
                result.etcd_digest,
            )
        return result

    async def _check(self) -> CheckResult:
        if not self.cache.ready:
            return CheckResult("error", detail="the cache is not ready")
        revision, snapshot = self.cache.snapshot()
        prefix = self.cache.prefix
        cache_entries = [(item.key.encode(), item.mod_revision) for item in snapshot.scan(prefix)]
        try:
            etcd_entries = await self._etcd_entries(prefix.encode(), revision)
        except (EtcdError, StatusError) as error:
            return CheckResult("error", revision, detail=str(error))
        ours, theirs = digest(cache_entries), digest(etcd_entries)
        status = "success" if ours == theirs else "failure"
        return CheckResult(status, revision, ours, theirs)

    async def _etcd_entries(self, prefix: bytes, revision: int) -> list[tuple[bytes, int]]:
        end = prefix_range_end(prefix)
        start = prefix
        entries: list[tuple[bytes, int]] = []
        while True:
            response = await self.client.range(
                start, end, revision=revision, limit=PAGE, keys_only=True
            )
            entries.extend((kv.key, int(kv.mod_revision)) for kv in response.kvs)
            if not response.more or not response.kvs:
                return entries
            start = response.kvs[-1].key + b"\0"

    async def run(
        self,
        interval: float = DEFAULT_CHECK_INTERVAL,
        relist: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Check forever, every ``interval`` seconds with Kubernetes' jitter (times 1 to 1.5).
        With ``relist`` (rebuild the cache; returns once the new list is in it), a failed
        check marks the cache inconsistent and rebuilds it until a check passes (module
        note)."""
        while True:
            await asyncio.sleep(interval * (1 + 0.5 * random.random()))
            result = await self.check()
            if result.status == "failure" and relist is not None:
                await self.rebuild(relist)

    async def rebuild(self, relist: Callable[[], Awaitable[None]]) -> None:
        """Serve from etcd, relist, and check until the cache matches etcd again."""
        self.cache.mark_inconsistent()
        log.error("watch cache %s: serving reads from etcd until rebuilt", self.cache.prefix)
        while True:
            await relist()
            result = await self.check()
            if result.status == "success":
                self.cache.mark_consistent()
                log.warning(
                    "watch cache %s: rebuilt and consistent with etcd at revision %d",
                    self.cache.prefix,
                    result.resource_version,
                )
                return
            await asyncio.sleep(REBUILD_BACKOFF_SECONDS)
