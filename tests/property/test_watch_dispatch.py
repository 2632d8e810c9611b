"""Property: indexed watch dispatch skips no concerned watcher and adds no event.

Random watchers on a pods cache (a namespace or everything; ``metadata.name``,
``metadata.namespace``, ``spec.nodeName`` and other field requirements, ``=``/``==``/
``!=``; label selectors of every operator; no selector at all) come and go between random
changes (creates; updates that move an object to another node, namespace field, name
field or set of labels; deletes). Each change goes through ``WatchCache.apply``, whose
dispatch asks only the watchers the watcher index names. A brute force asks every open
watcher instead: the key starts with its prefix, and its selector (compiled on its own)
matches the new or the previous object; that decides the type it must see too (ADDED when
only the new object matches, DELETED when only the previous one, else MODIFIED; the
event's own type without a selector). Every watcher must receive exactly the brute
force's events, in order: none skipped, none extra.

The keys include cluster-level ones (``/registry/pods/a``, beside the namespace ``a/``):
a watch of namespace ``a`` must not see them. Objects' ``metadata.namespace`` and
``metadata.name`` fields may disagree with their key, which Kubernetes never writes: the
index reads fields from the objects, so it must hold even then.

Watchers end by their timeout on a fake clock: reading one past its deadline yields what
it has queued and then stops (and unregisters it), so what was delivered to a watcher
that left mid-sequence is observed too.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass

from hypothesis import given, note
from hypothesis import strategies as st

from watchcache import _core
from watchcache.cache.event import Event, EventType
from watchcache.cache.watch_cache import WatchCache
from watchcache.cache.watcher import EventConversions, Watcher
from watchcache.wire.options import WatchOptions
from watchcache.wire.selectors import compile_selector

PREFIX = "/registry/pods/"
NAMESPACES = ["a", "b", "c"]
NAMES = ["p", "q"]
NODES = ["", "n1", "n2", "n3"]
#: Namespaced keys, then cluster-level ones whose names are a namespace's and a pod's.
KEYS = [f"{PREFIX}{ns}/{name}" for ns in NAMESPACES for name in NAMES] + [
    f"{PREFIX}a",
    f"{PREFIX}p",
]
#: In an object's state: take the namespace or name its key gives.
FROM_KEY = "<key>"
#: A watcher lives this long on the fake clock; a close moves the clock further.
TIMEOUT = 1_000
CLOSE_STEP = 10 * TIMEOUT


@dataclass(frozen=True)
class WatcherSpec:
    namespace: str | None
    labels: str
    fields: str

    @property
    def prefix(self) -> str:
        return PREFIX if self.namespace is None else f"{PREFIX}{self.namespace}/"


@dataclass(frozen=True)
class ObjectState:
    labels: dict[str, str]
    node: str | None  # None: no spec.nodeName field at all
    namespace: str
    name: str
    phase: str

    def item(self, key: str, rv: int) -> _core.Item:
        below = key[len(PREFIX) :]
        key_namespace, _, key_name = below.rpartition("/")
        namespace = key_namespace if self.namespace == FROM_KEY else self.namespace
        name = key_name if self.name == FROM_KEY else self.name
        fields = {
            "metadata.namespace": namespace,
            "metadata.name": name,
            "status.phase": self.phase,
        }
        if self.node is not None:
            fields["spec.nodeName"] = self.node
        body = {
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": str(rv)},
            "spec": {"nodeName": self.node or ""},
        }
        return _core.Item(key, json.dumps(body).encode(), rv, self.labels, fields)


@st.composite
def label_selectors(draw: st.DrawFn) -> str:
    terms = []
    for key in draw(st.lists(st.sampled_from(["app", "tier"]), max_size=2, unique=True)):
        values = ["web", "db", "", "x"]
        op = draw(st.sampled_from(["=", "==", "!=", "in", "notin", "exists", "!"]))
        if op in ("in", "notin"):
            chosen = draw(st.lists(st.sampled_from(values), min_size=1, max_size=3, unique=True))
            terms.append(f"{key} {op} ({','.join(chosen)})")
        elif op == "exists":
            terms.append(key)
        elif op == "!":
            terms.append(f"!{key}")
        else:
            terms.append(f"{key}{op}{draw(st.sampled_from(values))}")
    return ",".join(terms)


FIELD_TERMS = st.one_of(
    st.builds(
        "metadata.name{}{}".format,
        st.sampled_from(["=", "==", "!="]),
        st.sampled_from(["p", "q", "a"]),
    ),
    st.builds(
        "metadata.namespace{}{}".format,
        st.sampled_from(["=", "!="]),
        st.sampled_from(["a", "b", ""]),
    ),
    st.builds(
        "spec.nodeName{}{}".format, st.sampled_from(["=", "==", "!="]), st.sampled_from(NODES)
    ),
    st.builds("status.phase{}{}".format, st.sampled_from(["=", "!="]), st.just("Running")),
)

WATCHERS = st.builds(
    WatcherSpec,
    st.one_of(st.none(), st.sampled_from([*NAMESPACES, "z"])),
    st.one_of(st.just(""), label_selectors()),
    st.lists(FIELD_TERMS, max_size=3).map(",".join),
)

OBJECTS = st.builds(
    ObjectState,
    st.dictionaries(st.sampled_from(["app", "tier"]), st.sampled_from(["web", "db", "", "x"])),
    st.sampled_from([None, *NODES]),
    st.sampled_from([FROM_KEY, FROM_KEY, "a", "b", ""]),
    st.sampled_from([FROM_KEY, FROM_KEY, "p", "a"]),
    st.sampled_from(["Running", "Pending"]),
)

KEY_INDEX = st.integers(0, len(KEYS) - 1)


@dataclass(frozen=True)
class Watch:
    spec: WatcherSpec


@dataclass(frozen=True)
class Close:
    which: int  # modulo the open watchers


@dataclass(frozen=True)
class Put:
    key: int
    state: ObjectState


@dataclass(frozen=True)
class Delete:
    key: int


Step = Watch | Close | Put | Delete

STEPS: st.SearchStrategy[list[Step]] = st.lists(
    st.one_of(
        st.builds(Watch, WATCHERS),
        st.builds(Close, st.integers(0, 50)),
        st.builds(Put, KEY_INDEX, OBJECTS),
        st.builds(Put, KEY_INDEX, OBJECTS),
        st.builds(Delete, KEY_INDEX),
    ),
    max_size=40,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def brute_force(spec: WatcherSpec, event: Event, previous: _core.Item | None) -> EventType | None:
    """What the watcher must receive, decided without any index (None: nothing)."""
    if not event.key.startswith(spec.prefix):
        return None
    selector = compile_selector(spec.labels, spec.fields)
    if selector.empty:
        return event.type
    new = None if event.type is EventType.DELETED else event.object
    new_passes = new is not None and selector.matches_item(new)
    old_passes = previous is not None and selector.matches_item(previous)
    if new_passes:
        return EventType.MODIFIED if old_passes else EventType.ADDED
    return EventType.DELETED if old_passes else None


Delivery = tuple[int, EventType]


async def drain(watcher: Watcher) -> list[Delivery]:
    """Everything queued for a watcher whose deadline has passed (it then ends)."""
    return [(event.resource_version, event.type) async for event in watcher]


async def run(initial: dict[int, ObjectState], first: list[WatcherSpec], steps: list[Step]) -> None:
    clock = FakeClock()
    cache = WatchCache(PREFIX, clock=clock, watch_buffer=10_000)
    rv = 1
    state = {KEYS[i]: obj.item(KEYS[i], rv) for i, obj in initial.items()}
    cache.replace(state.values(), rv)
    open_watchers: list[tuple[Watcher, WatcherSpec, list[Delivery]]] = []
    finished: list[tuple[WatcherSpec, list[Delivery], list[Delivery]]] = []

    async def watch(spec: WatcherSpec) -> None:
        opts = WatchOptions(
            resource_version=str(cache.resource_version),
            label_selector=spec.labels,
            field_selector=spec.fields,
            timeout_seconds=TIMEOUT,
        )
        watcher = await cache.watch(opts, prefix=spec.prefix)
        open_watchers.append((watcher, spec, []))

    for spec in first:
        await watch(spec)
    for step in steps:
        if isinstance(step, Watch):
            await watch(step.spec)
        elif isinstance(step, Close):
            if open_watchers:
                watcher, spec, expected = open_watchers.pop(step.which % len(open_watchers))
                clock.now += CLOSE_STEP
                finished.append((spec, expected, await drain(watcher)))
        else:
            key = KEYS[step.key]
            previous = state.get(key)
            if isinstance(step, Put):
                new = state[key] = step.state.item(key, rv + 1)
                kind = EventType.ADDED if previous is None else EventType.MODIFIED
                event = Event(kind, new, None, rv + 1)
            elif previous is not None:
                del state[key]
                gone = _core.Item(key, previous.value, rv + 1, previous.labels, previous.fields)
                event = Event(EventType.DELETED, gone, None, rv + 1)
            else:
                continue
            rv += 1
            cache.apply(event)
            for _, spec, expected in open_watchers:
                wanted = brute_force(spec, event, previous)
                if wanted is not None:
                    expected.append((rv, wanted))
        cache.check_invariants()
    clock.now += CLOSE_STEP
    for watcher, spec, expected in open_watchers:
        finished.append((spec, expected, await drain(watcher)))
    assert cache.watcher_count == 0
    cache.check_invariants()
    for spec, expected, received in finished:
        note(f"{spec}: expected {expected}, received {received}")
        assert received == expected, spec


@given(
    st.dictionaries(KEY_INDEX, OBJECTS, max_size=4),
    st.lists(WATCHERS, min_size=1, max_size=8),
    STEPS,
)
def test_every_concerned_watcher_and_only_it_receives_each_event(
    initial: dict[int, ObjectState], first: list[WatcherSpec], steps: list[Step]
) -> None:
    asyncio.run(run(initial, first, steps))


def counting(
    offer: Callable[[Event, EventConversions], bool], name: str, offered: list[str]
) -> Callable[[Event, EventConversions], bool]:
    """``offer``, noting ``name`` in ``offered`` on each call."""

    def counted(event: Event, conversions: EventConversions) -> bool:
        offered.append(name)
        return offer(event, conversions)

    return counted


def test_the_index_narrows_the_kubelets_watch() -> None:
    """The property would hold with no index at all; this checks the index is used: five
    kubelets' watchers are offered only the events of the nodes an event moves between."""

    async def scenario() -> None:
        cache = WatchCache(PREFIX)
        cache.replace([], 1)
        offered: list[str] = []
        watchers = []
        for node in ["n1", "n2", "n3", "n4", "n5"]:
            opts = WatchOptions(resource_version="1", field_selector=f"spec.nodeName={node}")
            watcher = await cache.watch(opts)
            watcher.offer = counting(watcher.offer, node, offered)  # type: ignore[assignment]
            watchers.append(watcher)
        pod = ObjectState({}, "n2", FROM_KEY, FROM_KEY, "Running")
        cache.apply(Event(EventType.ADDED, pod.item(KEYS[0], 2), None, 2))
        assert offered == ["n2"]
        moved = ObjectState({}, "n4", FROM_KEY, FROM_KEY, "Running")
        offered.clear()
        cache.apply(Event(EventType.MODIFIED, moved.item(KEYS[0], 3), None, 3))
        assert sorted(offered) == ["n2", "n4"]
        for watcher in watchers:
            await watcher.aclose()

    asyncio.run(scenario())
