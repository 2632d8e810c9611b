"""Fixtures for the engine benchmarks: settings, workloads and loaded contenders.

Every benchmark takes two parameters, ``impl`` (a name in ``contender.CONTENDERS``) and
``size`` (item count), added by ``pytest_generate_tests``; ids read ``[1M-watchcache]``.
Sizes are 100k and 1M, or only 100k with ``--quick`` / ``WATCHCACHE_BENCH_QUICK=1``;
``WATCHCACHE_BENCH_SIZES=1000,100000`` overrides both. A benchmark marked
``@pytest.mark.extra_sizes(1_000)`` also runs at those sizes (snapshot: "independent of size").

Loading 1M items takes seconds per contender, so workloads and loaded contenders are built
once per session and cached by (impl, size) in pools, whatever order tests run in; each is
``gc.freeze()``-d after loading so the cyclic GC, which stays enabled while timing, does
not rescan millions of fixture objects. The price is memory: everything alive at the end
is about 4 GB at 1M items with 1 KB values (``WATCHCACHE_BENCH_VALUE_BYTES=1024``), about
1 GB with the default 100-byte values.

The seed (``WATCHCACHE_SEED``), sizes and versions are printed in the header and stored in
the JSON's ``machine_info["watchcache_bench"]`` together with the command line, which
``peers_report.py`` copies into bench/README.md.
"""

from __future__ import annotations

import gc
import os
import platform
import shlex
import sys
from dataclasses import dataclass, field
from typing import Any

import pytest

from contender import CONTENDERS, Contender
from workload import Workload, seed_from_env, size_label

FULL_SIZES = (100_000, 1_000_000)
QUICK_SIZES = (100_000,)
#: Value size the docs/architecture.md targets state (except the 1 KB rendered-body target, which
#: ``make bench`` checks in a second pass with ``WATCHCACHE_BENCH_VALUE_BYTES=1024``).
#: ``workload.make_value`` pads to exactly 100: its unpadded object is at most 95 bytes while
#: resource versions stay below 10 million (they reach n + 16,384).
DEFAULT_VALUE_BYTES = 100
#: Environment settings recorded in the run's command line, so it can be repeated.
ENV_SETTINGS = (
    "WATCHCACHE_SEED",
    "WATCHCACHE_BENCH_QUICK",
    "WATCHCACHE_BENCH_SIZES",
    "WATCHCACHE_BENCH_VALUE_BYTES",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--quick",
        action="store_true",
        default=False,
        help="watchcache bench: 100k items only (also WATCHCACHE_BENCH_QUICK=1)",
    )


@dataclass(frozen=True)
class Settings:
    seed: int
    sizes: tuple[int, ...]
    value_bytes: int
    quick: bool

    @classmethod
    def from_config(cls, config: pytest.Config) -> Settings:
        quick = bool(config.getoption("--quick")) or os.environ.get(
            "WATCHCACHE_BENCH_QUICK", ""
        ) not in ("", "0")
        env_sizes = os.environ.get("WATCHCACHE_BENCH_SIZES", "")
        if env_sizes:
            sizes = tuple(int(s.replace("_", "")) for s in env_sizes.split(",") if s.strip())
        else:
            sizes = QUICK_SIZES if quick else FULL_SIZES
        return cls(
            seed=seed_from_env(),
            sizes=sizes,
            value_bytes=int(os.environ.get("WATCHCACHE_BENCH_VALUE_BYTES", DEFAULT_VALUE_BYTES)),
            quick=quick,
        )


_SETTINGS_KEY = pytest.StashKey[Settings]()


def settings_of(config: pytest.Config) -> Settings:
    if _SETTINGS_KEY not in config.stash:
        config.stash[_SETTINGS_KEY] = Settings.from_config(config)
    return config.stash[_SETTINGS_KEY]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "extra_sizes(*sizes): also run this benchmark at these item counts"
    )


def pytest_report_header(config: pytest.Config) -> list[str]:
    s = settings_of(config)
    lines = [
        f"watchcache bench: seed={s.seed} (WATCHCACHE_SEED) "
        f"sizes={','.join(size_label(n) for n in s.sizes)} value_bytes={s.value_bytes} "
        f"quick={s.quick}"
    ]
    for name, cls in CONTENDERS.items():
        why = cls.unavailable()
        lines.append(f"  {name}: {'SKIPPED, ' + why if why else cls.version()}")
    return lines


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    s = settings_of(metafunc.config)
    if "size" in metafunc.fixturenames:
        sizes = set(s.sizes)
        for mark in metafunc.definition.iter_markers("extra_sizes"):
            sizes.update(int(n) for n in mark.args)
        ordered = sorted(sizes)
        metafunc.parametrize("size", ordered, ids=[size_label(n) for n in ordered])
    if "impl" in metafunc.fixturenames:
        metafunc.parametrize("impl", list(CONTENDERS))


def pytest_benchmark_update_machine_info(
    config: pytest.Config, machine_info: dict[str, Any]
) -> None:
    s = settings_of(config)
    args = shlex.join(str(a) for a in config.invocation_params.args)
    env = "".join(
        f"{name}={shlex.quote(os.environ[name])} " for name in ENV_SETTINGS if name in os.environ
    )
    machine_info["watchcache_bench"] = {
        "seed": s.seed,
        "sizes": list(s.sizes),
        "value_bytes": s.value_bytes,
        "quick": s.quick,
        "command": f"{env}python -m pytest {args}",
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "versions": {
            name: (cls.unavailable() and "unavailable") or cls.version()
            for name, cls in CONTENDERS.items()
        },
        "fanout": _fanout(),
    }


def _fanout() -> int | None:
    try:
        from watchcache import _core
    except ImportError:
        return None
    return int(_core.FANOUT)


@dataclass
class Pool:
    """Session cache of workloads (by size) and loaded contenders (by impl, size)."""

    settings: Settings
    workloads: dict[int, Workload] = field(default_factory=dict)
    contenders: dict[tuple[str, int], Contender] = field(default_factory=dict)

    def workload(self, n: int) -> Workload:
        if n not in self.workloads:
            self.workloads[n] = Workload.generate(n, self.settings.seed, self.settings.value_bytes)
            gc.collect()
            gc.freeze()
        return self.workloads[n]

    def contender(self, impl: str, n: int) -> Contender:
        key = (impl, n)
        if key not in self.contenders:
            cls = contender_type_or_skip(impl)
            self.contenders[key] = cls.load(self.workload(n).items)
            gc.collect()
            gc.freeze()
        return self.contenders[key]


def contender_type_or_skip(impl: str) -> type[Contender]:
    cls = CONTENDERS[impl]
    why = cls.unavailable()
    if why:
        pytest.skip(why)
    return cls


@pytest.fixture(scope="session")
def pool(pytestconfig: pytest.Config) -> Pool:
    return Pool(settings_of(pytestconfig))


@pytest.fixture
def workload(pool: Pool, size: int) -> Workload:
    return pool.workload(size)


@pytest.fixture
def contender_type(impl: str) -> type[Contender]:
    return contender_type_or_skip(impl)


@pytest.fixture
def contender(pool: Pool, impl: str, size: int) -> Contender:
    return pool.contender(impl, size)
