"""Leader election with the official ``kubernetes`` client over coordination.k8s.io/v1
Leases: two candidates (processes), one leads; when it dies the other takes over after
the lease expires."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from apiserver_fixture import RunningApiServer

ELECTOR = Path(__file__).parent / "electors" / "lease_elector.py"
LEASE = "/apis/coordination.k8s.io/v1/namespaces/default/leases/e2e-leader"


@pytest.fixture
async def candidates(api: RunningApiServer) -> AsyncIterator[list[asyncio.subprocess.Process]]:
    started: list[asyncio.subprocess.Process] = []
    try:
        for identity in ("alpha", "beta"):
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                str(ELECTOR),
                api.url,
                "default",
                "e2e-leader",
                identity,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            started.append(process)
        yield started
    finally:
        for process in started:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
            await process.wait()


async def leader_line(process: asyncio.subprocess.Process, timeout: float) -> str:
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), timeout)
    return line.decode().strip()


async def test_one_candidate_leads_and_the_other_takes_over_when_it_dies(
    candidates: list[asyncio.subprocess.Process], http: httpx.AsyncClient
) -> None:
    alpha, beta = candidates
    first, pending = await asyncio.wait(
        [asyncio.ensure_future(leader_line(p, 30)) for p in candidates],
        return_when=asyncio.FIRST_COMPLETED,
    )
    for task in pending:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    winner_line = next(iter(first)).result()
    assert winner_line in ("leading alpha", "leading beta")
    winner, loser = (alpha, beta) if winner_line == "leading alpha" else (beta, alpha)
    lease = (await http.get(LEASE)).json()
    assert lease["spec"]["holderIdentity"] == winner_line.split()[1]

    # The loser keeps trying while the winner renews: no second leader.
    with pytest.raises(TimeoutError):
        await leader_line(loser, 6)

    winner.kill()
    await winner.wait()
    taken = await leader_line(loser, 30)
    assert taken == f"leading {'beta' if winner is alpha else 'alpha'}"
    lease = (await http.get(LEASE)).json()
    assert lease["spec"]["holderIdentity"] == taken.split()[1]
