"""`evalkit serve` aborts the sequences of clients that have gone (issue 16, item 1): the engine
loop aborts a cancelled request before its next step (slot freed, state zeroed), and over real
HTTP a server whose every slot is held by abandoned streams answers the next request at once."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from evalkit.serve.engine_adapter import StepResult
from evalkit.serve.engine_loop import EngineLoop
from evalkit.serve.server import Server


class EndlessAdapter:
    """A fake engine whose requests decode forever; it records when each abort happened."""

    def __init__(self) -> None:
        self.live: dict[int, int] = {}  # rid -> tokens generated
        self.steps = 0
        self.aborted: dict[int, int] = {}  # rid -> step count at the abort
        self.stepped: list[set[int]] = []  # which rids each step advanced

    def add(self, prompt_ids: list[int], params: Any) -> int:
        rid = len(self.live) + len(self.aborted)
        self.live[rid] = 0
        return rid

    def abort(self, rid: int) -> None:
        self.aborted[rid] = self.steps
        del self.live[rid]

    def has_unfinished(self) -> bool:
        return bool(self.live)

    def step(self) -> StepResult:
        self.steps += 1
        self.stepped.append(set(self.live))
        for rid in self.live:
            self.live[rid] += 1
        return StepResult(finished={}, decode_batch=len(self.live))

    def partial_tokens(self, rids: set[int]) -> dict[int, list[int]]:
        return {rid: [7] * self.live[rid] for rid in rids if rid in self.live}


def test_a_cancelled_request_is_aborted_before_the_next_decode_step(monkeypatch):
    monkeypatch.setattr(EngineLoop, "alive", property(lambda self: True))

    async def scenario() -> tuple[EndlessAdapter, Any]:
        adapter = EndlessAdapter()
        loop = EngineLoop(adapter)  # not started: the test turns the engine thread's crank itself
        keep, drop = loop.submit([1, 2], None, stream=True), loop.submit([3, 4], None)
        for _ in range(3):
            loop.iterate()
        loop.cancel(drop)
        loop.iterate()  # one more turn: the abort must come before this step
        await asyncio.sleep(0)  # let the loop deliver the result
        assert drop.future.cancelled()  # nobody waits for it: resolved without an exception to log
        assert not keep.future.done()
        assert loop.stats.aborted == 1 and loop.in_flight == 1
        return adapter, loop

    adapter, _ = asyncio.run(scenario())
    assert adapter.aborted == {1: 3}  # aborted after step 3, before step 4
    assert adapter.stepped[3] == {0}  # step 4 advanced only the request still wanted


@pytest.fixture(scope="module")
def two_slot_server(tiny_hybrid_ckpt):
    from evalkit.engine import LLMEngine

    engine = LLMEngine(str(tiny_hybrid_ckpt), state_dtype="fp32", device="cpu", max_num_seqs=2)
    with Server(engine, model_name="tiny") as srv:
        yield srv, engine


def _metrics(srv: Server) -> dict[str, Any]:
    return srv.loop.stats.as_dict()


async def _stream_then_leave(url: str, chunks: int) -> None:
    body = {
        "messages": [{"role": "user", "content": "Count forever."}],
        "stream": True,
        "ignore_eos": True,
    }
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        async with http.stream("POST", "/chat/completions", json=body) as resp:
            assert resp.status_code == 200
            seen = 0
            async for line in resp.aiter_lines():
                seen += line.startswith("data: ")
                if seen >= chunks:
                    return  # leaving the block closes the connection mid-stream


def _states_zeroed(engine: Any) -> bool:
    return all(not t.any() for t in engine.state.kda.values())


def _wait_idle(srv: Server, engine: Any) -> None:
    """Wait (bounded) until the engine holds no sequence; a failure here is the defect itself."""
    import time

    deadline = time.monotonic() + 60
    while srv.loop.in_flight and time.monotonic() < deadline:
        time.sleep(0.01)
    assert srv.loop.in_flight == 0, "abandoned sequences are still decoding"


def test_streams_that_disconnect_free_their_slots_and_the_next_request_is_answered(two_slot_server):
    srv, engine = two_slot_server
    before = _metrics(srv)

    async def leave_both() -> None:
        await asyncio.gather(_stream_then_leave(srv.url, 3), _stream_then_leave(srv.url, 3))

    asyncio.run(leave_both())
    _wait_idle(srv, engine)
    r = httpx.post(srv.url + "/completions", json={"prompt": "Hi", "max_tokens": 2}, timeout=60)
    assert r.status_code == 200
    after = _metrics(srv)
    assert after["aborted"] - before["aborted"] == 2
    assert after["finished"] - before["finished"] == 1  # the streams never ran to their end
    assert engine.state.free_slots == engine.state.num_slots and _states_zeroed(engine)


def test_a_non_streaming_client_that_times_out_frees_its_slot(two_slot_server):
    srv, engine = two_slot_server
    before = _metrics(srv)
    body = {"prompt": "Count forever.", "ignore_eos": True, "max_tokens": 100_000}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(srv.url + "/completions", json=body, timeout=httpx.Timeout(60, read=0.5))
    _wait_idle(srv, engine)
    assert _metrics(srv)["aborted"] - before["aborted"] == 1
    assert _metrics(srv)["finished"] == before["finished"]
    assert engine.state.free_slots == engine.state.num_slots and _states_zeroed(engine)
