"""Waiting in async tests for something another process or loop brings about."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest


async def until(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 60.0) -> None:
    """Poll ``check`` every 0.2 s until it is true; fail the test naming ``what`` after
    ``timeout`` seconds."""
    try:
        async with asyncio.timeout(timeout):
            while not await check():
                await asyncio.sleep(0.2)
    except TimeoutError:
        pytest.fail(f"timed out waiting for {what}")
