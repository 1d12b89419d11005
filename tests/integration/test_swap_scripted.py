"""The swap manager on a real proxy, with the scripted agent and a fake session harness.

What the real Claude Code adds (files, rewrite, resume of a rewritten session) is covered by the
acceptance tests; these pin down the choreography: hold, move, re-apply, commit, release, and
every failure leaving the thread on its old session.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from liminal.config import GradientSettings, SwapSettings
from liminal.harness.base import Rewritten
from liminal.ingest.indexer import Indexer
from liminal.kernel.journal import SwapJournal
from liminal.kernel.replay import ReplayManager
from liminal.kernel.swap import SwapManager
from liminal.store.base import Store, StoreError
from liminal.store.sqlite import SqliteStore
from tests.support.inproc import PipeClient, proxy_in_process
from tests.support.mongo import KINDS, fresh_database
from tests.support.proxy_process import scripted_agent_argv

pytestmark = pytest.mark.anyio


class FakeHarness:
    name = "fake"
    ceiling_tokens = 167_000
    side_session_tokens = 3_000
    side_sessions = True
    prices = None

    def __init__(self, tmp: Path, *, fail: bool = False, delay: threading.Event | None = None) -> None:
        self.tmp = tmp
        self.fail = fail
        self.gate = delay
        self.rewrites: list[Path] = []
        self.tokens = 150_000
        self.after = 90_000
        self.discarded: list[str] = []
        self.adopted_ids: list[str] = []
        self.readings: list[int] = []  # what the file says at each read, before falling back to tokens
        self.reads = 0
        self.life: float | None = None  # what the CLI's records say of the cache's life
        self.looks = 0  # reads of it
        self.bands: list[int | None] = []  # the recent band each rewrite was asked for

    def locate(self, backing_id: str, cwd: str | None) -> Path | None:
        path = self.tmp / f"{backing_id}.jsonl"
        path.write_text("{}\n")
        return path

    def context_tokens(self, path: Path) -> int | None:
        self.reads += 1
        return self.readings.pop(0) if self.readings else self.tokens

    def turn_settled(self, path: Path, prompt: str | None) -> bool:
        return True

    def cache_life(self, path: Path) -> float | None:
        self.looks += 1
        return self.life

    def discard(self, rewritten: Rewritten) -> None:
        self.discarded.append(rewritten.new_id)
        rewritten.path.unlink(missing_ok=True)

    def adopted(self, rewritten: Rewritten) -> None:
        self.adopted_ids.append(rewritten.new_id)

    def prepare_load(self, backing_id: str, cwd: str | None, *, started: bool = True) -> None:
        pass

    def target_path(self, path: Path, new_id: str) -> Path:
        return path.with_name(f"{new_id}.jsonl")

    def names(self, path: Path) -> str | None:
        return path.stem

    def rewrite(self, path: Path, target_tokens: int, new_id: str, *, memos: Any = (),
                recent_tokens: int | None = None, scratchpad: str | None = None) -> Rewritten:
        self.bands.append(recent_tokens)
        if self.gate is not None:
            self.gate.wait(10)
        if self.fail:
            raise ValueError("validation refused the output")
        self.rewrites.append(path)
        self.tokens = 90_000  # what the rewritten file reports once the next turn is written
        new_path = self.target_path(path, new_id)
        new_path.write_text("{}\n")  # like the real harness: the file exists from here on
        return Rewritten(new_id, new_path, 150_000, self.after)


def agent_received(tmp_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / "agent_in.bin").read_bytes().splitlines()]


def settings(**kw: Any) -> SwapSettings:
    return SwapSettings(high_tokens=100_000, target_tokens=80_000, hold_timeout_seconds=10, **kw)


async def start(client: PipeClient) -> str:
    await client.request("initialize", {"protocolVersion": 1})
    result = (await client.request("session/new", {"cwd": "/work", "mcpServers": []}))["result"]
    return str(result["sessionId"])


async def test_a_turn_past_the_threshold_swaps_and_the_client_never_sees_it(tmp_path: Path) -> None:
    harness = FakeHarness(tmp_path)
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    manager = SwapManager(settings(), journal, harness)
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (proxy, client):
        thread = await start(client)
        await client.request("session/set_mode", {"sessionId": thread, "modeId": "plan"})
        await client.prompt(thread, "used:50000 chunks:1")
        assert manager.completed == 0
        await client.prompt(thread, "used:130000 chunks:1")
        await manager.wait_for_swaps(1)
        new_backing = proxy.router.backing_of(thread)
        assert new_backing != thread
        answer = await client.prompt(thread, "chunks:3")
        assert answer["result"]["stopReason"] == "end_turn"
    received = agent_received(tmp_path)
    methods = [(m.get("method"), (m.get("params") or {}).get("sessionId")) for m in received]
    assert ("session/resume", new_backing) in methods
    assert ("session/set_mode", new_backing) in methods
    assert ("session/close", thread) in methods
    assert methods[-1] == ("session/prompt", new_backing)
    # the client saw only its thread id, and one short notice
    everything = b"\n".join(client.lines)
    assert new_backing.encode() not in everything
    thoughts = [m for m in client.messages() if (m.get("params") or {}).get("update", {}).get("sessionUpdate")
                == "agent_thought_chunk"]
    assert len(thoughts) == 1 and "150k -> 90k" in thoughts[0]["params"]["update"]["content"]["text"]
    chunks = [m for m in client.messages() if m.get("method") == "session/update"]
    assert {m["params"]["sessionId"] for m in chunks} == {thread}
    [record] = journal.records()
    assert record.outcome == "committed" and record.new_backing_id == new_backing
    assert record.tokens_before == 150_000 and record.tokens_after == 90_000
    assert harness.adopted_ids == [new_backing]  # the CLI's name for the thread follows it


async def test_a_prompt_sent_during_the_swap_waits_and_goes_to_the_new_session(tmp_path: Path) -> None:
    gate = threading.Event()
    harness = FakeHarness(tmp_path, delay=gate)
    manager = SwapManager(settings(), SwapJournal(tmp_path / "swaps.jsonl"), harness)
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (proxy, client):
        thread = await start(client)
        await client.prompt(thread, "used:130000")
        async with anyio.create_task_group() as tg:
            answers: list[dict[str, Any]] = []

            async def prompt() -> None:
                answers.append(await client.prompt(thread, "chunks:2"))

            tg.start_soon(prompt)
            with anyio.fail_after(10):
                while proxy.router.held_count(thread) == 0:  # noqa: ASYNC110 - router state, no event
                    await anyio.sleep(0.01)
            gate.set()
        assert answers[0]["result"]["stopReason"] == "end_turn"
        new_backing = proxy.router.backing_of(thread)
    received = agent_received(tmp_path)
    prompts = [m for m in received if m.get("method") == "session/prompt"]
    assert prompts[-1]["params"]["sessionId"] == new_backing != thread
    # The old session is closed after the held prompt was let through, outside the hold.
    methods = [m.get("method") for m in received]
    assert methods.index("session/close") > received.index(prompts[-1])


async def test_a_hold_that_overflows_abandons_the_swap(tmp_path: Path) -> None:
    gate = threading.Event()
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    manager = SwapManager(settings(), journal, FakeHarness(tmp_path, delay=gate))
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (proxy, client):
        thread = await start(client)
        await client.prompt(thread, "used:130000")
        note = json.dumps({"jsonrpc": "2.0", "method": "_x/note", "params": {"sessionId": thread}})
        with anyio.fail_after(10):
            while not proxy.router.is_held(thread):  # noqa: ASYNC110 - router state, no event
                await anyio.sleep(0.01)
        # More than the router keeps for a held thread: it lets them all through, unswapped.
        await client.send((note + "\n").encode() * (proxy.router.max_held_per_thread + 1))
        answer = await client.prompt(thread, "chunks:1")
        assert answer["result"]["stopReason"] == "end_turn"
        gate.set()
        await manager.wait_for_swaps(1)
        assert proxy.router.backing_of(thread) == thread
    [record] = journal.records()
    assert record.outcome == "abandoned" and "overflowed" in record.reason
    prompts = [m for m in agent_received(tmp_path) if m.get("method") == "session/prompt"]
    assert {m["params"]["sessionId"] for m in prompts} == {thread}


@pytest.mark.parametrize("failure", ["rewrite", "session/resume", "session/set_mode"])
async def test_any_failure_leaves_the_thread_on_its_old_session(tmp_path: Path, failure: str) -> None:
    harness = FakeHarness(tmp_path, fail=failure == "rewrite")
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    manager = SwapManager(settings(), journal, harness)
    # The swap's set_mode fails, on the session it opened; the client's own was accepted.
    env = {} if failure == "rewrite" else {"AGENT_FAIL_RESUMED": failure} if failure == "session/set_mode" \
        else {"AGENT_FAIL": failure}
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager], **env) as (proxy, client):
        thread = await start(client)
        await client.request("session/set_mode", {"sessionId": thread, "modeId": "plan"})
        await client.prompt(thread, "used:130000")
        await manager.wait_for_swaps(1)
        assert proxy.router.backing_of(thread) == thread
        answer = await client.prompt(thread, "chunks:1")
        assert answer["result"]["stopReason"] == "end_turn"
    [record] = journal.records()
    assert record.outcome == "failed"
    prompts = [m for m in agent_received(tmp_path) if m.get("method") == "session/prompt"]
    assert prompts[-1]["params"]["sessionId"] == thread


async def test_without_resume_the_load_replay_is_swallowed(tmp_path: Path) -> None:
    manager = SwapManager(settings(), SwapJournal(tmp_path / "swaps.jsonl"), FakeHarness(tmp_path))
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager], AGENT_NO_RESUME="1") as (proxy, client):
        thread = await start(client)
        await client.prompt(thread, "used:130000")
        await manager.wait_for_swaps(1)
        assert proxy.router.backing_of(thread) != thread
        await client.prompt(thread, "chunks:1")
    assert not [m for m in client.messages()
                if (m.get("params") or {}).get("update", {}).get("sessionUpdate") == "user_message_chunk"]
    assert any(m.get("method") == "session/load" for m in agent_received(tmp_path))


def updates(client: PipeClient, kind: str) -> list[dict[str, Any]]:
    return [m["params"] for m in client.messages() if m.get("method") == "session/update"
            and m["params"]["update"].get("sessionUpdate") == kind]


def texts(client: PipeClient, kind: str) -> list[str]:
    return [u["update"]["content"].get("text", "") for u in updates(client, kind)]


def shared(store: Store) -> Any:
    """An opener for the replay manager that lends it the test's store (not closed after)."""

    @asynccontextmanager
    async def lend() -> AsyncIterator[Store]:
        yield store

    return lend


@pytest.fixture(params=KINDS)
async def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A store of each kind: SQLite, and a MongoDB database of its own when one is set."""
    if request.param == "sqlite":
        yield await SqliteStore.open(tmp_path / "liminal.db")
        return
    from liminal.store.mongo import MongoStore

    async with fresh_database() as url:
        yield await MongoStore.open(url)


async def test_after_a_restart_the_thread_resumes_on_its_last_committed_session(
        tmp_path: Path, any_store: Store) -> None:
    store = any_store
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    manager = SwapManager(settings(), journal, FakeHarness(tmp_path))
    indexer = Indexer(store, tmp_path / "spool")
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [indexer, manager]) as (proxy, client):
        thread = await start(client)
        await client.prompt(thread, "fix the flux capacitor chunks:2 used:1000")
        await client.prompt(thread, "used:130000")
        await manager.wait_for_swaps(1)
        backing = proxy.router.backing_of(thread)
        await client.prompt(thread, "after the swap chunks:1 used:1000")
    [committed] = journal.records()
    assert committed.reason == "context 130k tokens >= 100k"  # why it started (high_tokens)
    (tmp_path / "agent_in.bin").unlink()
    harness = FakeHarness(tmp_path)
    harness.tokens = 90_000  # the rewrite's size: under the trigger, the load swaps nothing
    manager = SwapManager(settings(), journal, harness)
    replays = ReplayManager(shared(store), timeout=60)  # generous: a loaded CI machine is slow
    indexer = Indexer(store, tmp_path / "spool")
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [indexer, manager, replays]) as (proxy, client):
        await client.request("initialize", {"protocolVersion": 1})
        loaded = await client.request("session/load", {"sessionId": thread, "cwd": "/work", "mcpServers": []})
        assert loaded["result"] == {}
        # The history comes from the store: every turn as the user typed and saw it, before the
        # answer to the load; nothing of the compressed session's replay but its current state.
        assert texts(client, "user_message_chunk") == [
            "fix the flux capacitor chunks:2 used:1000", "used:130000", "after the swap chunks:1 used:1000"]
        assert texts(client, "agent_message_chunk") == ["chunk 0 é中chunk 1 é中", "chunk 0 é中"]
        assert updates(client, "available_commands_update")
        assert b"[compressed]" not in b"\n".join(client.lines)
        assert replays.finished == [(thread, "store")]
        await client.prompt(thread, "chunks:1 used:1000")
        # (That session/list shows the thread once is the command center's: every liminal has
        # one, and it answers session/list itself. This proxy has none; the test of the listing
        # is tests/unit/test_threadlist.py, and through the real CLIs tests/acceptance/
        # test_one_thread.py and test_codex.py.)
    assert {m["params"]["sessionId"] for m in client.messages() if "params" in m} == {thread}
    loads = [m for m in agent_received(tmp_path) if m.get("method") in ("session/load", "session/prompt")]
    assert {m["params"]["sessionId"] for m in loads} == {backing}
    # Neither replay is stored (the compressed session's, liminal's own from the store): the
    # store had the thread's history. The load is in its frames; the history is unchanged by it.
    messages = await store.messages(thread)
    assert [m.text for m in messages if m.kind == "user" and not m.replayed] == [
        "fix the flux capacitor chunks:2 used:1000", "used:130000", "after the swap chunks:1 used:1000", "chunks:1 used:1000"]
    assert not [m for m in messages if m.replayed]
    frames = await store.frames(thread_id=thread)
    [load] = [f for f in frames if f.method == "session/load" and f.direction == "c2a"]
    [answer] = [f for f in frames if f.method == "session/load" and f.direction == "a2c"]
    during = [f.raw for f in frames if f.connection_id == load.connection_id and load.seq < f.seq < answer.seq]
    assert during and all(b'"available_commands_update"' in raw for raw in during), during  # the session's state
    await store.aclose()


async def test_a_moved_thread_loads_with_the_agents_replay_when_the_store_cannot_help(tmp_path: Path) -> None:
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    manager = SwapManager(settings(), journal, FakeHarness(tmp_path))
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (_proxy, client):
        thread = await start(client)
        await client.prompt(thread, "used:130000")
        await manager.wait_for_swaps(1)

    @asynccontextmanager
    async def unavailable() -> AsyncIterator[Store]:
        raise StoreError("no store here")
        yield  # pragma: no cover

    manager = SwapManager(settings(), journal, FakeHarness(tmp_path))
    replays = ReplayManager(unavailable)
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager, replays]) as (_proxy, client):
        await client.request("initialize", {"protocolVersion": 1})
        loaded = await client.request("session/load", {"sessionId": thread, "cwd": "/work", "mcpServers": []})
        assert loaded["result"] == {}
        assert texts(client, "user_message_chunk") == ["[compressed] replayed preamble", "used:130000"]
        assert replays.finished == [(thread, "agent")]
        await client.prompt(thread, "chunks:1")
    assert {m["params"]["sessionId"] for m in client.messages() if "params" in m} == {thread}


async def test_below_the_threshold_nothing_happens(tmp_path: Path) -> None:
    manager = SwapManager(settings(), SwapJournal(tmp_path / "swaps.jsonl"), FakeHarness(tmp_path))
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (proxy, client):
        thread = await start(client)
        for _ in range(3):
            await client.prompt(thread, "used:1000")
        assert proxy.router.backing_of(thread) == thread
    assert manager.completed == 0


async def test_a_context_size_no_window_holds_is_not_taken_for_one(tmp_path: Path) -> None:
    """One absurd ``usage_update`` (used far past the window the same update names) is not a
    context: taken for one, it cost a swap at once, and as the biggest turn ever seen it pushed
    the thread's trigger down to the target for good, a swap (a prompt-cache rebuild) at every
    turn from then on."""
    harness = FakeHarness(tmp_path)
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    manager = SwapManager(settings(), journal, harness)
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (proxy, client):
        thread = await start(client)
        await client.prompt(thread, "used:50000 chunks:1")
        await client.prompt(thread, "used:10000000000000 chunks:1")  # size 200,000
        for used in (52_000, 54_000):
            await client.prompt(thread, f"used:{used} chunks:1")
        assert proxy.router.backing_of(thread) == thread
        assert manager.threads[thread].pace.biggest_turn < 200_000
    assert journal.records() == [] and manager.completed == 0


async def test_a_rewrite_that_stays_above_the_trigger_is_not_worth_a_swap(tmp_path: Path) -> None:
    harness = FakeHarness(tmp_path)
    harness.after = 120_000  # the recent band alone is past high_tokens
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    manager = SwapManager(settings(), journal, harness)
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (proxy, client):
        thread = await start(client)
        await client.prompt(thread, "used:130000")
        await manager.wait_for_swaps(1)
        for _ in range(2):  # backed off: the next turn ends do not try again
            await client.prompt(thread, "used:130000")
        assert proxy.router.backing_of(thread) == thread
    [record] = journal.records()
    assert record.outcome == "skipped" and record.tokens_after == 120_000
    assert len(harness.discarded) == 1 and harness.adopted_ids == []


async def test_a_swap_that_lands_just_under_its_trigger_backs_off_instead_of_repeating(tmp_path: Path) -> None:
    """Issue 20: every rewrite landed just under the trigger (the floor: the CLI's prompt, the
    preamble, the last turn), so each turn passed it again and the thread swapped 3 times in 4
    turns, a prompt-cache rebuild each. A rewrite that leaves less than half the leeway
    (high 100k - target 80k) under the trigger is skipped, and the trigger backs off a whole
    leeway above it; the next swap lands with room to spare."""
    harness = FakeHarness(tmp_path)
    harness.after = 95_000  # 5k under the trigger: the next turn would pass it again
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    manager = SwapManager(settings(), journal, harness)
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (proxy, client):
        thread = await start(client)
        for used in (101_000, 102_000, 103_000, 104_000, 105_000, 106_000):
            await client.prompt(thread, f"used:{used}")
            await manager.wait_for_swaps(1)
        assert proxy.router.backing_of(thread) == thread
        state = manager.threads[thread]
        assert manager.policy.trigger(state.pace) == 115_000  # what the rewrite left, and the leeway
        await client.prompt(thread, "used:116000")  # grown a whole leeway past it: worth a swap
        await manager.wait_for_swaps(2)
        assert proxy.router.backing_of(thread) != thread
        assert manager.policy.trigger(state.pace) == 105_000  # half the leeway above the landing
    assert [r.outcome for r in journal.records()] == ["skipped", "committed"], journal.records()
    skipped = journal.records()[0]
    assert "less than half the leeway" in skipped.reason and skipped.tokens_after == 95_000
    assert "backed off from 100k" in journal.records()[1].reason


async def test_each_swap_records_the_model_calls_since_the_move_before(tmp_path: Path) -> None:
    """What a swap's payback is measured against (``policy.measure_payback``): the model calls
    from the move before it, as the thread model counted them (a prompt is one; a round of tool
    results one more); the first swap this liminal makes of a thread has none to count from."""
    harness = FakeHarness(tmp_path)
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    manager = SwapManager(settings(), journal, harness)
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (_proxy, client):
        thread = await start(client)
        await client.prompt(thread, "used:130000")
        await manager.wait_for_swaps(1)
        for used in (92_000, 95_000, 130_000):
            await client.prompt(thread, f"used:{used}")
        await manager.wait_for_swaps(2)
    first, second = journal.records()
    assert first.cost is not None and first.cost["calls_since_move"] is None
    assert second.cost is not None and second.cost["calls_since_move"] == 3


async def test_without_usage_the_session_file_decides(tmp_path: Path) -> None:
    # The older Claude adapter sends no usage_update: the context comes from the file. Far below
    # the trigger the check runs unheld; once near it, turn ends are held for the check.
    harness = FakeHarness(tmp_path)
    harness.readings = [20_000, 150_000]
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    manager = SwapManager(settings(), journal, harness)
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (proxy, client):
        thread = await start(client)
        # A turn end that comes while the last one's look is still under way is not considered
        # (its look waits a moment for the turn on disk): a few more turns than the fewest.
        for n in range(8):
            await client.prompt(thread, f"turn {n}")
            if manager.completed:
                break
        # Bounded: a swap that never comes fails here with what was read, not at the suite's
        # timeout (it hung once in a full run on this branch, 1,200 s).
        with anyio.fail_after(60):
            await manager.wait_for_swaps(1)
        assert proxy.router.backing_of(thread) != thread, (harness.reads, manager.threads[thread])
        await client.prompt(thread, "after")
    assert [r.outcome for r in journal.records()] == ["committed"]
    assert manager.threads[thread].file_tokens is not None


class WrittenAfterAnswering(FakeHarness):
    """Claude Code 2.1.44: a new session's file appears when its first turn is written, and each
    turn is written after the answer (here: the third look for it finds it on disk); the file
    says 20,000 tokens and 1,000 more for each turn written."""

    def __init__(self, tmp: Path) -> None:
        super().__init__(tmp)
        self.absent = 2  # looks before the file appears
        self.looks_for: dict[str | None, int] = {}
        self.written: set[str | None] = set()

    def locate(self, backing_id: str, cwd: str | None) -> Path | None:
        if self.absent:
            self.absent -= 1
            return None
        return super().locate(backing_id, cwd)

    def turn_settled(self, path: Path, prompt: str | None) -> bool:
        self.looks_for[prompt] = self.looks_for.get(prompt, 0) + 1
        if self.looks_for[prompt] >= 3:
            self.written.add(prompt)
        return prompt in self.written

    def context_tokens(self, path: Path) -> int | None:
        self.reads += 1
        return 20_000 + 1_000 * len(self.written)


async def test_without_usage_each_turn_end_reads_the_size_with_that_turn(tmp_path: Path) -> None:
    """Before, the first turn end found no file and backed off two turn ends (the size unknown
    three turns, so no summary was asked), and far below the trigger the file was read before the
    turn was on it: every size a turn late. The turn is waited for, held or not."""
    harness = WrittenAfterAnswering(tmp_path)
    manager = SwapManager(settings(), SwapJournal(tmp_path / "swaps.jsonl"), harness)
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (_proxy, client):
        thread = await start(client)
        for n in range(3):
            await client.prompt(thread, f"turn {n}")
            with anyio.fail_after(20):
                while harness.reads < n + 1 or manager.threads[thread].swapping:  # noqa: ASYNC110 - no event
                    await anyio.sleep(0.01)
            assert manager.threads[thread].file_tokens == 21_000 + 1_000 * n
    assert manager.threads[thread].swap.failures == 0 and not journal_lines(tmp_path)


def journal_lines(tmp_path: Path) -> list[str]:
    path = tmp_path / "swaps.jsonl"
    return path.read_text().splitlines() if path.exists() else []


async def test_records_that_never_say_the_cache_life_are_read_for_it_a_few_times_only(tmp_path: Path) -> None:
    """An agent with no usage has its session file read at every turn end; Claude Code 2.1.44's
    records never say the cache's life, and each look for it scanned the file's tail again, at
    every turn end (and on a held one, while the person waited). Now CACHE_LOOKS reads at most."""
    from liminal.kernel.swap import CACHE_LOOKS

    harness = FakeHarness(tmp_path)
    harness.tokens = 20_000  # far below the trigger: the turn ends go unheld
    looked: list[Path] = []

    def says_nothing(path: Path) -> float | None:
        looked.append(path)
        return None

    harness.cache_life = says_nothing  # type: ignore[method-assign]
    manager = SwapManager(settings(), SwapJournal(tmp_path / "swaps.jsonl"), harness)
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (_proxy, client):
        thread = await start(client)
        for n in range(8):
            await client.prompt(thread, f"turn {n}")
            with anyio.fail_after(20):
                while harness.reads < n + 1:  # noqa: ASYNC110 - the turn end's read, no event
                    await anyio.sleep(0.01)
    assert len(looked) == CACHE_LOOKS and manager.threads[thread].pace.cache_life is None


async def test_the_swap_notice_arrives_inside_the_next_turn_never_after_an_answer(tmp_path: Path) -> None:
    # Headless clients print a turn's updates until its answer: a notice sent between turns was
    # glued to the previous answer.
    manager = SwapManager(settings(), SwapJournal(tmp_path / "swaps.jsonl"), FakeHarness(tmp_path))
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (_proxy, client):
        thread = await start(client)
        await client.prompt(thread, "used:130000")
        await manager.wait_for_swaps(1)
        assert not [line for line in client.lines if b"agent_thought_chunk" in line]
        answer = await client.prompt(thread, "chunks:2")
        assert answer["result"]["stopReason"] == "end_turn"
    lines = client.lines
    notice = next(n for n, line in enumerate(lines) if b"Context optimised by liminal" in line)
    answered = next(n for n, line in enumerate(lines) if json.loads(line).get("id") == answer["id"])
    previous = [n for n, line in enumerate(lines) if b'"stopReason"' in line and n < answered]
    assert previous and previous[-1] < notice < answered


async def test_a_client_that_shows_compactions_gets_the_swap_as_one(tmp_path: Path) -> None:
    # ACP's session.compaction capability: the client renders compaction_update entities.
    manager = SwapManager(settings(), SwapJournal(tmp_path / "swaps.jsonl"), FakeHarness(tmp_path))
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (_proxy, client):
        await client.request("initialize", {"protocolVersion": 1,
                                            "clientCapabilities": {"session": {"compaction": {}}}})
        thread = (await client.request("session/new", {"cwd": "/work", "mcpServers": []}))["result"]["sessionId"]
        await client.prompt(thread, "used:130000")
        await manager.wait_for_swaps(1)
        await client.prompt(thread, "chunks:1")
    updates = [m["params"]["update"] for m in client.messages() if m.get("method") == "session/update"]
    compactions = [u for u in updates if u["sessionUpdate"] == "compaction_update"]
    assert [u["status"] for u in compactions] == ["in_progress", "completed"]
    assert compactions[0]["compactionId"] == compactions[1]["compactionId"]
    assert "150k -> 90k" in compactions[1]["summary"][0]["text"]
    assert not [u for u in updates if u["sessionUpdate"] == "agent_thought_chunk"]


def cost_policy(tmp_path: Path, cache_life: float) -> tuple[SwapManager, SwapJournal]:
    """The default (cost) policy over a harness whose rewrites leave 36k tokens, without the
    model's summaries: this manager makes none (only ``liminal.wiring`` gives it a summarizer),
    so none is priced into its trigger."""
    harness = FakeHarness(tmp_path)
    harness.after = 36_000
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    settings = SwapSettings(cache_life_seconds=cache_life, hold_timeout_seconds=10, summaries=False)
    return SwapManager(settings, journal, harness), journal


async def test_a_thread_idle_past_the_cache_life_swaps_before_its_next_prompt(tmp_path: Path) -> None:
    """Default policy: below its trigger a busy thread waits; once idle past the prompt cache's
    life (its next call rewrites the whole prompt anyway) it is swapped, nobody waiting."""
    manager, journal = cost_policy(tmp_path, cache_life=0.3)
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (proxy, client):
        thread = await start(client)
        # 6k a turn from 20k: the trigger is near 125k, an idle swap is worth it from about 85k,
        # which only the last turn reaches.
        for used in range(20_000, 92_000, 6_000):
            await client.prompt(thread, f"used:{used} chunks:1")
        with anyio.fail_after(20):
            await manager.wait_for_swaps(1)
        new_backing = proxy.router.backing_of(thread)
        assert new_backing != thread
        answer = await client.prompt(thread, "chunks:1")
        assert answer["result"]["stopReason"] == "end_turn"
    [record] = journal.records()
    assert record.outcome == "committed" and "idle past the cache's life" in record.reason
    assert record.cost is not None and record.cost["idle"] is True
    assert record.cost["context"] == 86_000 and record.cost["target"] == 36_000  # none earlier
    assert record.cost["rebuild"] < 0  # cheaper than the rebuild the idle thread faced anyway
    methods = [(m.get("method"), (m.get("params") or {}).get("sessionId")) for m in agent_received(tmp_path)]
    assert methods[-1] == ("session/prompt", new_backing)


async def grow_until_a_swap(manager: SwapManager, client: PipeClient, thread: str, used: int) -> None:
    """6k a turn from ``used`` until the policy swaps (and that swap has finished)."""
    while manager.completed == 0 and used < 160_000:
        await client.prompt(thread, f"used:{used} chunks:1")
        used += 6_000
    with anyio.fail_after(20):
        await manager.wait_for_swaps(1)


async def test_the_default_policy_swaps_at_its_trigger_and_says_what_it_costs(tmp_path: Path) -> None:
    manager, journal = cost_policy(tmp_path, cache_life=0)
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (_proxy, client):
        thread = await start(client)
        await grow_until_a_swap(manager, client, thread, 20_000)
    record = journal.records()[0]
    assert record.outcome == "committed" and "pays back" in record.reason, record
    assert record.cost is not None and not record.cost["idle"]
    trigger = record.cost["trigger"]
    assert record.cost["context"] >= trigger > 90_000
    assert record.cost["payback_calls"] < record.cost["calls_to_next"]


async def wait_for_cache_life(manager: SwapManager, thread: str) -> None:
    """Until the swap manager has read the thread's cache life from the CLI's records (a look
    beside the turns)."""
    with anyio.fail_after(20):
        while manager.threads[thread].pace.cache_life is None:  # noqa: ASYNC110 - thread state, no event
            await anyio.sleep(0.01)


async def wait_for_looks(harness: FakeHarness) -> None:
    """Until the swap manager has read the thread's records for its cache life once."""
    with anyio.fail_after(20):
        while harness.looks == 0:  # noqa: ASYNC110 - a count in a worker thread, no event
            await anyio.sleep(0.01)


async def test_a_thread_whose_cache_lives_an_hour_swaps_to_its_band_priced_at_its_writes(tmp_path: Path) -> None:
    """The CLI's records say the thread's prompt cache lives an hour (Claude Code on a
    subscription): its writes cost 2x, so the swap keeps gradient.long_cache_recent_tokens whole
    and the decision is priced at that cache. Before, every thread was priced at 5 minutes and
    kept 20k (0.857 of auto-compact at the 1-hour cache: docs/gradient.md)."""
    manager, journal = cost_policy(tmp_path, cache_life=0)
    harness = manager.harness
    assert isinstance(harness, FakeHarness)
    harness.life = 3600.0
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (_proxy, client):
        thread = await start(client)
        await client.prompt(thread, "used:20000 chunks:1")
        await wait_for_cache_life(manager, thread)
        await grow_until_a_swap(manager, client, thread, 26_000)
    record = journal.records()[0]
    assert record.outcome == "committed", record
    assert record.cost is not None and record.cost["cache_life"] == 3600.0
    # (A prompt sent as the first swap finished may start a second: under load, CI's did.)
    assert harness.bands and set(harness.bands) == {GradientSettings().long_cache_recent_tokens}


@pytest.mark.parametrize("life", [None, 3600.0])
async def test_an_idle_swap_waits_for_the_threads_own_cache_life(tmp_path: Path, life: float | None) -> None:
    """swap.cache_life_seconds says 5 minutes (here 0.3 s); a thread whose records say its cache
    lives an hour still has it after that, and a swap then would throw it away: no idle swap
    before its own life is out. Records that say nothing keep the setting's."""
    manager, _journal = cost_policy(tmp_path, cache_life=0.3)
    harness = manager.harness
    assert isinstance(harness, FakeHarness)
    harness.life = life
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (_proxy, client):
        thread = await start(client)
        for used in range(20_000, 92_000, 6_000):
            await client.prompt(thread, f"used:{used} chunks:1")
        if life is None:
            with anyio.fail_after(20):  # the setting's life: swapped while idle
                await manager.wait_for_swaps(1)
            return
        await wait_for_cache_life(manager, thread)
        state = manager.threads[thread]
        assert state.idle_since is not None
        manager._idle_check(state.idle_since + 60.0)  # a minute idle: the hour's cache is still there
        assert not state.swapping and manager.completed == 0


async def test_a_session_file_that_says_nothing_readable_leaves_the_swaps_running(tmp_path: Path) -> None:
    """The look for the cache's life runs beside the swaps: what a bad file makes the harness
    raise there (a deep-nested line's RecursionError, a path that is no regular file) is a look
    that says nothing. Before, it failed the swap manager's run, cancelling a swap of another
    thread under way, and four such files switched swaps off for the process."""
    manager, _journal = cost_policy(tmp_path, cache_life=0)
    harness = manager.harness
    assert isinstance(harness, FakeHarness)
    looked = threading.Event()

    def unreadable(path: Path) -> float | None:
        looked.set()
        raise RecursionError("maximum recursion depth exceeded while decoding a JSON object")

    harness.cache_life = unreadable  # type: ignore[method-assign]
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (proxy, client):
        thread = await start(client)
        await client.prompt(thread, "used:20000 chunks:1")
        assert await anyio.to_thread.run_sync(looked.wait, 20)
        await client.prompt(thread, "used:26000 chunks:1")  # the look is long done by its answer
        [member] = [m for m in proxy.supervisor.members if m.component is manager]
        assert member.crashes == 0 and manager.threads[thread].pace.cache_life is None


async def test_a_swap_decided_before_the_cache_life_was_known_is_decided_again_at_it(tmp_path: Path) -> None:
    """A turn end past the trigger, decided at the 5-minute cache; the swap's own read of the
    records says an hour: the swap is priced (and journaled) at the hour, not at the life it
    was decided at."""
    harness = FakeHarness(tmp_path)
    harness.after = 25_000
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    manager = SwapManager(SwapSettings(cache_life_seconds=0, hold_timeout_seconds=10, summaries=False),
                          journal, harness)
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (_proxy, client):
        thread = await start(client)
        await client.prompt(thread, "used:20000 chunks:1")
        await wait_for_looks(harness)  # they said nothing: priced at the 5-minute cache
        harness.life = 3600.0
        await client.prompt(thread, "used:100000 chunks:1")
        with anyio.fail_after(20):
            await manager.wait_for_swaps(1)
    [record] = journal.records()
    assert record.outcome == "committed" and record.cost is not None, record
    assert record.cost["cache_life"] == 3600.0 and harness.bands == [GradientSettings().long_cache_recent_tokens]


async def test_an_idle_swap_dropped_for_a_longer_cache_keeps_the_idle_spell(tmp_path: Path) -> None:
    """An idle swap decided at the setting's life, whose session file then says the cache lives
    an hour, is dropped (the cache is still there), and the thread stays idle from when it was:
    once the hour is out, its idle swap comes. Before, the drop spent the spell, and no idle swap
    came until the person prompted again."""
    manager, _journal = cost_policy(tmp_path, cache_life=0.3)
    harness = manager.harness
    assert isinstance(harness, FakeHarness)
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (_proxy, client):
        thread = await start(client)
        state = manager.threads[thread]
        for used in range(20_000, 92_000, 6_000):
            await client.prompt(thread, f"used:{used} chunks:1")
        assert state.pace.cache_life is None and state.idle_since is not None
        began = state.idle_since
        harness.life = 3600.0  # the records say the hour now (its first write landed)
        manager._idle_check(began + 1.0)  # idle past the setting's 0.3 s: a swap is queued
        assert state.swapping
        with anyio.fail_after(20):
            while state.swapping:  # noqa: ASYNC110 - thread state, no event
                await anyio.sleep(0.01)
        assert manager.completed == 0 and state.pace.cache_life == 3600.0  # dropped
        assert state.idle_since == began  # still idle since then
        manager._idle_check(began + 3601.0)  # the hour is out
        assert state.swapping or manager.completed == 1


@pytest.mark.parametrize("asked", [False, True])
async def test_a_swap_prices_its_cycles_summary_only_if_one_was_asked_for(tmp_path: Path, asked: bool) -> None:
    """With swap.summaries on, the policy prices the model's summary in every cycle; a thread
    whose context jumped past the trigger before one was due had none, and its record (liminal
    swaps' SUMMARY, the dashboard's saving) said 33k paid all the same (codex-agent, found trying
    the default)."""
    harness = FakeHarness(tmp_path)
    harness.after = 36_000
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    manager = SwapManager(SwapSettings(summaries=True, cache_life_seconds=0, hold_timeout_seconds=10),
                          journal, harness)
    manager.summary_asked = lambda _thread, _backing: asked
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (_proxy, client):
        thread = await start(client)
        await client.prompt(thread, "used:20000 chunks:1")
        await client.prompt(thread, "used:150000 chunks:1")  # one jump past the trigger
        with anyio.fail_after(20):
            await manager.wait_for_swaps(1)
    [record] = journal.records()
    assert record.outcome == "committed" and record.cost is not None
    assert (record.cost["summary"] > 0) is asked


async def test_each_move_closes_the_session_it_left_when_another_move_follows_at_once(tmp_path: Path) -> None:
    # A command's move of another thread in the quiet moment after a swap (where the recycle
    # runs): each move must close the session it left, or one stays open (a CLI process) for
    # good on an agent that can close sessions, where the recycle never runs.
    harness = FakeHarness(tmp_path)
    manager = SwapManager(settings(), SwapJournal(tmp_path / "swaps.jsonl"), harness)
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (_, client):
        one = await start(client)
        two = str((await client.request("session/new", {"cwd": "/work", "mcpServers": []}))["result"]["sessionId"])

        async def after_turn(thread_id: str) -> None:
            if thread_id == one:
                await manager.mover.move_thread(two, "a command's move",
                                                lambda path: lambda new_id: harness.rewrite(path, 0, new_id))

        manager.model.on_quiet.append(after_turn)  # where the recycle subscribes
        await client.prompt(one, "used:130000")
        with anyio.fail_after(10):
            await manager.wait_for_swaps(1)
    closes = [m["params"]["sessionId"] for m in agent_received(tmp_path) if m.get("method") == "session/close"]
    assert sorted(closes) == sorted([one, two])


@pytest.mark.parametrize("failure", ["an answer fails", "switched off"])
async def test_a_moved_threads_load_is_answered_whatever_happens_to_the_replay_manager(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    # The load's answer is parked for the replay manager: if it fails, or the supervisor has
    # switched it off, the client must still get the load answered (with the agent's replay).
    from liminal import supervise

    journal = SwapJournal(tmp_path / "swaps.jsonl")
    manager = SwapManager(settings(), journal, FakeHarness(tmp_path))
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (_proxy, client):
        thread = await start(client)
        await client.prompt(thread, "used:130000")
        await manager.wait_for_swaps(1)

    async def broken(*_: Any) -> None:
        raise RuntimeError("a bug in the replay")

    class Unreadable:
        def __aiter__(self) -> Any:
            raise RuntimeError("a bug in the replay's queue")

    monkeypatch.setattr(ReplayManager, "_answer", broken)
    manager = SwapManager(settings(), journal, FakeHarness(tmp_path))
    replays = ReplayManager(shared(None))  # type: ignore[arg-type]
    if failure == "switched off":  # its run fails four times, and is switched off
        monkeypatch.setattr(supervise, "RESTART_PAUSE_SECONDS", (0.01, 0.01, 0.01))
        replays._receive = Unreadable()  # type: ignore[assignment]
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager, replays]) as (proxy, client):
        await client.request("initialize", {"protocolVersion": 1})
        if failure == "switched off":  # wait for it: failed four times
            [member] = [m for m in proxy.supervisor.members if m.component is replays]
            with anyio.fail_after(10):
                while not member.off:  # noqa: ASYNC110 - the supervisor's state
                    await anyio.sleep(0.01)
        with anyio.fail_after(10):
            loaded = await client.request("session/load", {"sessionId": thread, "cwd": "/work", "mcpServers": []})
        assert loaded["result"] == {}
        assert texts(client, "user_message_chunk") == ["[compressed] replayed preamble", "used:130000"]


async def test_a_mode_or_option_the_agent_refused_is_not_carried_to_the_next_session(tmp_path: Path) -> None:
    # The thread's mode and options are re-applied to every session it moves to: only those
    # the agent accepted. One it refused, re-applied, failed every later swap (and recycle).
    manager = SwapManager(settings(), SwapJournal(tmp_path / "swaps.jsonl"), FakeHarness(tmp_path))
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (proxy, client):
        thread = await start(client)
        assert "result" in await client.request("session/set_mode", {"sessionId": thread, "modeId": "plan"})
        refused = await client.request("session/set_mode", {"sessionId": thread, "modeId": "no-such-mode"})
        assert "error" in refused
        refused = await client.request("session/set_config_option",
                                       {"sessionId": thread, "configId": "model", "value": "no-such-model"})
        assert "error" in refused
        await client.prompt(thread, "used:130000")
        await manager.wait_for_swaps(1)
        assert proxy.router.backing_of(thread) != thread
    carried = [m["params"] for m in agent_received(tmp_path)
               if m.get("method") in ("session/set_mode", "session/set_config_option")
               and m["params"]["sessionId"] != thread]
    assert carried == [{"sessionId": proxy.router.backing_of(thread), "modeId": "plan"}]
