"""Hostile clients at the HTTP edge: a real apiserver over real TCP on a real etcd.

Every kind of bad input gets a clear answer or a closed connection, never a 5xx, an error
logged as a server fault, a hang, or memory that grows with what the client sends; and a
well-behaved client is served all along. tests/integration/test_apiserver.py already checks
an oversized body with a Content-Length, deep POST and merge-PATCH bodies, invalid UTF-8
inside a JSON string, ``limit`` 2**62 / 2**70 and a label selector of invalid UTF-8; this
file goes beyond them.

Two servers, on one etcd shared by the module (each test uses its own object names):

* ``api``: tests/support's ``running_apiserver`` (uvicorn as the other integration tests
  run it), for what the ASGI app decides: statuses of bad paths, queries and bodies;
* ``guarded``: the app as ``watchcache serve`` runs it (``http.uvicorn_config``, so with
  ``GuardedHttpProtocol``), with the head and body deadlines cut from 32 s / 60 s to 2 s /
  3 s, for what the connection layer decides: slowloris, endless headers, bodies past the
  limit that keep coming.

Clients here are raw sockets, so the bytes on the wire are exactly the hostile ones (httpx
would refuse or normalize most of them), plus httpx for the well-behaved client. Memory is
the resident set of this process (the server runs in it), read from ``/proc/self/statm``
before and after an attack that, undefended, would make the server buffer hundreds of MiB.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from apiserver_fixture import RunningApiServer, running_apiserver
from waiting import until

from watchcache.apiserver.first_bytes import first_bytes_gate
from watchcache.apiserver.http import guarded_protocol
from watchcache.etcd.client import EtcdClient
from watchcache.etcd.process import EtcdCluster
from watchcache.registry.admission import MAX_BODY_BYTES

HEAD_TIMEOUT = 2.0
BODY_TIMEOUT = 3.0
#: Generous: two noisy shared cores, other test suites running at the same time.
PATIENCE = 60.0
NS = "/api/v1/namespaces/default/configmaps"


# ---------------------------------------------------------------------------------------------
# Servers


@pytest.fixture
async def api(module_etcd: EtcdCluster) -> AsyncIterator[RunningApiServer]:
    async with running_apiserver(module_etcd.endpoints, min_request_timeout=5, max_limit=2) as run:
        yield run


@pytest.fixture
async def guarded(module_etcd: EtcdCluster) -> AsyncIterator[RunningApiServer]:
    """The apiserver under ``http.uvicorn_config``, with short deadlines."""
    protocol = guarded_protocol(head_timeout=HEAD_TIMEOUT, body_timeout=BODY_TIMEOUT)
    async with running_apiserver(
        module_etcd.endpoints, protocol=protocol, min_request_timeout=5
    ) as run:
        yield run


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


# ---------------------------------------------------------------------------------------------
# Raw HTTP


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def status_json(self) -> tuple[int, str]:
        """(code, reason) of a ``metav1.Status`` body, checked against the HTTP status."""
        assert self.headers.get("content-type", "").startswith("application/json"), self
        status = json.loads(self.body)
        assert status["kind"] == "Status" and status["apiVersion"] == "v1", status
        assert status["code"] == self.status, status
        assert status["message"], status
        return status["code"], status["reason"]


def parse_response(data: bytes) -> RawResponse:
    head, separator, rest = data.partition(b"\r\n\r\n")
    assert separator, f"no complete response head in {data[:200]!r}"
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding") == "chunked":
        body = b""
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line, 16)
            body, rest = body + rest[:size], rest[size + 2 :]
            if size == 0:
                break
    else:
        body = rest[: int(headers.get("content-length", len(rest)))]
    return RawResponse(status, headers, body)


def raw_request(
    method: str, target: bytes, body: bytes = b"", content_type: bytes = b"application/json"
) -> bytes:
    """One request that asks the server to close the connection after answering."""
    head = [method.encode() + b" " + target + b" HTTP/1.1", b"Host: edge", b"Connection: close"]
    if body or method in ("POST", "PUT", "PATCH"):
        head += [b"Content-Type: " + content_type, b"Content-Length: %d" % len(body)]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


async def exchange(port: int, request: bytes) -> RawResponse:
    """Send ``request`` on a new connection; the response, read until the server closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), PATIENCE)
    finally:
        await close_quietly(writer)
    return parse_response(data)


async def close_quietly(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()


def resident_bytes() -> int:
    """This process's resident set (the servers run in it), in bytes."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * 4096


def server_faults(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Errors the server logged: an unexpected exception anywhere in the app or uvicorn."""
    return [
        f"{r.name}: {r.getMessage()}"
        for r in caplog.records
        if r.levelno >= logging.ERROR and r.name.startswith(("watchcache", "uvicorn"))
    ]


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"edge": "yes"}}, "data": data}


async def etcd_revision_of(client: EtcdClient, name: str) -> int | None:
    kv = await client.get(f"/registry/configmaps/default/{name}".encode())
    return None if kv is None else int(kv.mod_revision)


# ---------------------------------------------------------------------------------------------
# Paths, queries and bodies the app answers


@pytest.mark.parametrize(
    ("request_bytes", "expected"),
    [
        # Bytes that are not even ASCII in the request line: the HTTP parser refuses them.
        (b"GET " + NS.encode() + b"/\xff\xfe HTTP/1.1\r\nHost: e\r\n\r\n", (400, None)),
        (b"GET " + NS.encode() + b"?limit=\xff HTTP/1.1\r\nHost: e\r\n\r\n", (400, None)),
        # Percent-escaped invalid UTF-8 in each parameter the API decodes.
        (raw_request("GET", NS.encode() + b"?continue=%ff%fe"), (400, "BadRequest")),
        (raw_request("GET", NS.encode() + b"?resourceVersion=%ff"), (400, "BadRequest")),
        (raw_request("GET", NS.encode() + b"?limit=%c0%af"), (400, "BadRequest")),
        (raw_request("GET", NS.encode() + b"?fieldSelector=%ff%3Dx"), (400, "BadRequest")),
        (raw_request("GET", NS.encode() + b"?watch=1&timeoutSeconds=%ff"), (400, "BadRequest")),
        (raw_request("GET", NS.encode() + b"?watch=1&labelSelector=a%3D%ff"), (400, "BadRequest")),
        # ... in a path segment: a name that cannot exist, a namespace that holds nothing
        # (Kubernetes also lists an empty collection for any namespace text).
        (raw_request("GET", NS.encode() + b"/%ff%fe"), (404, "NotFound")),
        (raw_request("DELETE", NS.encode() + b"/%ed%a0%80"), (404, "NotFound")),
        (raw_request("GET", b"/api/v1/namespaces/%ff/configmaps"), (200, None)),
        # ... in a body, outside any string (inside one, see the test below).
        (raw_request("POST", NS.encode(), b'\xff{"metadata":{"name":"x"}}'), (400, "BadRequest")),
    ],
    ids=[
        "raw-byte-in-path",
        "raw-byte-in-query",
        "continue",
        "resourceVersion",
        "limit-overlong",
        "fieldSelector-key",
        "watch-timeoutSeconds",
        "watch-labelSelector",
        "name",
        "delete-surrogate-name",
        "namespace",
        "body-outside-string",
    ],
)
async def test_invalid_utf8_in_path_query_or_body_gets_a_clear_answer(
    api: RunningApiServer,
    caplog: pytest.LogCaptureFixture,
    request_bytes: bytes,
    expected: tuple[int, str | None],
) -> None:
    response = await exchange(port_of(api.url), request_bytes)
    code, reason = expected
    assert response.status == code, response
    if reason is not None:
        assert response.status_json() == expected
    elif code == 200:
        listed = json.loads(response.body)
        assert listed["kind"] == "ConfigMapList" and listed["items"] == []
    assert not server_faults(caplog)


async def test_invalid_utf8_inside_a_string_is_read_as_go_reads_it(
    api: RunningApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Go's JSON decoder replaces each byte of invalid UTF-8 inside a string (an overlong
    '/', an encoded surrogate) with U+FFFD rather than refusing the body; so does ours, and
    what is stored and answered is valid UTF-8."""
    port = port_of(api.url)
    overlong = b'{"metadata":{"name":"utf"},"data":{"k":"\xc0\xaf"}}'
    created = await exchange(port, raw_request("POST", NS.encode(), overlong))
    assert created.status == 201, created
    assert json.loads(created.body)["data"] == {"k": "\ufffd\ufffd"}
    surrogate = b'{"metadata":{"name":"utf"},"data":{"k":"\xed\xa0\x80"}}'
    replaced = await exchange(port, raw_request("PUT", NS.encode() + b"/utf", surrogate))
    assert replaced.status == 200, replaced
    stored = await api.client.get(b"/registry/configmaps/default/utf")
    assert stored is not None
    assert json.loads(stored.value.decode("utf-8"))["data"] == {"k": "\ufffd\ufffd\ufffd"}
    assert not server_faults(caplog)


async def test_unpaired_surrogate_escapes_are_stored_as_replacement_characters(
    api: RunningApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression: ``"\\ud800"`` in a body used to pass validation and then fail to encode
    (500). Go's decoder reads an unpaired surrogate escape as U+FFFD; so does ours now, in
    creates, both kinds of JSON patch and the answers."""
    port = port_of(api.url)
    body = rb'{"metadata":{"name":"sur","annotations":{"a":"\udfff"}},"data":{"k":"x\ud800y"}}'
    created = await exchange(port, raw_request("POST", NS.encode(), body))
    assert created.status == 201, created
    assert json.loads(created.body)["data"] == {"k": "x\ufffdy"}
    merge = rb'{"data":{"lone":"\ud83d","pair":"\ud83d\ude00"}}'
    merged = await exchange(
        port, raw_request("PATCH", NS.encode() + b"/sur", merge, b"application/merge-patch+json")
    )
    assert merged.status == 200, merged
    json_patch = rb'[{"op":"add","path":"/data/j","value":"\udc80"}]'
    patched = await exchange(
        port,
        raw_request("PATCH", NS.encode() + b"/sur", json_patch, b"application/json-patch+json"),
    )
    assert patched.status == 200, patched
    stored = await api.client.get(b"/registry/configmaps/default/sur")
    assert stored is not None
    obj = json.loads(stored.value.decode("utf-8"))  # strict: the stored text is valid UTF-8
    assert obj["metadata"]["annotations"] == {"a": "\ufffd"}
    assert obj["data"] == {
        "k": "x\ufffdy",
        "lone": "\ufffd",
        "pair": "\U0001f600",
        "j": "\ufffd",
    }
    answered = await exchange(port, raw_request("GET", NS.encode() + b"/sur"))
    assert json.loads(answered.body)["data"] == obj["data"]
    assert not server_faults(caplog)


async def test_an_unpaired_surrogate_written_to_etcd_by_another_client_does_not_stop_the_cache(
    api: RunningApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression: such a value used to kill the reflector (UnicodeEncodeError making the
    Item), so the cache froze and every later LIST was a 500."""
    foreign = (
        b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"foreign","namespace":'
        b'"default","labels":{"edge":"yes"}},"data":{"k":"\\ud800"}}'
    )
    await api.client.put(b"/registry/configmaps/default/foreign", foreign)
    async with httpx.AsyncClient(base_url=api.url, timeout=PATIENCE) as http:
        after = await http.post(NS, json=configmap("after-foreign"))
        assert after.status_code == 201, after.text
        rv = after.json()["metadata"]["resourceVersion"]
        # A LIST at the write's rv is served once the cache has seen both changes.
        listed = await http.get(NS, params={"resourceVersion": rv, "labelSelector": "edge"})
    assert listed.status_code == 200, listed.text
    items = {i["metadata"]["name"]: i for i in listed.json()["items"]}
    assert items["foreign"]["data"] == {"k": "\ufffd"}
    assert "after-foreign" in items
    assert not server_faults(caplog)


_DEEP = b"[" * 1_000_000 + b"]" * 1_000_000  # 2 MB: under the body limit


@pytest.mark.parametrize(
    ("method", "body", "content_type"),
    [
        ("PUT", b'{"metadata":{"name":"deep"},"data":' + _DEEP + b"}", b"application/json"),
        ("PUT", b'{"a":' * 300_000 + b"1" + b"}" * 300_000, b"application/json"),
        ("DELETE", _DEEP, b"application/json"),
        ("PATCH", _DEEP, b"application/json-patch+json"),
        ("PATCH", b'{"data":' + _DEEP + b"}", b"application/strategic-merge-patch+json"),
        ("PATCH", b'{"a":' * 300_000 + b"1" + b"}" * 300_000, b"application/merge-patch+json"),
    ],
    ids=["put-arrays", "put-objects", "delete-options", "json-patch", "strategic", "merge-objects"],
)
async def test_deeply_nested_json_in_any_body_gets_400_and_changes_nothing(
    api: RunningApiServer,
    caplog: pytest.LogCaptureFixture,
    method: str,
    body: bytes,
    content_type: bytes,
) -> None:
    port = port_of(api.url)
    created = await exchange(
        port, raw_request("POST", NS.encode(), json.dumps(configmap("deep")).encode())
    )
    assert created.status in (201, 409), created  # 409: an earlier parameter made it
    before = await etcd_revision_of(api.client, "deep")
    response = await exchange(port, raw_request(method, NS.encode() + b"/deep", body, content_type))
    assert response.status_json() == (400, "BadRequest")
    assert await etcd_revision_of(api.client, "deep") == before
    assert not server_faults(caplog)


async def test_huge_negative_and_malformed_limits(api: RunningApiServer) -> None:
    """``limit`` is a Go int64: ``<= 0`` means no paging, past the server's maximum (2 here)
    it is capped, anything that is not an int64 in decimal is a 400."""
    async with httpx.AsyncClient(base_url=api.url, timeout=PATIENCE) as http:
        for i in range(3):
            made = await http.post(NS, json=configmap(f"limit-{i}"))
            assert made.status_code in (201, 409), made.text
        everything = len((await http.get(NS)).json()["items"])
        assert everything >= 3
        for limit in ("-1", str(-(2**63)), "0"):
            page = (await http.get(NS, params={"limit": limit})).json()
            assert len(page["items"]) == everything, limit
            assert "continue" not in page["metadata"], limit
        for limit in (str(2**63 - 1), "+3", "0003"):
            page = (await http.get(NS, params={"limit": limit})).json()
            assert len(page["items"]) == 2, limit  # capped at the server's max_limit
            assert page["metadata"]["continue"], limit
        for limit in (str(-(2**63) - 1), str(2**64), "", " 1", "1.5", "0x10", "1e3", "\u0661"):
            for watch in ({}, {"watch": "1"}):
                response = await http.get(NS, params={"limit": limit, **watch})
                assert response.status_code == 400, (limit, watch, response.text)
                assert response.json()["reason"] == "BadRequest"
                assert "limit" in response.json()["message"]


@pytest.mark.parametrize(
    "rv", ["abc", "-1", "1e3", " 1", "0x10", str(2**64), "\u0661\u0662", "1;2", "%"], ids=repr
)
async def test_a_resource_version_that_is_not_a_number_gets_400_everywhere(
    api: RunningApiServer, rv: str
) -> None:
    async with httpx.AsyncClient(base_url=api.url, timeout=PATIENCE) as http:
        made = await http.post(NS, json=configmap("rv-target"))
        assert made.status_code in (201, 409), made.text
        for url, params in [
            (NS, {"resourceVersion": rv}),
            (NS, {"resourceVersion": rv, "watch": "1"}),
            (NS, {"resourceVersion": rv, "resourceVersionMatch": "NotOlderThan"}),
            (NS + "/rv-target", {"resourceVersion": rv}),
        ]:
            response = await http.get(url, params=params)
            assert response.status_code == 400, (url, params, response.text)
            assert response.json()["reason"] == "BadRequest"
        update = configmap("rv-target")
        update["metadata"]["resourceVersion"] = rv
        replaced = await http.put(NS + "/rv-target", json=update)
        assert replaced.status_code == 400, replaced.text


async def test_a_table_watch_with_a_bad_include_object_gets_400_before_the_stream(
    api: RunningApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression (found by test_fuzz_inputs): the value was checked when the first event
    was rendered, after the 200, so the stream broke off with an exception."""
    async with httpx.AsyncClient(base_url=api.url, timeout=PATIENCE) as http:
        made = await http.post(NS, json=configmap("table-watch"))
        assert made.status_code in (201, 409), made.text
        for watch in ({"watch": "1", "timeoutSeconds": "5"}, {}):
            response = await http.get(
                NS,
                params={"includeObject": "x", **watch},
                headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
            )
            assert response.status_code == 400, (watch, response.text)
            assert response.json()["message"] == 'unrecognized includeObject value: "x"'
    assert not server_faults(caplog)


async def test_a_client_that_disconnects_mid_body_is_not_a_server_error(
    api: RunningApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression: the handler's ClientDisconnect used to be logged as an internal error
    with a traceback, and answered 500."""
    caplog.set_level(logging.DEBUG, logger="watchcache.apiserver.app")
    _, writer = await asyncio.open_connection("127.0.0.1", port_of(api.url))
    head = raw_request("POST", NS.encode(), b"x" * 1000).split(b"\r\n\r\n")[0]
    writer.write(head + b'\r\n\r\n{"metadata":')
    await writer.drain()
    await asyncio.sleep(0.2)
    await close_quietly(writer)
    async with asyncio.timeout(PATIENCE):
        while not any("disconnected" in r.getMessage() for r in caplog.records):
            await asyncio.sleep(0.05)
    assert not server_faults(caplog)


# ---------------------------------------------------------------------------------------------
# What the connection layer decides (the server as `watchcache serve` runs it)


async def send_until_closed(writer: asyncio.StreamWriter, reader: asyncio.StreamReader) -> bytes:
    """Keep sending body bytes until the server ends the connection; what it answered."""
    answered = b""
    chunk = b"x" * 65536
    async with asyncio.timeout(PATIENCE):
        while True:
            try:
                writer.write(chunk)
                await writer.drain()
            except ConnectionError:
                break
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.001):
                    data = await reader.read(65536)
                    if not data:
                        break
                    answered += data
    with contextlib.suppress(ConnectionError, TimeoutError):
        async with asyncio.timeout(1):
            answered += await reader.read()
    return answered


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
async def test_a_body_past_the_limit_gets_413_and_the_connection_ends(
    guarded: RunningApiServer, caplog: pytest.LogCaptureFixture, framing: str
) -> None:
    """The 413 comes as soon as the limit is known to be passed (at once for a declared
    length, after 3 MiB for a chunked body), and a client that keeps sending is cut off
    instead of being read for ever."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port_of(guarded.url))
    framing_header = (
        b"Content-Length: %d" % (1 << 40)
        if framing == "content-length"
        else b"Transfer-Encoding: chunked"
    )
    writer.write(
        b"POST "
        + NS.encode()
        + b" HTTP/1.1\r\nHost: edge\r\nContent-Type: application/json\r\n"
        + framing_header
        + b"\r\n\r\n"
    )
    if framing == "chunked":
        # Chunk framing around the filler the helper sends: one endless chunk.
        writer.write(b"%x\r\n" % (1 << 40))
    try:
        answered = await send_until_closed(writer, reader)
    finally:
        await close_quietly(writer)
    response = parse_response(answered)
    assert response.status_json() == (413, "RequestEntityTooLarge")
    assert str(MAX_BODY_BYTES) in json.loads(response.body)["message"]
    assert not server_faults(caplog)


async def test_an_endless_header_gets_431_and_memory_stays_bounded(
    guarded: RunningApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Eight clients each send a 32 MiB header. Undefended, uvicorn buffered all of it
    (256 MiB, and more in copies); with the cap each costs about 1 MiB."""
    clients, size = 8, 32 << 20

    async def endless_header() -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port_of(guarded.url))
        try:
            writer.write(b"GET " + NS.encode() + b" HTTP/1.1\r\nHost: edge\r\nX-Filler: ")
            with contextlib.suppress(ConnectionError):
                for _ in range(size // 65536):
                    writer.write(b"a" * 65536)
                    await writer.drain()
            with contextlib.suppress(ConnectionError):
                return await asyncio.wait_for(reader.read(), PATIENCE)
            return b""
        finally:
            await close_quietly(writer)

    gc.collect()
    before = resident_bytes()
    async with httpx.AsyncClient(base_url=guarded.url, timeout=PATIENCE) as http:
        attack = asyncio.gather(*(endless_header() for _ in range(clients)))
        listed = await http.get(NS)
        answers = await attack
    grown = resident_bytes() - before
    assert listed.status_code == 200
    assert answers.count(b"") < clients, "the server never answered 431"
    for answer in answers:
        if answer:  # or reset before the answer was read: also an end
            assert answer.startswith(b"HTTP/1.1 431 "), answer[:100]
    # Capped, each costs about http.MAX_HEAD_BYTES (1 MiB) plus a read: whatever else the
    # process did meanwhile, the growth stays far below what the clients sent.
    assert grown < clients * size // 3, f"resident set grew by {grown >> 20} MiB"
    assert not server_faults(caplog)


@dataclass
class Hostile:
    """How a hostile connection ended: ``cut`` if the server closed it in time."""

    kind: str
    cut: bool
    sent: int


async def hostile(port: int, kind: str, at_once: bytes, dribbled: bytes) -> Hostile:
    """Send ``at_once``, then ``dribbled`` a byte every 100 ms, until the server ends the
    connection (``dribbled`` outlasts the test; empty: say nothing more and wait)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    ended = asyncio.ensure_future(reader.read())
    sent = 0
    try:
        async with asyncio.timeout(PATIENCE):
            writer.write(at_once)
            await writer.drain()
            for byte in dribbled:
                if ended.done():
                    break
                writer.write(bytes([byte]))
                await writer.drain()
                sent += 1
                await asyncio.wait({ended}, timeout=0.1)
            await ended
        return Hostile(kind, True, sent)
    except ConnectionError:
        return Hostile(kind, True, sent)
    except TimeoutError:
        return Hostile(kind, False, sent)
    finally:
        ended.cancel()
        with contextlib.suppress(asyncio.CancelledError, OSError):
            await ended
        await close_quietly(writer)


async def test_slowloris_clients_are_cut_off_while_others_are_served(
    guarded: RunningApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    """40 clients dribble a head (header lines that never end it), 10 a body, 10 connect
    and say nothing. Meanwhile a client lists, watches and writes; every hostile connection
    is closed by the server after its deadline (2 s for a head, 3 s for a body here)."""
    endless_head = b"GET " + NS.encode() + b" HTTP/1.1\r\nHost: edge\r\n" + b"X-Slow: 1\r\n" * 1000
    head, _, body = raw_request("POST", NS.encode(), b"{" + b" " * 100_000 + b"}").partition(
        b"\r\n\r\n"
    )
    attack = asyncio.gather(
        *(hostile(port_of(guarded.url), "head", b"", endless_head) for _ in range(40)),
        *(hostile(port_of(guarded.url), "idle", b"", b"") for _ in range(10)),
        *(hostile(port_of(guarded.url), "body", head + b"\r\n\r\n", body) for _ in range(10)),
    )
    async with httpx.AsyncClient(base_url=guarded.url, timeout=PATIENCE) as http:
        await asyncio.sleep(0.5)  # the hostile connections are open
        listed = await http.get(NS)
        assert listed.status_code == 200
        params = {
            "watch": "1",
            "resourceVersion": listed.json()["metadata"]["resourceVersion"],
            "timeoutSeconds": "30",
        }
        async with http.stream("GET", NS, params=params) as watch:
            assert watch.status_code == 200
            made = await http.post(NS, json=configmap("during-slowloris"))
            assert made.status_code in (201, 409), made.text
            async with asyncio.timeout(PATIENCE):
                async for line in watch.aiter_lines():
                    event = json.loads(line)
                    if event["object"]["metadata"]["name"] == "during-slowloris":
                        break
        again = await http.get(NS, params={"fieldSelector": "metadata.name=during-slowloris"})
        assert [i["metadata"]["name"] for i in again.json()["items"]] == ["during-slowloris"]
    ended = await attack
    assert [h for h in ended if not h.cut] == []
    # None got its request through: the head never ends, the body is cut at its deadline.
    assert all(h.sent < len(body) for h in ended if h.kind == "body")
    assert not server_faults(caplog)


# ---------------------------------------------------------------------------------------------
# The first-bytes gate


async def test_every_request_stops_waiting_for_its_first_byte(guarded: RunningApiServer) -> None:
    """Each request is on the first-bytes gate's record (first_bytes.py) from its head to
    the end of its response, and waits while its response has not started, however it
    ends: answered, refused, or abandoned by its client; a watch stops waiting when its
    stream starts, not when it ends. A request left waiting would slow every streamed LIST
    from then on, one left on the record would hold its memory."""
    gate = first_bytes_gate()
    port = port_of(guarded.url)

    async def none_recorded() -> bool:
        return gate.recorded == 0

    async def one_waiting() -> bool:
        return gate.waiting == 1

    assert (await exchange(port, raw_request("GET", NS.encode()))).status == 200
    assert (await exchange(port, raw_request("GET", NS.encode() + b"/missing"))).status == 404
    assert (await exchange(port, raw_request("POST", NS.encode(), b"\xff{"))).status == 400
    await until(none_recorded, "the answered requests to leave the record", PATIENCE)
    # A client that sends a head and goes away before its body.
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = raw_request("POST", NS.encode(), b"x" * 100)
    writer.write(head[: head.index(b"\r\n\r\n") + 4] + b'{"meta')
    await writer.drain()
    await until(one_waiting, "the request to wait", PATIENCE)
    await close_quietly(writer)
    await until(none_recorded, "the abandoned request to leave the record", PATIENCE)

    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw_request("GET", NS.encode() + b"?watch=1&timeoutSeconds=30"))
        await writer.drain()
        await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), PATIENCE)
        # The server runs in this loop: its head was sent, so it no longer waits.
        assert gate.waiting == 0 and gate.recorded == 1
    finally:
        await close_quietly(writer)
    await until(none_recorded, "every request to leave the record", PATIENCE)
