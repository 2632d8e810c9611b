"""Driving the official ``kubernetes`` Python client (synchronous) from async tests: each
call runs in a thread, bounded, while the apiserver keeps serving in the test's loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from kubernetes import client as k8s

P = ParamSpec("P")
T = TypeVar("T")

#: (connect, read) timeouts of every request the client makes.
REQUEST_TIMEOUT = (5.0, 20.0)
#: Bound on one client call, thread included.
CALL_TIMEOUT = 30.0


async def call(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """One client call in a thread, bounded."""
    return await asyncio.wait_for(asyncio.to_thread(fn, *args, **kwargs), CALL_TIMEOUT)


def namespaced_name(item: k8s.V1ConfigMap) -> tuple[str, str]:
    assert item.metadata is not None
    return str(item.metadata.namespace), str(item.metadata.name)
