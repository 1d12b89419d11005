"""An ACP agent written with the official Python SDK (``acp.run_agent``), for interop tests.

It plays one scripted turn, so a test can check that a real SDK peer gets through liminal:
``session/prompt`` with the text ``read <path>`` streams three ``agent_message_chunk`` updates,
starts a ``tool_call`` to read the file, asks ``session/request_permission``, and, if allowed,
reads the file with ``fs/read_text_file``, finishes the tool call with its content and says the
content in a last chunk; then ``end_turn``. Any other prompt just gets the three chunks.

Every byte it reads is appended to $AGENT_LOG_IN and every byte it writes to $AGENT_LOG_OUT (the
SDK's own stdio streams, with a tee), so a test can compare both sides of the proxy exactly.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from typing import IO, Any

import acp
from acp import helpers
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
)

CHUNKS = ("Hello", " from the", " SDK agent. ")


def _log(name: str) -> IO[bytes] | None:
    path = os.environ.get(name)
    return open(path, "ab", buffering=0) if path else None


class ScriptedSdkAgent:
    def __init__(self) -> None:
        self.conn: Any = None

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None,
                         client_info: Any = None, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(load_session=False),
            agent_info=Implementation(name="sdk-agent", title="SDK agent", version="0.0.1"),
        )

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kwargs: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id=str(uuid.uuid4()))

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        text = "".join(getattr(block, "text", "") for block in prompt)
        for chunk in CHUNKS:
            await self.conn.session_update(session_id, helpers.update_agent_message_text(chunk))
        if text.startswith("read "):
            path = text[len("read "):]
            await self.conn.session_update(
                session_id, helpers.start_read_tool_call("call-1", f"Read {path}", path)
            )
            answer = await self.conn.request_permission(
                session_id=session_id,
                tool_call=helpers.update_tool_call("call-1", title=f"Read {path}", status="pending"),
                options=[
                    PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
                    PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
                ],
            )
            outcome = answer.outcome
            if getattr(outcome, "option_id", None) == "allow":
                read = await self.conn.read_text_file(session_id=session_id, path=path)
                await self.conn.session_update(session_id, helpers.update_tool_call(
                    "call-1", status="completed",
                    content=[helpers.tool_content(helpers.text_block(read.content))],
                ))
                await self.conn.session_update(
                    session_id, helpers.update_agent_message_text(f"The file says: {read.content}")
                )
            else:
                await self.conn.session_update(
                    session_id, helpers.update_tool_call("call-1", status="failed")
                )
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None


async def _tee_stdio() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """The SDK's POSIX stdio streams, with every byte read and written copied to the logs."""
    loop = asyncio.get_running_loop()
    log_in, log_out = _log("AGENT_LOG_IN"), _log("AGENT_LOG_OUT")
    reader = asyncio.StreamReader(limit=acp.core.DEFAULT_STDIO_BUFFER_LIMIT_BYTES)

    class TeeIn(asyncio.StreamReaderProtocol):
        def data_received(self, data: bytes) -> None:
            if log_in:
                log_in.write(data)
            super().data_received(data)

    await loop.connect_read_pipe(lambda: TeeIn(reader), sys.stdin)
    write_protocol = acp.stdio._WritePipeProtocol()
    transport, _ = await loop.connect_write_pipe(lambda: write_protocol, sys.stdout)
    raw_write = transport.write

    def write(data: Any) -> None:
        if log_out:
            log_out.write(bytes(data))
        raw_write(data)

    transport.write = write  # type: ignore[method-assign]
    return reader, asyncio.StreamWriter(transport, write_protocol, None, loop)


async def main() -> None:
    reader, writer = await _tee_stdio()
    await acp.run_agent(ScriptedSdkAgent(), writer, reader)


if __name__ == "__main__":
    asyncio.run(main())
