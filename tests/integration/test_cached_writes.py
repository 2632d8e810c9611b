"""Updates, patches, applies and deletes that start from the watch cache's copy of the
object (docs/semantics.md §12), over HTTP against a real etcd.

Two things are shown. Cost: with the cache caught up, a write is one etcd round trip (the
compare-and-swap), where a store without a cache reads first (two). Semantics: with the
cache behind etcd on purpose — the server's reflector keeps receiving etcd's events but
they are held back from the cache (``cache_held``), and objects are changed in etcd behind
the server's back — every answer is the one etcd's current state gives: no lost update,
409 for a stale resourceVersion, no 409 (or 422) that only the stale copy would cause,
404 for what etcd no longer has. Round trips are counted by an :class:`EtcdClient`
subclass given to the configmaps' store, which counts the RPCs it sends to etcd."""

from __future__ import annotations

import contextlib
import functools
import json
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
import pytest
from apiserver_fixture import RunningApiServer
from google.protobuf.message import Message

from watchcache.cache.watch_cache import WatchCache
from watchcache.etcd.client import EtcdClient
from watchcache.etcd.process import EtcdCluster
from watchcache.registry.object_store import OPTIMISTIC_LOCK_MESSAGE, ObjectStore

CM = "/api/v1/namespaces/default/configmaps"
MERGE = {"Content-Type": "application/merge-patch+json"}
JSON_PATCH = {"Content-Type": "application/json-patch+json"}
APPLY = {"Content-Type": "application/apply-patch+yaml"}
#: One compare-and-swap and nothing else.
ONE_TXN = {"Txn": 1}
ResponseT = TypeVar("ResponseT", bound=Message)


class CountingEtcdClient(EtcdClient):
    """An EtcdClient that counts the RPCs it sends, by name (``Range``, ``Txn``...)."""

    def __init__(self, endpoints: list[str]) -> None:
        super().__init__(endpoints)
        self.calls: Counter[str] = Counter()

    async def call(
        self,
        method: str,
        request: Message,
        response_type: type[ResponseT],
        *,
        timeout: float | None = None,
        endpoint: str | None = None,
    ) -> ResponseT:
        self.calls[method.rsplit("/", 1)[-1]] += 1
        return await super().call(
            method, request, response_type, timeout=timeout, endpoint=endpoint
        )


@dataclass
class Server:
    api: RunningApiServer
    http: httpx.AsyncClient
    store: ObjectStore
    cache: WatchCache
    counting: CountingEtcdClient

    async def counted(
        self, request: Awaitable[httpx.Response]
    ) -> tuple[httpx.Response, dict[str, int]]:
        """The answer to ``request`` and the etcd RPCs the store sent for it."""
        before = Counter(self.counting.calls)
        response = await request
        return response, dict(self.counting.calls - before)

    async def create(self, name: str, data: dict[str, str], **metadata: Any) -> dict[str, Any]:
        """Create a configmap and wait until the cache has it."""
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **metadata}}
        created = await self.http.post(CM, json={**body, "data": data})
        assert created.status_code == 201, created.text
        obj: dict[str, Any] = created.json()
        await self.cache.wait_for_rv(int(obj["metadata"]["resourceVersion"]))
        return obj

    def cached_revision(self, name: str) -> int | None:
        item = self.cache.snapshot()[1].get_item(key(name))
        return None if item is None else item.mod_revision

    async def in_etcd(self, name: str) -> tuple[dict[str, Any], int] | None:
        kv = await self.api.client.get(key(name).encode())
        return None if kv is None else (json.loads(kv.value), int(kv.mod_revision))

    async def behind_the_back(self, name: str, change: Callable[[dict[str, Any]], None]) -> int:
        """Change the object in etcd directly (as another apiserver would); its revision."""
        found = await self.in_etcd(name)
        assert found is not None
        obj, revision = found
        change(obj)
        written = await self.api.client.update(
            key(name).encode(), json.dumps(obj).encode(), revision
        )
        assert written.succeeded
        return written.revision


def key(name: str) -> str:
    return f"/registry/configmaps/default/{name}"


@pytest.fixture
async def server(
    api: RunningApiServer, http: httpx.AsyncClient, etcd: EtcdCluster
) -> AsyncIterator[Server]:
    store = api.server.stores["configmaps"]
    assert store.cache is api.server.caches["configmaps"].cache
    counting = CountingEtcdClient(etcd.endpoints)
    async with counting:
        original, store.client = store.client, counting
        try:
            yield Server(api, http, store, store.cache, counting)
        finally:
            store.client = original


@contextlib.contextmanager
def cache_held(cache: WatchCache) -> Iterator[None]:
    """The cache falls behind etcd: its reflector keeps receiving events, which are held
    back and applied, in order, on the way out (a watch that delivers late)."""
    held: list[Callable[[], None]] = []
    apply, advance = cache.apply, cache.advance
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cache, "apply", lambda event: held.append(functools.partial(apply, event)))
        patch.setattr(cache, "advance", lambda rv: held.append(functools.partial(advance, rv)))
        try:
            yield
        finally:
            patch.undo()
            for step in held:
                step()


def data_of(response: httpx.Response) -> dict[str, str]:
    assert response.status_code in (200, 201), response.text
    return dict(response.json()["data"])


# -- what the cache saves --------------------------------------------------------------------


async def test_a_write_from_a_caught_up_cache_is_one_etcd_round_trip(server: Server) -> None:
    http = server.http
    await server.create("cost", {"a": "1"})

    current = (await http.get(f"{CM}/cost")).json()
    current["data"] = {"a": "2"}
    put, trips = await server.counted(http.put(f"{CM}/cost", json=current))
    assert data_of(put) == {"a": "2"}
    assert trips == ONE_TXN
    await server.cache.wait_for_rv(int(put.json()["metadata"]["resourceVersion"]))

    patch, trips = await server.counted(
        http.patch(f"{CM}/cost", content=b'{"data":{"b":"3"}}', headers=MERGE)
    )
    assert data_of(patch) == {"a": "2", "b": "3"}
    assert trips == ONE_TXN
    await server.cache.wait_for_rv(int(patch.json()["metadata"]["resourceVersion"]))

    applied, trips = await server.counted(apply(http, "cost", "c: '4'"))
    assert data_of(applied) == {"a": "2", "b": "3", "c": "4"}
    assert trips == ONE_TXN
    await server.cache.wait_for_rv(int(applied.json()["metadata"]["resourceVersion"]))

    deleted, trips = await server.counted(http.delete(f"{CM}/cost"))
    assert deleted.status_code == 200, deleted.text
    assert trips == ONE_TXN
    assert await server.in_etcd("cost") is None


async def test_without_a_cache_the_store_reads_etcd_before_each_write(server: Server) -> None:
    """The same writes from a store with no cache (as before writes started from it): a
    read, then the compare-and-swap."""
    http = server.http
    await server.create("uncached", {"a": "1"})
    server.store.cache = None
    try:
        put, trips = await server.counted(
            http.patch(f"{CM}/uncached", content=b'{"data":{"a":"2"}}', headers=MERGE)
        )
        assert data_of(put) == {"a": "2"}
        assert trips == {"Range": 1, "Txn": 1}
        deleted, trips = await server.counted(http.delete(f"{CM}/uncached"))
        assert deleted.status_code == 200, deleted.text
        assert trips == {"Range": 1, "Txn": 1}
    finally:
        server.store.cache = server.cache


async def test_an_unchanged_update_is_confirmed_by_etcd_before_it_is_skipped(
    server: Server,
) -> None:
    """Nothing to write by the cache's copy is not the answer until etcd agrees: then
    there is no write, as from a fresh read."""
    http = server.http
    created = await server.create("same", {"a": "1"})
    again, trips = await server.counted(http.put(f"{CM}/same", json=created))
    assert again.status_code == 200, again.text
    assert again.json() == created
    assert trips == {"Range": 1}


# -- a cache behind etcd --------------------------------------------------------------------


async def test_a_patch_from_a_stale_cache_loses_no_update(server: Server) -> None:
    await server.create("lost", {"a": "1"})
    with cache_held(server.cache):
        moved = await server.behind_the_back("lost", lambda o: o["data"].update(b="2"))
        assert server.cached_revision("lost") != moved
        patched, trips = await server.counted(
            server.http.patch(f"{CM}/lost", content=b'{"data":{"c":"3"}}', headers=MERGE)
        )
        assert data_of(patched) == {"a": "1", "b": "2", "c": "3"}
        # The compare at the cached revision failed and returned etcd's object: no read.
        assert trips == {"Txn": 2}
        found = await server.in_etcd("lost")
        assert found is not None
        assert found[0]["data"] == {"a": "1", "b": "2", "c": "3"}
        assert patched.json()["metadata"]["resourceVersion"] == str(found[1])


async def test_an_update_naming_the_cached_but_outdated_version_is_a_409(server: Server) -> None:
    created = await server.create("stale", {"a": "1"})
    with cache_held(server.cache):
        moved = await server.behind_the_back("stale", lambda o: o["data"].update(a="2"))
        body = {**created, "data": {"a": "3"}}  # resourceVersion: the one the cache has
        put, trips = await server.counted(server.http.put(f"{CM}/stale", json=body))
        assert put.status_code == 409, put.text
        assert put.json()["message"] == (
            f'Operation cannot be fulfilled on configmaps "stale": {OPTIMISTIC_LOCK_MESSAGE}'
        )
        assert trips == {"Txn": 1}
        found = await server.in_etcd("stale")
        assert found is not None
        assert (found[0]["data"], found[1]) == ({"a": "2"}, moved)


async def test_an_update_naming_etcds_version_succeeds_while_the_cache_is_behind(
    server: Server,
) -> None:
    created = await server.create("fresh", {"a": "1"})
    with cache_held(server.cache):
        moved = await server.behind_the_back("fresh", lambda o: o["data"].update(a="2"))
        body = {**created, "data": {"a": "3"}}
        body["metadata"] = {**created["metadata"], "resourceVersion": str(moved)}
        put, trips = await server.counted(server.http.put(f"{CM}/fresh", json=body))
        assert data_of(put) == {"a": "3"}
        # The cache's copy failed the precondition; etcd's passed it.
        assert trips == {"Range": 1, "Txn": 1}


async def test_a_patch_error_only_the_stale_copy_has_is_not_answered(server: Server) -> None:
    """A json-patch ``test`` that fails on the cache's copy but holds on etcd's (422 from a
    fresh read would not happen), and one that fails on both (the 422 stands)."""
    await server.create("tested", {"a": "1"})
    with cache_held(server.cache):
        await server.behind_the_back("tested", lambda o: o["data"].update(a="2"))
        ops = [
            {"op": "test", "path": "/data/a", "value": "2"},
            {"op": "replace", "path": "/data/a", "value": "3"},
        ]
        patched, trips = await server.counted(
            server.http.patch(f"{CM}/tested", content=json.dumps(ops), headers=JSON_PATCH)
        )
        assert data_of(patched) == {"a": "3"}
        assert trips == {"Range": 1, "Txn": 1}
        ops[0]["value"] = "9"
        refused, trips = await server.counted(
            server.http.patch(f"{CM}/tested", content=json.dumps(ops), headers=JSON_PATCH)
        )
        assert refused.status_code == 422, refused.text
        assert "test failed" in refused.text
        assert trips == {"Range": 1}


async def test_an_unchanged_update_by_a_stale_copy_is_written_when_etcd_differs(
    server: Server,
) -> None:
    """A PUT of the object as the cache has it changes nothing by the cache's copy; etcd
    has moved on, so the PUT is a change after all and is written."""
    created = await server.create("back", {"a": "1"})
    body = {**created, "metadata": {**created["metadata"]}}
    del body["metadata"]["resourceVersion"]
    with cache_held(server.cache):
        await server.behind_the_back("back", lambda o: o["data"].update(a="2"))
        put, trips = await server.counted(server.http.put(f"{CM}/back", json=body))
        assert data_of(put) == {"a": "1"}
        assert trips == {"Range": 1, "Txn": 1}
        found = await server.in_etcd("back")
        assert found is not None
        assert found[0]["data"] == {"a": "1"}


async def test_delete_preconditions_are_judged_on_etcds_object(server: Server) -> None:
    created = await server.create("pre", {"a": "1"})
    cached_rv = created["metadata"]["resourceVersion"]
    with cache_held(server.cache):
        moved = await server.behind_the_back("pre", lambda o: o["data"].update(a="2"))
        stale = {"preconditions": {"resourceVersion": cached_rv}}
        refused, trips = await server.counted(
            server.http.request("DELETE", f"{CM}/pre", json=stale)
        )
        assert refused.status_code == 409, refused.text
        assert refused.json()["message"] == (
            'Operation cannot be fulfilled on ConfigMap "pre": the ResourceVersion in the '
            f"precondition ({cached_rv}) does not match the ResourceVersion in record "
            f"({moved}). The object might have been modified"
        )
        assert trips == {"Txn": 1}
        assert await server.in_etcd("pre") is not None

        current = {"preconditions": {"resourceVersion": str(moved)}}
        deleted, trips = await server.counted(
            server.http.request("DELETE", f"{CM}/pre", json=current)
        )
        assert deleted.status_code == 200, deleted.text
        assert trips == {"Range": 1, "Txn": 1}
        assert await server.in_etcd("pre") is None


async def test_a_uid_precondition_after_the_object_was_recreated_behind_the_back(
    server: Server,
) -> None:
    created = await server.create("again", {"a": "1"})
    old_uid = created["metadata"]["uid"]
    with cache_held(server.cache):
        new_uid = "00000000-0000-0000-0000-000000000001"
        obj = {**created, "metadata": {**created["metadata"], "uid": new_uid}}
        del obj["metadata"]["resourceVersion"]
        await server.api.client.delete(key("again").encode())
        await server.api.client.create(key("again").encode(), json.dumps(obj).encode())
        assert server.cached_revision("again") == int(created["metadata"]["resourceVersion"])

        refused, trips = await server.counted(
            server.http.request("DELETE", f"{CM}/again", json={"preconditions": {"uid": old_uid}})
        )
        assert refused.status_code == 409, refused.text
        assert refused.json()["message"] == (
            f'Operation cannot be fulfilled on ConfigMap "again": the UID in the precondition '
            f"({old_uid}) does not match the UID in record ({new_uid}). The object might have "
            "been deleted and then recreated"
        )
        assert trips == {"Txn": 1}

        deleted, trips = await server.counted(
            server.http.request("DELETE", f"{CM}/again", json={"preconditions": {"uid": new_uid}})
        )
        assert deleted.status_code == 200, deleted.text
        assert deleted.json()["details"]["uid"] == new_uid
        assert trips == {"Range": 1, "Txn": 1}


async def test_writes_to_an_object_deleted_behind_the_back(server: Server) -> None:
    """The cache still has it, etcd does not: 404 for update, patch and delete, and an
    apply creates it, as from a fresh read."""
    created = await server.create("ghost", {"a": "1"})
    http = server.http
    with cache_held(server.cache):
        await server.api.client.delete(key("ghost").encode())
        assert server.cached_revision("ghost") is not None
        writes = [
            http.put(f"{CM}/ghost", json={**created, "data": {"a": "2"}}),
            http.patch(f"{CM}/ghost", content=b'{"data":{"a":"2"}}', headers=MERGE),
            http.delete(f"{CM}/ghost"),
        ]
        for write in writes:
            answer, trips = await server.counted(write)
            assert answer.status_code == 404, answer.text
            assert answer.json()["reason"] == "NotFound"
            assert trips == {"Txn": 1}
        applied, trips = await server.counted(apply(http, "ghost", "b: '5'"))
        assert applied.status_code == 201, applied.text
        assert data_of(applied) == {"b": "5"}
        assert trips == {"Txn": 2}  # the failed compare, then the create


async def test_an_apply_conflict_only_the_stale_copy_has_is_not_answered(server: Server) -> None:
    """On the cache's copy an apply of data.a conflicts with its creator's ownership; etcd
    no longer has the object, so there is no conflict: the apply creates it."""
    await server.create("owned", {"a": "1"})
    with cache_held(server.cache):
        await server.api.client.delete(key("owned").encode())
        applied, trips = await server.counted(apply(server.http, "owned", "a: '5'"))
        assert applied.status_code == 201, applied.text
        assert data_of(applied) == {"a": "5"}
        assert trips == {"Range": 1, "Txn": 1}


def apply(http: httpx.AsyncClient, name: str, data: str) -> Awaitable[httpx.Response]:
    """Server-side apply of a configmap with one data line, by the manager "tester"."""
    config = f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  {data}\n"
    return http.patch(
        f"{CM}/{name}", content=config, headers=APPLY, params={"fieldManager": "tester"}
    )


async def test_a_write_to_an_object_the_cache_has_not_seen_reads_etcd(server: Server) -> None:
    http = server.http
    await server.create("seed", {})
    with cache_held(server.cache):
        created = await http.post(CM, json={"metadata": {"name": "new"}, "data": {"a": "1"}})
        assert created.status_code == 201, created.text
        assert server.cached_revision("new") is None
        patched, trips = await server.counted(
            http.patch(f"{CM}/new", content=b'{"data":{"b":"2"}}', headers=MERGE)
        )
        assert data_of(patched) == {"a": "1", "b": "2"}
        assert trips == {"Range": 1, "Txn": 1}


async def test_a_second_delete_before_the_cache_saw_the_first_answers_as_etcd_has_it(
    server: Server,
) -> None:
    """An object with a finalizer: the first DELETE marks it; the second, while the cache
    still has it unmarked, marks nothing again and answers the object as marked."""
    await server.create("twice", {"a": "1"}, finalizers=["example.com/hold"])
    http = server.http
    with cache_held(server.cache):
        first, trips = await server.counted(http.delete(f"{CM}/twice"))
        assert first.status_code == 200, first.text
        assert first.json()["metadata"]["deletionTimestamp"]
        assert trips == ONE_TXN
        marked = await server.in_etcd("twice")
        second, trips = await server.counted(http.delete(f"{CM}/twice"))
        assert second.status_code == 200, second.text
        assert second.json() == first.json()
        assert trips == {"Txn": 1}  # the failed compare brought etcd's marked object
        assert await server.in_etcd("twice") == marked
    # Let the finalizer go, so the namespace can be cleaned up after.
    await server.cache.wait_for_rv(int(first.json()["metadata"]["resourceVersion"]))
    done = await http.patch(
        f"{CM}/twice", content=b'{"metadata":{"finalizers":null}}', headers=MERGE
    )
    assert done.status_code == 200, done.text


async def test_the_cache_converges_after_writes_from_a_stale_copy(server: Server) -> None:
    """After the held events arrive, the cache serves what etcd has."""
    await server.create("converge", {"a": "1"})
    with cache_held(server.cache):
        await server.behind_the_back("converge", lambda o: o["data"].update(b="2"))
        patched = await server.http.patch(
            f"{CM}/converge", content=b'{"data":{"c":"3"}}', headers=MERGE
        )
    answer = patched.json()
    await server.cache.wait_for_rv(int(answer["metadata"]["resourceVersion"]))
    got = await server.http.get(f"{CM}/converge")
    assert got.json() == answer


# -- the cached copy is etcd's object --------------------------------------------------------


async def test_the_cached_state_a_write_starts_from_is_what_etcd_gives(
    api: RunningApiServer, http: httpx.AsyncClient
) -> None:
    """What a write computes from is the same whether it came from the cache or from
    etcd: the cache's JSON round trip, its resourceVersion stamp and the conversion to
    the served version (``events.k8s.io/v1`` Events are stored as core ones) change
    nothing. Objects with non-ASCII text, escapes, numbers and defaults."""
    created = await http.post(
        CM,
        json={
            "metadata": {"name": "text", "labels": {"a": "b"}, "annotations": {"x": "é\u2028<>&"}},
            "data": {"k": 'ünï\ncødé \\ " \t', "e": ""},
        },
    )
    assert created.status_code == 201, created.text
    pod = await http.post(
        "/api/v1/namespaces/default/pods",
        json={
            "metadata": {"name": "p"},
            "spec": {
                "containers": [
                    {"name": "c", "image": "x", "resources": {"limits": {"cpu": "1.5"}}}
                ],
                "terminationGracePeriodSeconds": 7,
            },
        },
    )
    assert pod.status_code == 201, pod.text
    event = await http.post(
        "/api/v1/namespaces/default/events",
        json={
            "metadata": {"name": "ev"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
            "reason": "Tested",
            "message": "naïve ✓",
            "count": 3,
            "type": "Normal",
        },
    )
    assert event.status_code == 201, event.text
    cases = [("configmaps", "default", "text"), ("pods", "default", "p"),
             ("events", "default", "ev"), ("events.v1.events.k8s.io", "default", "ev")]  # fmt: skip
    for served, namespace, name in cases:
        store = api.server.stores[served]
        assert store.cache is not None
        await store.cache.wait_for_rv(await api.client.current_revision(b"/registry"))
        cached = store._cached_state(namespace, name)
        fresh = await store._read_state(namespace, name)
        assert cached is not None, served
        assert (cached.obj, cached.revision) == (fresh.obj, fresh.revision), served
        assert not cached.current and fresh.current


async def test_a_cache_found_inconsistent_is_not_where_writes_start(server: Server) -> None:
    """While the consistency check has the cache marked wrong, writes read etcd first."""
    await server.create("distrust", {"a": "1"})
    server.cache.mark_inconsistent()
    try:
        patched, trips = await server.counted(
            server.http.patch(f"{CM}/distrust", content=b'{"data":{"a":"2"}}', headers=MERGE)
        )
    finally:
        server.cache.mark_consistent()
    assert data_of(patched) == {"a": "2"}
    assert trips == {"Range": 1, "Txn": 1}
