"""The first-bytes gate (apiserver/first_bytes.py): streams give way to requests waiting
for their first byte, all of them, and never for long. That the HTTP protocol keeps every
request on the record exactly until its response ends: tests/reliability/test_http_edge.py."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from watchcache.apiserver.first_bytes import MAX_PAUSE_SECONDS, FirstBytesGate, first_bytes_gate


@dataclass
class Request:
    response_started: bool = False
    response_complete: bool = False
    disconnected: bool = False


async def turns(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_with_no_request_waiting_a_stream_goes_on_after_one_turn() -> None:
    gate = FirstBytesGate()
    answering = Request(response_started=True)  # a stream, or a watch: answering already
    gate.arrived(answering)
    step = asyncio.ensure_future(gate.give_way())
    await turns(2)
    assert step.done()
    assert gate.waiting == 0


async def test_streams_wait_until_the_waiting_request_starts_its_response() -> None:
    gate = FirstBytesGate()
    request = Request()
    gate.arrived(request)
    assert gate.waiting == 1
    steps = [asyncio.ensure_future(gate.give_way()) for _ in range(3)]
    await turns(5)
    assert not any(step.done() for step in steps)
    request.response_started = True
    await asyncio.wait_for(asyncio.gather(*steps), 5)
    assert gate.waiting == 0


async def test_every_waiting_request_must_start_answering_or_go_before_streams_go_on() -> None:
    gate = FirstBytesGate()
    first, second, third = Request(), Request(), Request()
    for request in (first, second, third):
        gate.arrived(request)
    step = asyncio.ensure_future(gate.give_way())
    first.response_started = True
    second.disconnected = True
    await turns(5)
    assert not step.done()
    gate.left(third)
    await asyncio.wait_for(step, 5)


async def test_a_request_that_never_answers_only_slows_streams_down() -> None:
    gate = FirstBytesGate()
    gate.arrived(Request())
    loop = asyncio.get_running_loop()
    started = loop.time()
    for _ in range(3):
        await asyncio.wait_for(gate.give_way(), 5)
    assert loop.time() - started >= 3 * MAX_PAUSE_SECONDS * 0.9  # each step waited its pause
    assert gate.waiting == 1


async def test_a_request_leaves_the_record_once_and_only_itself() -> None:
    gate = FirstBytesGate()
    a, b = Request(), Request()
    gate.arrived(a)
    gate.arrived(b)
    gate.left(a)
    gate.left(a)
    assert gate.waiting == 1
    gate.left(b)
    assert gate.waiting == 0


async def test_each_event_loop_has_its_own_gate() -> None:
    here = first_bytes_gate()
    assert first_bytes_gate() is here

    async def elsewhere() -> FirstBytesGate:
        return first_bytes_gate()

    other = await asyncio.to_thread(asyncio.run, elsewhere())
    assert other is not here


class CountedReads:
    """A request whose response has started, counting how often the gate looks at it."""

    def __init__(self) -> None:
        self.looks = 0
        self.response_complete = False
        self.disconnected = False

    @property
    def response_started(self) -> bool:
        self.looks += 1
        return True


async def test_a_request_seen_answering_is_not_looked_at_again() -> None:
    # Open watches stay on the record for hours; streams look at every step.
    gate = FirstBytesGate()
    watches = [CountedReads() for _ in range(100)]
    for watch in watches:
        gate.arrived(watch)
    for _ in range(5):
        assert gate.waiting == 0
    assert all(watch.looks == 1 for watch in watches)
    assert gate.recorded == 100
    for watch in watches:
        gate.left(watch)
    assert gate.recorded == 0
