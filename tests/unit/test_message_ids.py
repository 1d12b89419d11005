"""Message ids (the router's rule 10, ``liminal.acp.message_ids``): every user, agent and thought
message reaches the client with a ``messageId``, and it is the id the store gives that message
(the deriver's), so a replay from the store and ``session/rewind`` name it as the live turn did."""

from __future__ import annotations

import time
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from liminal.acp.message_ids import stamped, with_user_message_id
from liminal.acp.router import Router
from liminal.ingest.derive import Deriver
from liminal.ingest.indexer import to_record
from liminal.kernel.replay import history_updates
from liminal.store.records import acp_message_id, frame_id

THREAD = "0c9d5f8e-1111-4222-8333-444455556666"


def line(message: dict[str, Any]) -> bytes:
    return orjson.dumps(message) + b"\n"


def chunk(kind: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": THREAD, "update": {"sessionUpdate": kind, "content": {"type": "text", "text": text}, **extra}}}


def tool(tool_id: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": THREAD, "update": {"sessionUpdate": "tool_call", "toolCallId": tool_id, "title": "ls"}}}


def prompt(rpc_id: int, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "method": "session/prompt",
            "params": {"sessionId": THREAD, "prompt": [{"type": "text", "text": text}]}}


def permission(rpc_id: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "method": "session/request_permission",
            "params": {"sessionId": THREAD, "toolCall": {"toolCallId": "t"}, "options": []}}


class Wire:
    """A router with rule 10 on, and what the store would derive from its taps."""

    def __init__(self) -> None:
        self.router = Router(max_frame_bytes=1 << 20, connection_id="conn", message_ids=True)
        self.to_client: list[dict[str, Any]] = []
        self.deriver = Deriver()
        self.seq = 0
        self.stored: dict[str, Any] = {}

    def _take(self) -> None:
        out = self.router.take()
        self.to_client += [orjson.loads(x) for x in out.to_client]
        for event in out.events:
            record = to_record(self.seq, event)
            self.seq += 1
            # As the indexer: the parsed copy, else the frame parsed.
            self.deriver.feed(record, event.message if event.message is not None else orjson.loads(record.raw))
        for m in self.deriver.take().messages:
            self.stored[m.id] = m

    def client(self, *messages: dict[str, Any]) -> None:
        self.router.receive_from_client(b"".join(map(line, messages)), time.time())
        self._take()

    def agent(self, *messages: dict[str, Any]) -> None:
        self.router.receive_from_agent(b"".join(map(line, messages)), time.time())
        self._take()

    def own(self, update: dict[str, Any]) -> None:
        self.router.notify_client("session/update", {"sessionId": THREAD, "update": update}, time.time())
        self._take()

    def live_ids(self) -> list[tuple[str, str]]:
        """(kind, messageId) of every chunk the client got, once per message."""
        seen: list[tuple[str, str]] = []
        for m in self.to_client:
            update = (m.get("params") or {}).get("update") or {}
            if update.get("sessionUpdate", "").endswith("_chunk"):
                pair = (update["sessionUpdate"], update["messageId"])
                if pair not in seen:
                    seen.append(pair)
        return seen

    def store_ids(self) -> list[tuple[str, str]]:
        kinds = {"agent": "agent_message_chunk", "user": "user_message_chunk", "thought": "agent_thought_chunk"}
        said = sorted((m for m in self.stored.values() if m.kind in kinds and not m.id.endswith("problem")),
                      key=lambda m: m.order)
        return [(kinds[m.kind], acp_message_id(m)) for m in said if not (m.kind == "user" and "prompt" in m.data)]


def test_chunks_get_the_id_the_store_gives_their_message() -> None:
    wire = Wire()
    wire.client(prompt(1, "hello"))
    wire.agent(chunk("agent_thought_chunk", "hm"), chunk("agent_message_chunk", "Let me "),
               chunk("agent_message_chunk", "look."), tool("t1"), chunk("agent_message_chunk", "Done."))
    wire.agent(permission(7))
    wire.client({"jsonrpc": "2.0", "id": 7, "result": {"outcome": {"outcome": "cancelled"}}})
    wire.agent(chunk("agent_message_chunk", "More."), {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}})
    live = wire.live_ids()
    assert [k for k, _ in live] == ["agent_thought_chunk", "agent_message_chunk", "agent_message_chunk",
                                    "agent_message_chunk"]
    assert len({mid for _, mid in live}) == 4  # three messages of the agent's, split by a tool and a permission
    assert live == wire.store_ids()
    # The two chunks of one message share its id; the store joined them under it.
    assert wire.stored[live[1][1]].text == "Let me look."


def test_the_prompt_answer_names_the_user_message_and_the_agents_own_ids_are_kept() -> None:
    wire = Wire()
    wire.client(prompt(1, "hello"))
    sent = chunk("agent_message_chunk", "hi", messageId="msg_agent_1")
    wire.agent(sent, {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}})
    assert wire.to_client[0] == sent  # the agent's own id: the frame as it sent it
    answer = wire.to_client[-1]["result"]
    assert answer["stopReason"] == "end_turn"
    user = wire.stored[answer["_meta"]["userMessageId"]]
    assert (user.kind, user.text) == ("user", "hello")
    assert acp_message_id(wire.stored[frame_id("conn", 1)]) == "msg_agent_1"


def test_liminals_own_chunks_get_ids_and_a_replay_from_the_store_gives_the_same() -> None:
    wire = Wire()
    wire.client(prompt(1, "one"))
    wire.agent(chunk("agent_message_chunk", "answer"), {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}})
    user_id = wire.to_client[-1]["result"]["_meta"]["userMessageId"]
    wire.own({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "liminal: "}})
    wire.own({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "swapped"}})
    live = wire.live_ids()
    assert len(live) == 2 and live == wire.store_ids()
    replay = history_updates(sorted(wire.stored.values(), key=lambda m: m.order))
    ids = [u["messageId"] for u in replay if u["sessionUpdate"].endswith("_chunk")]
    assert ids == [user_id, live[0][1], live[1][1]]


def test_a_canonical_chunk_is_stamped_without_a_parse_as_a_parse_would() -> None:
    raw = orjson.dumps(chunk("agent_message_chunk", 'say "hi"\n'))
    end = raw.find(b'"', len(b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"'))
    spliced = stamped(raw, "c:0000000003", canonical_end=end)
    parsed = stamped(raw, "c:0000000003", canonical_end=None)
    assert orjson.loads(spliced) == orjson.loads(parsed)
    assert orjson.loads(spliced)["params"]["update"]["messageId"] == "c:0000000003"


def test_without_rule_10_chunks_pass_as_sent() -> None:
    router = Router(max_frame_bytes=1 << 20)
    raw = line(chunk("agent_message_chunk", "x"))
    router.receive_from_agent(raw, time.time())
    assert router.take().to_client == [raw.rstrip(b"\n")]


FRAMES = st.lists(st.sampled_from(["agent", "thought", "user", "tool", "own", "permission", "prompt", "agent_id"]),
                  max_size=30)


@settings(max_examples=200, deadline=None)
@given(FRAMES)
@pytest.mark.filterwarnings("ignore")
def test_any_sequence_of_frames_gives_the_client_the_stores_ids(frames: list[str]) -> None:
    wire = Wire()
    rpc = 100
    for i, name in enumerate(frames):
        rpc += 1
        if name == "agent":
            wire.agent(chunk("agent_message_chunk", f"a{i}"))
        elif name == "thought":
            wire.agent(chunk("agent_thought_chunk", f"t{i}"))
        elif name == "user":
            wire.agent(chunk("user_message_chunk", f"u{i}"))
        elif name == "agent_id":
            wire.agent(chunk("agent_message_chunk", f"a{i}", messageId=f"m{i // 2}"))
        elif name == "tool":
            wire.agent(tool(f"t{i}"))
        elif name == "own":
            wire.own({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"o{i}"}})
        elif name == "permission":
            wire.agent(permission(rpc))
        else:
            wire.client(prompt(rpc, f"p{i}"))
    assert wire.live_ids() == wire.store_ids()


def test_a_chunk_in_another_writers_form_keeps_its_bytes() -> None:
    raw = (b'{"jsonrpc": "2.0", "method": "session/update", "params": {"update": {"content": '
           b'{"type": "text", "text": "d\\u00e9j\\u00e0 \\"sessionUpdate\\": x"}, "sessionUpdate": '
           b'"agent_message_chunk"}, "sessionId": "s"}}')
    out = stamped(raw, "c:0000000001", canonical_end=None)
    assert out == raw.replace(b'"sessionUpdate": "agent', b'"messageId":"c:0000000001","sessionUpdate": "agent')
    assert orjson.loads(out)["params"]["update"]["messageId"] == "c:0000000001"


@pytest.mark.parametrize("result", [
    b'{"stopReason":"end_turn","usage":{"inputTokens":1.50}}',
    b'{"stopReason":"end_turn","_meta":{"agent":{"kept":true}}}',
    b'{ }',
])
def test_the_user_message_id_goes_under_meta_beside_the_agents_own(result: bytes) -> None:
    # No schema's PromptResponse has a userMessageId member: it is an extension, in _meta.
    line = b'{"jsonrpc":"2.0","id":7,"result":' + result + b"}"
    parsed = orjson.loads(result)
    out = orjson.loads(with_user_message_id(line, b"7", parsed, "c:1"))
    meta = out["result"].pop("_meta")
    assert meta == {**parsed.pop("_meta", {}), "userMessageId": "c:1"}
    assert out["result"] == parsed and out["id"] == 7
