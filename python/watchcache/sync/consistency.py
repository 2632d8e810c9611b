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
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from watchcache.cache.watch_cache import WatchCache
from watchcache.etcd.client import EtcdClient, EtcdError, prefix_range_end
from watchcache.wire.errors import StatusError

log = logging.getLogger(__name__)

_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK = (1 << 64) - 1
PAGE = 10_000


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

    async def run(self, interval: float = 300.0) -> None:
        """Check forever, every ``interval`` seconds with Kubernetes' jitter (times 1 to 1.5)."""
        while True:
            await asyncio.sleep(interval * (1 + 0.5 * random.random()))
            await self.check()
