"""The first-bytes gate (apiserver/first_bytes.py): streams give way to requests waiting
for their first byte, all of them, and never for long. That every wait the HTTP protocol
counts ends, once: tests/reliability/test_http_edge.py."""

from __future__ import annotations

import asyncio

from watchcache.apiserver.first_bytes import MAX_PAUSE_SECONDS, FirstBytesGate, first_bytes_gate


async def turns(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_with_no_request_waiting_a_stream_goes_on_after_one_turn() -> None:
    gate = FirstBytesGate()
    step = asyncio.ensure_future(gate.give_way())
    await turns(2)
    assert step.done()


async def test_a_stream_waits_until_the_waiting_request_has_answered() -> None:
    gate = FirstBytesGate()
    gate.arrived()
    steps = [asyncio.ensure_future(gate.give_way()) for _ in range(3)]
    await turns(5)
    assert not any(step.done() for step in steps)
    gate.answered()
    await asyncio.wait_for(asyncio.gather(*steps), 5)
    assert gate.waiting == 0


async def test_every_waiting_request_must_answer_before_streams_go_on() -> None:
    gate = FirstBytesGate()
    gate.arrived()
    gate.arrived()
    step = asyncio.ensure_future(gate.give_way())
    gate.answered()
    await turns(5)
    assert not step.done()
    gate.answered()
    await asyncio.wait_for(step, 5)


async def test_a_request_that_never_answers_only_slows_streams_down() -> None:
    gate = FirstBytesGate()
    gate.arrived()
    loop = asyncio.get_running_loop()
    started = loop.time()
    for _ in range(3):
        await asyncio.wait_for(gate.give_way(), 5)
    assert loop.time() - started >= 3 * MAX_PAUSE_SECONDS * 0.9  # each step waited its pause
    assert gate.waiting == 1


async def test_a_stream_cancelled_while_it_gives_way_leaves_the_others_paused() -> None:
    gate = FirstBytesGate()
    gate.arrived()
    gone, staying = (asyncio.ensure_future(gate.give_way()) for _ in range(2))
    await turns(2)
    gone.cancel()
    await turns(2)
    assert not staying.done()
    gate.answered()
    await asyncio.wait_for(staying, 5)


async def test_each_event_loop_has_its_own_gate() -> None:
    here = first_bytes_gate()
    assert first_bytes_gate() is here

    async def elsewhere() -> FirstBytesGate:
        return first_bytes_gate()

    other = await asyncio.to_thread(asyncio.run, elsewhere())
    assert other is not here
