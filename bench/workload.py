"""The data every engine benchmark runs on: Kubernetes-shaped keys and JSON-ish values.

Keys look like etcd's pod keys, ``/registry/pods/ns-00042/pod-0001234`` (35 ASCII bytes, so
UTF-8 byte order and Python ``str`` order agree). N keys spread evenly over ``NAMESPACES``
namespaces; pod numbers are a random sparse sample of ``[0, POD_SPACE)`` per namespace, so
keys are not a dense counter and a random start key lands anywhere. Values are compact JSON
objects padded to an exact length (the payload a watch cache stores and renders).

Everything derives from one integer seed through ``random.Random(f"{seed}:{n}")`` (string
seeds are hashed with SHA-512, so runs repeat across processes and PYTHONHASHSEED).
``entries()`` streams the sorted (key, value) pairs without holding them (the memory script
relies on that); ``Workload.generate()`` materialises them plus the random probes the timed
loops cycle through. Cost: about 2 s and ``n * (value_bytes + 150)`` bytes at n = 1M.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from dataclasses import dataclass

NAMESPACES = 1_000
POD_SPACE = 10_000_000
DEFAULT_SEED = 20_240_601
#: Random keys pre-drawn per workload; timed loops cycle through them.
PROBES = 1 << 14
#: Items per scan in the "scan 500 from a random key" benchmarks.
SCAN_LIMIT = 500
PREFIX = "/registry/pods/"


def seed_from_env() -> int:
    """``WATCHCACHE_SEED`` if set (decimal), else the fixed default."""
    return int(os.environ.get("WATCHCACHE_SEED", DEFAULT_SEED))


def namespace_prefix(ns: int) -> str:
    return f"{PREFIX}ns-{ns:05d}/"


def make_value(ns: int, pod: int, rv: int, size: int) -> bytes:
    """A JSON object naming the pod, padded with a ``pad`` string to exactly ``size`` bytes
    (never shorter than the unpadded object, about 95 bytes)."""
    head = (
        f'{{"metadata":{{"name":"pod-{pod:07d}","namespace":"ns-{ns:05d}",'
        f'"resourceVersion":"{rv}"}},"pad":"'
    )
    return (head + "x" * max(0, size - len(head) - 2) + '"}').encode()


def entries(n: int, seed: int, value_bytes: int) -> Iterator[tuple[str, bytes]]:
    """The n (key, value) pairs in ascending key order, generated lazily."""
    rng = random.Random(f"{seed}:{n}")
    per_ns, extra = divmod(n, NAMESPACES)
    rv = 0
    for ns in range(NAMESPACES):
        count = per_ns + (1 if ns < extra else 0)
        prefix = namespace_prefix(ns)
        for pod in sorted(rng.sample(range(POD_SPACE), count)):
            rv += 1
            yield f"{prefix}pod-{pod:07d}", make_value(ns, pod, rv, value_bytes)


def updated(key: str, rv: int, size: int) -> bytes:
    """The value an update of ``key`` at resource version ``rv`` writes."""
    ns, pod = key.removeprefix(PREFIX).split("/")
    return make_value(int(ns.removeprefix("ns-")), int(pod.removeprefix("pod-")), rv, size)


@dataclass(frozen=True)
class Workload:
    """One materialised key set. Lists are shared by every engine's fixture: never mutate."""

    n: int
    seed: int
    value_bytes: int
    #: Ascending by key.
    items: list[tuple[str, bytes]]
    #: The keys of ``items``, same order.
    keys: list[str]
    #: The same pairs in a random order (input of the "build" benchmark).
    shuffled: list[tuple[str, bytes]]
    #: Random existing keys (get).
    probe_keys: list[str]
    #: (existing key, its value at a later resource version) pairs (put).
    probe_puts: list[tuple[str, bytes]]
    #: Random existing keys with at least SCAN_LIMIT keys from them to the end (scan).
    scan_starts: list[str]
    #: Random namespace prefixes and how many keys each holds (count).
    count_prefixes: list[tuple[str, int]]

    @classmethod
    def generate(cls, n: int, seed: int, value_bytes: int) -> Workload:
        items = list(entries(n, seed, value_bytes))
        rng = random.Random(f"{seed}:{n}:probes")
        shuffled = items.copy()
        rng.shuffle(shuffled)
        idx = [rng.randrange(n) for _ in range(PROBES)]
        scan_hi = max(1, n - SCAN_LIMIT)
        per_ns, extra = divmod(n, NAMESPACES)
        namespaces = [rng.randrange(NAMESPACES) for _ in range(PROBES)]
        return cls(
            n=n,
            seed=seed,
            value_bytes=value_bytes,
            items=items,
            keys=[k for k, _ in items],
            shuffled=shuffled,
            probe_keys=[items[i][0] for i in idx],
            probe_puts=[
                (items[i][0], updated(items[i][0], n + j, value_bytes)) for j, i in enumerate(idx)
            ],
            scan_starts=[items[rng.randrange(scan_hi)][0] for _ in range(PROBES)],
            count_prefixes=[
                (namespace_prefix(ns), per_ns + (1 if ns < extra else 0)) for ns in namespaces
            ],
        )

    @property
    def raw_bytes(self) -> int:
        """UTF-8 key bytes plus value bytes over all items (the floor for any store)."""
        return sum(len(k) + len(v) for k, v in self.items)


def size_label(n: int) -> str:
    """1000 -> "1k", 100000 -> "100k", 1000000 -> "1M"."""
    for div, suffix in ((1_000_000, "M"), (1_000, "k")):
        if n >= div and n % div == 0:
            return f"{n // div}{suffix}"
    return str(n)
