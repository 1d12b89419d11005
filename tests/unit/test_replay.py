"""The history a moved thread's load replays: chosen from the store, shaped as ACP updates."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import orjson
import pytest
from acp.schema import SessionNotification

from liminal.acp.router import ReplayRequest, Router
from liminal.kernel.replay import ReplayManager, agent_last_prompt, history_updates
from liminal.store.records import MessageRecord, conversation
from tests.support.fakeport import FakePort

THREAD = "11111111-1111-4111-8111-111111111111"
BACKING = "22222222-2222-4222-8222-222222222222"


def msg(frame: str, what: str, text: str = "", *, replayed: bool = False, t: float = 0.0,
        **data: Any) -> MessageRecord:
    return MessageRecord(id=frame, thread_id=THREAD, turn_id=None, time=t, order=f"{t:017.6f}|{frame}",
                         kind=what, text=text, data=data, replayed=replayed,
                         tool_call_id=data.get("toolCallId"), status=data.get("status"))


# ------------------------------------------------------------------- what is shown

def test_a_thread_recorded_live_is_its_live_messages() -> None:
    live = [msg("c1:1", "user", "hi", t=1), msg("c1:2", "agent", "hello", t=2)]
    replays = [msg("c2:5", "user", "hi", replayed=True, t=10), msg("c2:6", "user", "[summary]", replayed=True, t=11)]
    assert conversation([*live, *replays]) == live


def test_a_thread_first_seen_through_a_load_keeps_its_past_before_what_liminal_recorded() -> None:
    past = [msg("c1:3", "user", "before liminal", replayed=True, t=1), msg("c1:4", "agent", "yes", replayed=True, t=2)]
    again = [msg("c2:3", "user", "before liminal", replayed=True, t=3)]  # loaded twice before a prompt
    live = [msg("c2:9", "user", "now", t=4)]
    later = [msg("c3:3", "user", "before liminal", replayed=True, t=5)]
    assert conversation([*past, *again, *live, *later]) == [*past, *live]
    assert conversation([*past, *again]) == past  # only replays: the first load's


# ------------------------------------------------------------------ as ACP updates

def test_messages_become_updates_the_acp_schema_accepts() -> None:
    prompt = [{"type": "text", "text": "fix it"}, {"type": "resource_link", "uri": "file:///a.py", "name": "a.py"}]
    messages = [
        msg("c:1", "user", "fix it\n[a.py]", prompt=prompt),
        msg("c:2", "user", "replayed prompt", replayed=True),
        msg("c:3", "thought", "hmm"),
        msg("c:4", "agent", "On it.", messageId="m1"),
        msg("c:5", "tool_call", "Read a.py", toolCallId="t1", title="Read a.py", kind="read", status="completed",
            rawInput={"path": "/a.py"}, content=[{"type": "content", "content": {"type": "text", "text": "x = 1"}},
                                                 {"type": "terminal", "terminalId": "gone"}],
            locations=[{"path": "/a.py"}], _meta={"claudeCode": {"toolName": "Read"}}),
        msg("c:6", "plan", "step", entries=[{"content": "step", "priority": "high", "status": "completed"}]),
        msg("c:7", "usage", used=1, size=2),
        msg("c:8", "turn_end"),
        msg("c:9", "agent", ""),
    ]
    updates = history_updates(messages)
    assert [u["sessionUpdate"] for u in updates] == [
        "user_message_chunk", "user_message_chunk", "user_message_chunk", "agent_thought_chunk",
        "agent_message_chunk", "tool_call", "plan"]
    assert [u["content"] for u in updates[:3]] == [*prompt, {"type": "text", "text": "replayed prompt"}]
    tool = updates[5]
    assert tool["toolCallId"] == "t1" and tool["status"] == "completed"
    assert tool["content"] == [{"type": "content", "content": {"type": "text", "text": "x = 1"}}]
    assert updates[4]["messageId"] == "m1"
    for update in updates:
        parsed = SessionNotification.model_validate({"sessionId": THREAD, "update": update})
        assert parsed.update.session_update == update["sessionUpdate"]


def line(kind: str, text: str = "") -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": BACKING, "update": {
        "sessionUpdate": kind, "content": {"type": "text", "text": text}}}})


def test_the_agents_last_prompt_is_its_last_user_message_joined() -> None:
    lines = [line("user_message_chunk", "[summary]"), line("agent_message_chunk", "ok"),
             line("user_message_chunk", "last "), line("user_message_chunk", "one"), line("agent_message_chunk", "a"),
             b"not json"]
    assert agent_last_prompt(lines) == "last one"
    assert agent_last_prompt([line("agent_message_chunk", "a")]) is None
    # A user message nothing of the agent's follows proves no turn: Gemini CLI answers a load
    # after the first line of its replay, its own context as a user message.
    assert agent_last_prompt([line("user_message_chunk", "<session_context>...")]) is None
    assert agent_last_prompt(lines[:3]) == "[summary]"


# ------------------------------------------------------------------- the component

class FakeStore:
    def __init__(self, *versions: list[MessageRecord], hang: bool = False) -> None:
        self.versions = list(versions)
        self.hang = hang
        self.reads = 0

    async def messages(self, thread_id: str, kind: str | None = None) -> list[MessageRecord]:
        self.reads += 1
        if self.hang:
            await anyio.Event().wait()
        return self.versions.pop(0) if len(self.versions) > 1 else self.versions[0]


def lend(store: FakeStore) -> Any:
    @asynccontextmanager
    async def opener() -> AsyncIterator[Any]:
        yield store

    return opener


def request(*agent_lines: bytes) -> ReplayRequest:
    return ReplayRequest(1, THREAD, BACKING, tuple(agent_lines))


@pytest.mark.anyio
async def test_the_store_is_read_again_until_it_shows_the_agents_last_turn() -> None:
    older = [msg("c:1", "user", "first")]
    newer = [*older, msg("c:2", "user", "second")]
    store = FakeStore(older, older, newer)
    manager = ReplayManager(lend(store))
    history = await manager.history(request(line("user_message_chunk", "[summary]"), line("user_message_chunk", "second"),
                                            line("agent_message_chunk", "its answer")))
    assert history is not None and [u["content"]["text"] for u in history] == ["first", "second"]
    assert store.reads == 3
    await manager.aclose()


@pytest.mark.anyio
async def test_nothing_stored_means_the_agents_replay() -> None:
    manager = ReplayManager(lend(FakeStore([])))
    assert await manager.history(request()) is None
    await manager.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("store", [FakeStore([], hang=True), None], ids=["hangs", "unavailable"])
async def test_a_store_that_hangs_or_fails_falls_back_to_the_agents_replay(store: FakeStore | None) -> None:
    @asynccontextmanager
    async def broken() -> AsyncIterator[Any]:
        raise OSError("no store")
        yield  # pragma: no cover

    manager = ReplayManager(lend(store) if store else broken, timeout=0.2)
    router = Router(max_frame_bytes=1 << 20, replay_from_store=True)
    router.bind(THREAD, BACKING)
    port = FakePort(router)
    router.receive_from_client(b'{"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":"'
                               + THREAD.encode() + b'","cwd":"/","mcpServers":[]}}\n', 0)
    router.receive_from_agent(line("user_message_chunk", "[summary]") + b"\n"
                              + b'{"jsonrpc":"2.0","id":1,"result":{}}\n', 0)
    [wanted] = router.take().replays
    async with anyio.create_task_group() as tg:
        tg.start_soon(manager.run, port)
        manager.replay_requested(wanted)
        with anyio.fail_after(5):
            await manager.wait_for_replays(1)
        tg.cancel_scope.cancel()
    await manager.aclose()
    assert manager.finished == [(THREAD, "agent")]
    sent = port.client_lines
    assert b"[summary]" in sent[0] and THREAD.encode() in sent[0]
    assert sent[1] == b'{"jsonrpc":"2.0","id":1,"result":{}}'


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
