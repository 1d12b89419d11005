"""Two sidecars on one store never both move one thread: with Redis configured, every move takes
the thread's lease there (``liminal.store.leases``), through the scripted agent.

Needs ``LIMINAL_TEST_REDIS_URL`` (skipped without it), but for the Redis that does not answer.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import anyio
import pytest

from liminal.kernel.journal import SwapJournal
from liminal.kernel.mover import SwapError
from liminal.kernel.swap import SwapManager
from liminal.store.leases import MoveLeases
from tests.integration.test_swap_scripted import FakeHarness, settings, start
from tests.support.inproc import proxy_in_process
from tests.support.proxy_process import scripted_agent_argv

pytestmark = pytest.mark.anyio
REDIS_URL = os.environ.get("LIMINAL_TEST_REDIS_URL", "")
needs_redis = pytest.mark.skipif(not REDIS_URL, reason="LIMINAL_TEST_REDIS_URL is not set")


async def held(leases: MoveLeases, thread: str) -> bytes | None:
    import redis.asyncio as redis

    client = redis.Redis.from_url(leases.url)
    try:
        value: bytes | None = await client.get(leases.key(thread))
        return value
    finally:
        await client.aclose()


@needs_redis
async def test_a_thread_another_sidecar_is_moving_is_not_moved_and_nothing_is_journaled(
        tmp_path: Path) -> None:
    harness = FakeHarness(tmp_path)
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    manager = SwapManager(settings(), journal, harness, leases=MoveLeases(REDIS_URL, 60))
    other = MoveLeases(REDIS_URL, 60)  # the other sidecar, on another machine
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (proxy, client):
        thread = await start(client)
        async with other.holding(thread.upper()) as ours:  # however the id is spelled
            assert ours
            await client.prompt(thread, "used:130000 chunks:1")  # past the threshold: a swap
            with anyio.fail_after(10):
                await manager.wait_for_swaps(1)
            assert proxy.router.backing_of(thread) == thread
            assert journal.records(begins=True) == []
            with pytest.raises(SwapError, match="another liminal on the same store is moving"):
                await manager.mover.move_thread(
                    thread, "/undo", lambda path: lambda new_id: harness.rewrite(path, 0, new_id))
            with pytest.raises(SwapError, match="another liminal"):
                await manager.mover.fresh_session(thread, "/clear")
            assert journal.records(begins=True) == []
        assert await held(other, thread) is None  # given back
        # Free again: the command moves it, holding the lease while it does.
        seen: list[bytes | None] = []

        def plan(path: Path) -> object:
            def write(new_id: str) -> object:
                seen.append(anyio.from_thread.run(held, other, thread))
                return harness.rewrite(path, 0, new_id)
            return write

        moved = await manager.mover.move_thread(thread, "/undo", plan)  # type: ignore[arg-type]
        assert moved.committed and proxy.router.backing_of(thread) == moved.new_backing_id
        assert seen == [manager.mover.leases.token.encode()]  # type: ignore[union-attr]
        assert await held(other, thread) is None
    assert [r.outcome for r in journal.records()] == ["committed"]


async def test_a_redis_that_does_not_answer_does_not_stop_a_move(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    harness = FakeHarness(tmp_path)
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    manager = SwapManager(settings(), journal, harness,
                          leases=MoveLeases(f"redis://127.0.0.1:{port}/0", 60))
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (proxy, client):
        thread = await start(client)
        await client.prompt(thread, "used:130000 chunks:1")
        with anyio.fail_after(20):
            await manager.wait_for_swaps(1)
        assert proxy.router.backing_of(thread) != thread
    assert [r.outcome for r in journal.records()] == ["committed"]
