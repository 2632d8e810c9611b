"""A cumulative histogram in Prometheus' shape: fixed upper bounds, counts, sum.

Kept beside the numbers it describes (cache and reflector statistics) so that a scrape
reads it without the recording side knowing about any metrics library.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

#: Kubernetes' ``apiserver_watch_cache_read_wait_seconds`` buckets.
READ_WAIT_BUCKETS: tuple[float, ...] = (
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0,
)  # fmt: skip


class Histogram:
    """``observe(value)`` is O(log buckets). ``cumulative()`` gives Prometheus' ``le``
    counts (each bucket counts every observation at or below its bound; +Inf = count)."""

    __slots__ = ("_counts", "bounds", "count", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        if list(bounds) != sorted(set(bounds)):
            raise ValueError("histogram bounds must be strictly increasing")
        self.bounds = tuple(bounds)
        self._counts = [0] * (len(self.bounds) + 1)
        self.count = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self._counts[bisect.bisect_left(self.bounds, value)] += 1
        self.count += 1
        self.sum += value

    def cumulative(self) -> list[tuple[float, int]]:
        """``(upper bound, observations <= bound)`` per bucket, ending with +Inf."""
        total = 0
        out: list[tuple[float, int]] = []
        for bound, n in zip((*self.bounds, float("inf")), self._counts, strict=True):
            total += n
            out.append((bound, total))
        return out

    def quantile(self, q: float) -> float:
        """The upper bound of the bucket holding quantile ``q`` (0 when empty)."""
        if not self.count:
            return 0.0
        rank = q * self.count
        for bound, total in self.cumulative():
            if total >= rank:
                return bound
        return float("inf")
