"""The ACP version liminal speaks, and how a connection comes to speak it.

ACP's negotiation (the same text in v1 and v2, ``protocol/v2/draft/initialization``, "Version
Negotiation"): the client's ``initialize`` names the latest version it supports; the agent
answers the same version if it supports it, else the latest it supports, and a client that
cannot speak that closes the connection. One connection speaks one version after that.

liminal reads and writes v1 frames behind the client's edge: the store records v1 updates, a swap
opens the next session with ``session/load`` or ``session/resume`` as v1 has them, replay sends
v1 updates, a turn ends with the prompt's answer. So it is a v1 client to its agent: an agent
that speaks v2 as well (codex-acp) is never asked for it, so it never answers in v2 frames
liminal would misread. A client that asks for v2 is answered in v2 at the edge
(``liminal.acp.v2``), which hands liminal that client's ``initialize`` already asking for 1; one
that asks for 3 or more is answered 2 there, and any request still asking for more than 1 here
(a conductor's ``proxy/initialize``) has the agent asked for 1 and its answer of 1 passed on.
"""

from __future__ import annotations

from typing import Any

from liminal import log
from liminal.acp.v2 import SPOKEN, asked_version

logger = log.get("liminal.version")

def asked_for_spoken(method: str, message: dict[str, Any], thread: str | None) -> dict[str, Any] | None:
    """The client's ``initialize`` as liminal passes it to the agent: asking for ``SPOKEN``
    when the client asked for a later version, else None (forwarded as sent; a version below
    or not a number is for the agent to answer). The rest of the params pass as the client
    wrote them; a v2 client's ``capabilities`` and ``info`` are no v1 field, and mean nothing
    to a v1 agent."""
    asked = asked_version(message)
    if asked is None or not asked > SPOKEN:
        return None
    logger.info("the client asked for a later ACP version; the agent is asked for the one liminal speaks",
                asked=asked, spoken=SPOKEN)
    return {**message, "params": {**message["params"], "protocolVersion": SPOKEN}}
