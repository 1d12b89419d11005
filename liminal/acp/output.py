"""What the router (``liminal.acp.router``) produced since the shell last took it: the lines to
write each way, the frames for the taps, and what the shell must settle or hand on."""

from __future__ import annotations

from typing import Any

from liminal.acp.events import FrameEvent, FrameRun, expand
from liminal.acp.hooks import LocalRequest
from liminal.acp.moved_loads import ReplayRequest


class Output:
    """Lines are kept without their ``\\n``. ``client`` holds pieces: a line, or the lines of a
    run of streamed chunks joined by ``\\n`` as the router forwarded them whole; ``to_client``
    reads them line by line. ``taps`` holds events and runs (``FrameRun``); ``events`` reads them
    event by event."""

    __slots__ = ("client", "local", "own_responses", "problems", "replays", "taps", "to_agent")

    def __init__(self) -> None:
        self.client: list[bytes] = []
        self.to_agent: list[bytes] = []
        self.taps: list[FrameEvent | FrameRun] = []
        self.own_responses: list[tuple[str, dict[str, Any]]] = []  # (rpc id, answer)
        self.problems: list[str] = []  # reports of bad input, for the shell to log
        self.replays: list[ReplayRequest] = []  # rule 8, for ``finish_replay``
        self.local: list[LocalRequest] = []  # kept by a hook, for ``answer_local``

    @property
    def to_client(self) -> list[bytes]:
        return [line for piece in self.client for line in piece.split(b"\n")]

    @property
    def events(self) -> list[FrameEvent]:
        events = expand(self.taps)
        self.taps = events  # type: ignore[assignment]  # the same objects at every read
        return events

    def client_bytes(self) -> bytes:
        """What to write to the client: every line with its ``\\n``."""
        client = self.client
        return client[0] + b"\n" if len(client) == 1 else b"\n".join([*client, b""])

    def agent_bytes(self) -> bytes:
        return b"\n".join([*self.to_agent, b""])
