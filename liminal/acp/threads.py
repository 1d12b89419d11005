"""Rules 2 and 4 of the router (``liminal.acp.router``): which backing session carries each
thread, which thread each backing session stands for, and which backing ids are captured. The
maps hold only the pairs that differ (a thread on the session of its own id stores nothing), so
the common case costs one failed lookup. The router reads the maps directly on its hot path."""

from __future__ import annotations


class ThreadMap:
    def __init__(self) -> None:
        self.backing: dict[str, str] = {}  # thread -> backing, only where they differ
        self.thread: dict[str, str] = {}  # backing -> thread, only where they differ
        # Rule 4: backing ids whose notifications reach the taps only (a swap's load, a replay).
        self.captured: set[str] = set()
        # Rule 4's tail: backing ids a capture ended on, until a prompt of the session goes to
        # the agent. An agent may go on replaying a load after it answered it (Gemini CLI
        # streams the history without waiting): what it sends of the history meanwhile is
        # the replay's too.
        self.trailing: set[str] = set()

    def backing_of(self, thread_id: str) -> str:
        return self.backing.get(thread_id, thread_id)

    def thread_of(self, backing_id: str) -> str:
        return self.thread.get(backing_id, backing_id)

    def bind(self, thread_id: str, backing_id: str) -> None:
        """Make ``backing_id`` the session that carries ``thread_id`` from now on.

        Earlier backing ids of the thread keep pointing at it, so late frames of a session the
        thread has left still reach the client under the thread's id.
        """
        if backing_id == thread_id:
            self.backing.pop(thread_id, None)
            self.thread.pop(thread_id, None)
        else:
            self.backing[thread_id] = backing_id
            self.thread[backing_id] = thread_id

    def adopt(self, backing_id: str, thread_id: str) -> None:
        """``backing_id`` carried ``thread_id`` before (the swap journal remembers it across
        restarts): frames and listings that name it reach the client under the thread's id. The
        thread's current backing id is unchanged."""
        if backing_id != thread_id:
            self.thread.setdefault(backing_id, thread_id)

    def capture(self, backing_id: str) -> None:
        self.captured.add(backing_id)

    def uncapture(self, backing_id: str) -> None:
        if backing_id in self.captured:
            self.captured.discard(backing_id)
            self.trailing.add(backing_id)

    def prompted(self, backing_id: str) -> None:
        """A prompt of the session went to the agent: what it sends from now on is the turn's."""
        self.trailing.discard(backing_id)
