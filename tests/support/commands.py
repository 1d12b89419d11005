"""The one change liminal makes to what the agent sends: its commands added to the agent's
``available_commands_update`` (``liminal.kernel.commands``). Tests that compare streams byte for
byte compare these frames without them."""

from __future__ import annotations

import orjson

from liminal.kernel.commands import COMMANDS


def without_liminal_commands(line: bytes) -> bytes:
    """A command-list frame with liminal's commands taken out, re-encoded (so a frame from either
    side of liminal reads the same); any other line as it is."""
    if b'"available_commands_update"' not in line:
        return line
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
