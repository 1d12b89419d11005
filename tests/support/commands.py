"""The changes liminal makes to what it forwards: its commands added to the agent's
``available_commands_update`` (``liminal.kernel.commands``), its MCP server added to the
``mcpServers`` of the client's session requests (``liminal.kernel.modeltools``), and the
capabilities it answers for added to ``initialize``'s answer (``liminal.kernel.delete``). Tests
that compare streams byte for byte compare these frames without them."""

from __future__ import annotations

import re

import orjson

from liminal.kernel.commands import COMMANDS
from liminal.kernel.modeltools import NAMES_SESSION, OPENS_SESSION, SERVER_NAME


def without_liminal_capabilities(line: bytes) -> bytes:
    """An ``initialize`` answer without ``sessionCapabilities.delete`` and ``fork`` (liminal adds them),
    re-encoded (so the answer from either side of liminal reads the same); any other line as
    it is."""
    if b'"agentCapabilities"' not in line:
        return line
    try:
        message = orjson.loads(line)
        caps = message["result"]["agentCapabilities"]
        for name in ("delete", "fork"):
            caps.get("sessionCapabilities", {}).pop(name, None)
        if caps.get("sessionCapabilities") == {}:
            del caps["sessionCapabilities"]
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        return line
    return orjson.dumps(message) + (b"\n" if line.endswith(b"\n") else b"")


def without_liminal_commands(line: bytes) -> bytes:
    """A command-list frame with liminal's commands taken out, re-encoded (so a frame from either
    side of liminal reads the same); an ``initialize`` answer without liminal's capabilities;
    any other line as it is."""
    if b'"available_commands_update"' not in line:
        return without_liminal_capabilities(line)
    try:
        message = orjson.loads(line)
        update = message["params"]["update"]
        update["availableCommands"] = [c for c in update["availableCommands"]
                                       if c.get("name") not in COMMANDS]
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        return line
    return orjson.dumps(message) + (b"\n" if line.endswith(b"\n") else b"")


def offers_liminal_commands(line: bytes) -> bool:
    if b'"available_commands_update"' not in line:
        return False
    names = {c.get("name") for c in orjson.loads(line)["params"]["update"]["availableCommands"]}
    return set(COMMANDS) <= names


def without_liminal_server(line: bytes) -> bytes:
    """A session request (new, load, resume, fork) with liminal's MCP server taken out,
    re-encoded (so the request from either side of liminal reads the same); any other line as
    it is."""
    if b'"mcpServers"' not in line:
        return line
    try:
        message = orjson.loads(line)
        if message.get("method") not in OPENS_SESSION + NAMES_SESSION:
            return line
        params = message["params"]
        params["mcpServers"] = [s for s in params["mcpServers"] if s.get("name") != SERVER_NAME]
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        return line
    return orjson.dumps(message) + (b"\r\n" if line.endswith(b"\r\n") else b"\n" if line.endswith(b"\n") else b"")


def offered_liminal_server(line: bytes) -> bool:
    """The session request carries liminal's server (as it reaches the agent)."""
    return b'"mcpServers"' in line and any(
        s.get("name") == SERVER_NAME for s in orjson.loads(line)["params"]["mcpServers"])


# liminal's message ids (``liminal.acp.message_ids``: ``<connection hex>:<seq>``) and the
# capability it answers for the agent (``liminal.kernel.rewind``), as its frames carry them.
_LIMINAL_IDS = re.compile(rb'"_meta":\{"userMessageId":"[0-9a-f]{32}:[0-9]{10}"\},?|,"_meta":\{"userMessageId":"[0-9a-f]{32}:[0-9]{10}"\}'
                          rb'|"(?:user)?[mM]essageId":"[0-9a-f]{32}:[0-9]{10}",?|,"(?:user)?[mM]essageId":"[0-9a-f]{32}:[0-9]{10}"')
_REWIND = re.compile(rb',?"_meta":\{"rewindSession":\{"supported":true,"supportsEditPrompt":true\}\}'
                     rb'|,?"rewindSession":\{"supported":true,"supportsEditPrompt":true\}')


def without_liminal_ids(line: bytes) -> bytes:
    """A frame with what liminal adds for issue 25 taken out: its ``messageId`` on a chunk the
    agent sent without one, ``_meta.userMessageId`` on a prompt's answer, ``_meta.rewindSession``
    in ``initialize``'s answer (so a frame through liminal reads as the agent's)."""
    if b"essageId" in line:
        line = _LIMINAL_IDS.sub(b"", line)
    if b'"rewindSession"' in line:
        line = _REWIND.sub(b"", line).replace(b'"agentCapabilities":{,', b'"agentCapabilities":{')
    return line


def without_liminal_additions(line: bytes) -> bytes:
    """A frame from the agent's side of liminal as the agent wrote it: without liminal's message
    ids and rewind capability (``without_liminal_ids``) and the session capabilities it answers
    for (``without_liminal_capabilities``), both issue 25's."""
    return without_liminal_capabilities(without_liminal_ids(line))
