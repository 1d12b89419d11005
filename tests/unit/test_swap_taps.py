"""What the swap manager learns from the frames it is offered, canonical streamed updates (routed
from their bytes, ``LazyFrameEvent``) and others alike: the context size, the mode, and the model
calls counted from tool frames; every other streamed kind it passes over unread."""

from __future__ import annotations

import json
from pathlib import Path

from liminal.acp.router import Router
from liminal.config import SwapSettings
from liminal.kernel.journal import SwapJournal
from liminal.kernel.swap import SwapManager
from tests.integration.test_swap_scripted import FakeHarness

THREAD = "9b1f3a55-2c41-4c6e-9a57-0d6f2f4f0e11"


def update(kind: str, canonical: bool = True, **fields: object) -> bytes:
    body = {"sessionUpdate": kind, **fields}
    if canonical:  # as the pinned adapters write it: the update right after the session id
        return (b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"' + THREAD.encode()
                + b'","update":' + json.dumps(body, separators=(",", ":")).encode() + b"}}\n")
    return json.dumps({"jsonrpc": "2.0", "method": "session/update",
                       "params": {"update": body, "sessionId": THREAD}}).encode() + b"\n"


def fed(tmp_path: Path, canonical: bool) -> SwapManager:
    manager = SwapManager(SwapSettings(), SwapJournal(tmp_path / "swaps.jsonl"), FakeHarness(tmp_path))
    router = Router(max_frame_bytes=1 << 20)
    router.receive_from_client(b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}\n', 1.0)
    router.receive_from_agent(b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"' + THREAD.encode() + b'"}}\n', 1.0)
    for line in (
        update("agent_message_chunk", canonical, content={"type": "text", "text": '"tool_call" "usage_update"'}),
        update("tool_call", canonical, toolCallId="a", title="ls"),
        update("tool_call", canonical, toolCallId="b", title="ls"),
        update("tool_call_update", canonical, toolCallId="a", status="completed"),
        update("tool_call_update", canonical, toolCallId="b", status="completed"),
        update("usage_update", canonical, used=12_345, size=200_000),
        update("current_mode_update", canonical, currentModeId="plan"),
        update("agent_thought_chunk", canonical, content={"type": "text", "text": "hm"}),
    ):
        router.receive_from_agent(line, 2.0)
    for event in router.take().events:
        manager.model.offer(event)  # the thread model reads the frames the swap manager uses
    return manager


def test_the_swap_manager_reads_the_kinds_it_needs_in_either_form(tmp_path: Path) -> None:
    for canonical in (True, False):
        state = fed(tmp_path, canonical).threads[THREAD]
        assert state.context_tokens == 12_345 and state.mode_id == "plan", canonical
        # One round of two parallel tool calls: their results go back in one model call.
        assert state.calls == 1 and state.results_since_call, canonical
