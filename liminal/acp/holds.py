"""Rule 5 of the router (``liminal.acp.router``): the client's frames that wait while a thread is
held, per thread, in the order they came. This object keeps them; the router decides what is
held and sends what is released."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class Held:
    line: bytes
    message: dict[str, Any]  # as the request hooks left it (``RequestHook``)


class Holds:
    def __init__(self) -> None:
        self._queues: dict[str, deque[Held]] = {}

    def __contains__(self, thread: object) -> bool:
        return thread in self._queues

    def hold(self, thread: str) -> None:
        self._queues.setdefault(thread, deque())

    def threads(self) -> list[str]:
        return list(self._queues)

    def count(self, thread: str) -> int:
        return len(self._queues.get(thread, ()))

    def holder(self, thread: str | None) -> str | None:
        """Whose queue a client frame about ``thread`` waits in: the thread's when it is held;
        for a frame about no session, the first held thread's (so the agent still sees the
        client's order); else None."""
        if thread is None:
            return next(iter(self._queues), None)
        return thread if thread in self._queues else None

    def add(self, thread: str, line: bytes, message: dict[str, Any], max_frames: int, max_bytes: int) -> bool:
        """Queue a frame; False when the thread's queue is past either bound (release it)."""
        queue = self._queues[thread]
        queue.append(Held(line, message))
        return len(queue) <= max_frames and sum(len(h.line) for h in queue) <= max_bytes

    def take(self, thread: str) -> deque[Held]:
        """Stop holding the thread: what waited, in order."""
        return self._queues.pop(thread, None) or deque()

    def take_prompts(self, thread: str) -> list[Held]:
        """The thread's held prompts, out of its queue (a cancel answers them); the rest stays."""
        queue = self._queues[thread]
        prompts = [h for h in queue if h.message.get("method") == "session/prompt"]
        for held in prompts:
            queue.remove(held)
        return prompts

    def requests(self) -> int:
        """How many held frames are requests (each one is a client request the agent owes)."""
        return sum(1 for queue in self._queues.values() for held in queue
                   if "id" in held.message and "method" in held.message)

    def clear(self) -> None:
        self._queues.clear()
