"""Two apiservers on one etcd, as a user would run two ``watchcache serve``: continue tokens
are portable between them (a token names a key and a revision, not a server), and a write
through one is seen by a consistent read on the other at once."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import Awaitable, Callable, Iterator

from apiserver_fixture import RunningApiServer, running_apiserver
from k8s_client import REQUEST_TIMEOUT, call, namespaced_name
from kubernetes import client as k8s

from watchcache.cache.backing_store import Source
from watchcache.cli.load import load_objects
from watchcache.etcd.process import EtcdCluster
from watchcache.registry.resources import CONFIGMAPS

Kubectl = Callable[..., Awaitable[subprocess.CompletedProcess[str]]]

COUNT = 300
NAMESPACES = 4
LIMIT = 40


@contextlib.contextmanager
def core_v1_on(url: str) -> Iterator[k8s.CoreV1Api]:
    configuration = k8s.Configuration()
    configuration.host = url
    with k8s.ApiClient(configuration) as api_client:
        yield k8s.CoreV1Api(api_client)


async def paginate(
    server_for_page: Callable[[int], Awaitable[k8s.CoreV1Api]],
    after_page: Callable[[], Awaitable[None]],
) -> tuple[list[tuple[str, str]], str]:
    """Every configmap, page ``i`` from ``server_for_page(i)`` and ``after_page()`` after
    each page but the last: the names in order and the list's resourceVersion (asserted
    the same on every page)."""
    names: list[tuple[str, str]] = []
    rv = ""
    token: str | None = None
    page_number = 0
    while True:
        server = await server_for_page(page_number)
        page = await call(
            server.list_config_map_for_all_namespaces,
            limit=LIMIT,
            _continue=token,
            _request_timeout=REQUEST_TIMEOUT,
        )
        assert page.metadata is not None
        rv = rv or str(page.metadata.resource_version)
        assert page.metadata.resource_version == rv, f"page {page_number}"
        names += [namespaced_name(item) for item in page.items]
        token = page.metadata.var_continue
        if not token:
            return names, rv
        page_number += 1
        await after_page()


async def state_at(api: RunningApiServer, revision: int) -> list[tuple[str, str]]:
    """The configmaps etcd held at ``revision``, in key order."""
    response = await asyncio.wait_for(
        api.client.range_prefix(CONFIGMAPS.prefix.encode(), revision=revision, keys_only=True),
        10,
    )
    pairs = (kv.key.decode().removeprefix(CONFIGMAPS.prefix).split("/") for kv in response.kvs)
    return [(ns, name) for ns, name in pairs]


def lists(server: RunningApiServer, source: Source) -> int:
    """How many configmap lists ``server`` has served from ``source``."""
    return server.server.caches["configmaps"].cache.stats.lists.get(source, 0)


def late(names: list[tuple[str, str]]) -> set[str]:
    return {name for _, name in names if name.startswith("late-")}


async def test_a_continue_token_from_one_server_works_on_the_other(
    etcd: EtcdCluster, api: RunningApiServer
) -> None:
    await asyncio.wait_for(
        load_objects(api.client, CONFIGMAPS, count=COUNT, size=256, namespaces=NAMESPACES), 60
    )
    async with contextlib.AsyncExitStack() as stack:
        first = stack.enter_context(core_v1_on(api.url))
        servers = [first]
        running = [api]
        written: list[str] = []

        async def write() -> None:
            # After every page a write, which no later page of that list may show.
            name = f"late-{len(written)}"
            body = k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name=name))
            await call(
                first.create_namespaced_config_map,
                "demo-0",
                body,
                _request_timeout=REQUEST_TIMEOUT,
            )
            written.append(name)

        async def alternate(page: int) -> k8s.CoreV1Api:
            if page == 1:
                # The second server starts after the first page was served and a write
                # followed: it has no snapshot that old and continues from etcd.
                second = await stack.enter_async_context(running_apiserver(etcd.endpoints))
                running.append(second)
                servers.append(stack.enter_context(core_v1_on(second.url)))
            return servers[page % 2]

        names, rv = await paginate(alternate, write)
        assert len(servers) == 2 and len(written) > 5
        assert len(names) == len(set(names)) >= COUNT
        assert names == await state_at(api, int(rv))
        assert not late(names)
        # How they were served: the second server's pages (odd ones) from etcd.
        pages = -(-len(names) // LIMIT)
        assert lists(running[1], Source.STORE) == pages // 2

        # The other way round: the second server starts a list, the first (which has had
        # a snapshot at every revision since it started) continues it.
        before = set(written)
        from_snapshots = lists(running[0], Source.SNAPSHOT)

        async def second_first(page: int) -> k8s.CoreV1Api:
            return servers[(page + 1) % 2]

        names, rv = await paginate(second_first, write)
        assert len(names) == len(set(names))
        assert names == await state_at(api, int(rv))
        assert late(names) == before and len(written) > len(before)
        # ...and this time the first server's pages from its snapshot of that revision.
        pages = -(-len(names) // LIMIT)
        assert lists(running[0], Source.SNAPSHOT) - from_snapshots == pages // 2


async def test_a_write_through_one_server_is_read_on_the_other_at_once(
    etcd: EtcdCluster, api: RunningApiServer, kubectl: Kubectl
) -> None:
    namespace = "e2e-two"
    async with running_apiserver(etcd.endpoints) as other:
        with core_v1_on(api.url) as one, core_v1_on(other.url) as two:
            await call(
                one.create_namespace,
                k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=namespace)),
                _request_timeout=REQUEST_TIMEOUT,
            )
            for i in range(20):
                name = f"cm-{i}"
                body = k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name=name), data={"i": str(i)})
                writer, reader = (one, two) if i % 2 == 0 else (two, one)
                created = await call(
                    writer.create_namespaced_config_map,
                    namespace,
                    body,
                    _request_timeout=REQUEST_TIMEOUT,
                )
                # A consistent list (no resourceVersion) on the other server has it.
                listed = await call(
                    reader.list_namespaced_config_map, namespace, _request_timeout=REQUEST_TIMEOUT
                )
                assert [item.metadata.name for item in listed.items if item.metadata] == sorted(
                    f"cm-{n}" for n in range(i + 1)
                )
                assert listed.metadata is not None and created.metadata is not None
                assert int(str(listed.metadata.resource_version)) >= int(
                    str(created.metadata.resource_version)
                )
            patched = await call(
                one.patch_namespaced_config_map,
                "cm-3",
                namespace,
                {"data": {"i": "changed"}},
                _request_timeout=REQUEST_TIMEOUT,
            )
            read = await call(
                two.read_namespaced_config_map, "cm-3", namespace, _request_timeout=REQUEST_TIMEOUT
            )
            assert read.data == {"i": "changed"}
            assert read.metadata is not None and patched.metadata is not None
            assert read.metadata.resource_version == patched.metadata.resource_version
            await call(
                two.delete_namespaced_config_map,
                "cm-3",
                namespace,
                _request_timeout=REQUEST_TIMEOUT,
            )
            # kubectl on the first server (a later --server wins) sees the second's delete.
            result = await kubectl("--server", api.url, "get", "cm", "cm-3", "-n", namespace)
            assert result.returncode == 1
            assert 'Error from server (NotFound): configmaps "cm-3" not found' in result.stderr
            result = await kubectl(
                "--server", other.url, "get", "cm", "-n", namespace, "-o", "name"
            )
            assert result.returncode == 0, result.stderr
            assert sorted(result.stdout.split()) == sorted(
                f"configmap/cm-{n}" for n in range(20) if n != 3
            )
