"""The acceptance scenario every adapter runs, directly and through ``liminal acp``.

One process: initialize, session/new, a text prompt, a prompt that runs a tool, a prompt whose
tool needs the client's permission (approved). A second, fresh process: initialize and
``session/load`` of that session (the history is replayed). Each step asserts what the client
must see; the frames received are kept so that two runs can be compared byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fixtures.harness import Adapter, PromptResult, Rig, Scenario, Shell, normalize
from liminal.kernel.modeltools import server_spec

PERMITTED_FILE = "permitted.txt"


def model_script(adapter: Adapter) -> Scenario:
    # The fixed follow-up texts (not an echo of the tool output) keep the agent's replies
    # identical between runs: Codex's tool output carries a random chunk id.
    return (
        Scenario()
        .add("USE_TOOL", Shell("echo hi", "Print hi"), "the tool ran")
        .add("USE_PERMISSION",
             # The TypeScript Codex adapter only asks the client when the call asks to leave the
             # sandbox; the Rust one (approval_policy = "untrusted") asks for any write.
             Shell(f"touch {PERMITTED_FILE}", "Create a file", escalate=adapter.name == "codex-agent"),
             "the file exists")
    )


@dataclass
class Run:
    """What one run of the scenario produced."""

    rig: Rig
    via_liminal: bool
    initialize: dict[str, object] = field(default_factory=dict)
    session_id: str = ""
    text: PromptResult | None = None
    tool: PromptResult | None = None
    permission: PromptResult | None = None
    permission_requests: int = 0
    replay: list[dict[str, object]] = field(default_factory=list)
    # Frames received by the client, per process, raw bytes as they came.
    frames: list[list[bytes]] = field(default_factory=list)
    # Through liminal only: the load's frames from the adapter alone, on the same session file.
    same_file_direct_load: list[bytes] = field(default_factory=list)

    def normalized(self) -> list[list[bytes]]:
        paths = [str(self.rig.home.root)]
        return [normalize(frames, paths) for frames in self.frames]


def run_scenario(rig: Rig, *, via_liminal: bool) -> Run:
    run = Run(rig, via_liminal)
    project = rig.home.project
    client = rig.client(via_liminal=via_liminal)
    try:
        run.initialize = client.initialize()
        run.session_id = client.new_session(project, mcp_servers=servers(rig, via_liminal))["sessionId"]
        run.text = client.prompt(run.session_id, "hello")
        run.tool = client.prompt(run.session_id, "USE_TOOL please run echo")
        run.permission = client.prompt(run.session_id, "USE_PERMISSION please create a file")
        client.settle()
        run.permission_requests = sum(
            1 for r in client.agent_requests if r["method"] == "session/request_permission")
    finally:
        client.close()
        run.frames.append([f.raw for f in client.received])
    run.replay, frames = load(rig, run.session_id, via_liminal=via_liminal)
    run.frames.append(frames)
    if via_liminal:
        # The same session file loaded by the adapter alone: what liminal's replay must equal.
        # (Two worlds' files can differ: Claude Code 2.1.44 has been seen, once in many runs,
        # to order a replay differently, a race of the CLI's own, not of liminal's.)
        _, run.same_file_direct_load = load(rig, run.session_id, via_liminal=False)
    return run


def servers(rig: Rig, via_liminal: bool, thread: str | None = None) -> list[dict[str, Any]]:
    """What a session request gets: liminal adds its MCP server on its way; the direct world is
    given the same server, so that both CLIs offer the model the same tools (the token counts
    the agent reports would differ otherwise)."""
    if via_liminal:
        return []
    return [server_spec(rig.home.liminal_home, None, thread=thread, nonce=None if thread else "direct")]


def load(rig: Rig, session_id: str, *, via_liminal: bool) -> tuple[list[dict[str, object]], list[bytes]]:
    """``session/load`` in a fresh process: the replayed updates, and every frame received."""
    loader = rig.client(via_liminal=via_liminal)
    try:
        loader.initialize()
        replay = loader.load_session(session_id, rig.home.project,
                                     mcp_servers=servers(rig, via_liminal, session_id))
        loader.settle()
    finally:
        loader.close()
    return replay, [f.raw for f in loader.received]
