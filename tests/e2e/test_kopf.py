"""A kopf operator (PyPI ``kopf``, run as its own process) against the apiserver:
create, update and delete handlers each run exactly once, deletion waits for kopf's
finalizer until the delete handler has run, and the operator's timer stops with the
object."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from apiserver_fixture import RunningApiServer
from kopf_process import kopf_operator

OPERATOR = Path(__file__).parent / "operators" / "recording_operator.py"
NAMESPACE = "e2e-kopf"
FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
CMS = f"/api/v1/namespaces/{NAMESPACE}/configmaps"


@pytest.fixture
async def operator(
    api: RunningApiServer, http: httpx.AsyncClient, tmp_path: Path
) -> AsyncIterator[Path]:
    """The operator running against ``api``; yields the file it records into."""
    made = await http.post("/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}})
    assert made.status_code in (201, 409), made.text
    record = tmp_path / "record.jsonl"
    record.touch()
    async with kopf_operator(
        api.url,
        OPERATOR,
        tmp_path,
        ["--standalone", "--namespace", NAMESPACE],
        env={"RECORD_FILE": str(record)},
    ):
        yield record


def recorded(record: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in record.read_text().splitlines() if line]


async def until(condition: Any, what: str, timeout: float = 30.0) -> None:
    async with asyncio.timeout(timeout):
        while not await condition():
            await asyncio.sleep(0.1)
    del what


async def test_handlers_run_once_and_deletion_waits_for_the_finalizer(
    operator: Path, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    created = await http.post(
        CMS,
        json={"metadata": {"name": "handled", "labels": {"kopf-e2e": "yes"}}, "data": {"k": "1"}},
    )
    assert created.status_code == 201, created.text

    async def events(kind: str) -> int:
        return sum(1 for e in recorded(operator) if e["event"] == kind and e["name"] == "handled")

    async def has_create_and_finalizer() -> bool:
        obj = (await http.get(f"{CMS}/handled")).json()
        return await events("create") >= 1 and FINALIZER in obj["metadata"].get("finalizers", [])

    try:
        await until(has_create_and_finalizer, "the create handler and kopf's finalizer")

        changed = await http.patch(
            f"{CMS}/handled",
            content=b'{"data":{"k":"2"}}',
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert changed.status_code == 200, changed.text

        async def has_update() -> bool:
            return await events("update") >= 1

        await until(has_update, "the update handler")
        await until(lambda: _ticks_more_than(operator, 0), "the timer")

        deleted = await http.delete(f"{CMS}/handled")
        assert deleted.status_code == 200, deleted.text
        # Deletion waits for kopf: the answer is the object, marked, with its finalizer.
        assert deleted.json()["metadata"]["deletionTimestamp"]
        assert FINALIZER in deleted.json()["metadata"]["finalizers"]

        async def gone() -> bool:
            return (await http.get(f"{CMS}/handled")).status_code == 404

        await until(gone, "kopf to remove its finalizer after the delete handler")
    except TimeoutError:
        log = (tmp_path / "kopf.log").read_text(errors="replace")
        seen = recorded(operator)
        pytest.fail(f"kopf did not get there; its log:\n{log[-6000:]}\nrecord: {seen}")

    ticks_at_deletion = sum(1 for e in recorded(operator) if e["event"] == "tick")
    await asyncio.sleep(2.0)
    events_seen = [e["event"] for e in recorded(operator) if e["event"] != "tick"]
    assert events_seen == ["create", "update", "delete"]
    # The timer stopped with the object.
    assert sum(1 for e in recorded(operator) if e["event"] == "tick") == ticks_at_deletion


async def _ticks_more_than(record: Path, count: int) -> bool:
    return sum(1 for e in recorded(record) if e["event"] == "tick") > count
