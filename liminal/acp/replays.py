"""Rule 8 of the router (``liminal.acp.router``) as the router acts on it: a client's load of a
moved thread captures its backing id while the agent replays (``MovedLoads`` keeps the replay),
and a parked answer is finished with the history it is given, or with the agent's own replay.
The capture lasts as long as the load: it ends when the agent answers, however it answers (an
error, an oversized line, the agent gone); history the agent goes on replaying after its answer
is kept from the client until the thread's next prompt (rule 4's tail, ``ThreadMap.trailing``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from liminal.acp import jsonrpc
from liminal.acp.emitter import Emitter
from liminal.acp.events import Direction, Kind
from liminal.acp.moved_loads import Load, MovedLoads
from liminal.acp.session_ids import rewrite
from liminal.acp.threads import ThreadMap


class Replays:
    def __init__(self, *, loads: MovedLoads, threads: ThreadMap, emit: Emitter,
                 notify_client: Callable[[str, Any, float], None], replay_from_store: bool) -> None:
        self._loads = loads
        self._threads = threads
        self._emit = emit
        self._notify_client = notify_client  # ``OwnFrames.notify_client``: the history's updates
        self.replay_from_store = replay_from_store  # someone (``liminal.kernel.replay``) finishes them

    @property
    def waiting(self) -> int:
        """Loads of moved threads that the agent has answered and ``finish`` has not."""
        return len(self._loads.parked)

    def start(self, rpc_id: Any, thread: str, backing: str) -> None:
        """A client's load of ``thread``, on its way to ``backing``."""
        if self.replay_from_store and backing != thread:
            self._loads.start(jsonrpc.id_key(rpc_id), thread, backing)
            self._threads.captured.add(backing)

    def answered(self, key: Any) -> Load | None:
        """The agent answered the client's request ``key``: the load it was, if one, ended."""
        load = self._loads.answered(key)
        if load is not None:
            self._end(load)
        return load

    def _end(self, load: Load) -> None:
        if self._loads.end(load):
            self._threads.uncapture(load.backing)

    def finish(self, token: int, history: list[dict[str, Any]] | None, now: float) -> bool:
        """Answer a parked load (``Output.replays``): ``history`` (``session/update`` updates,
        oldest first) goes to the client as the thread's, then the agent's replayed lines that
        are not history, then the agent's answer. ``None``: the agent's own replay instead.
        False if the token is unknown (already finished)."""
        done = self._loads.finish(token, history is not None)
        if done is None:
            return False
        load = done.load
        if history is None:  # the agent's own replay is the client's: what it still sends too
            self._threads.prompted(load.backing)
        for update in history or ():
            self._notify_client("session/update", {"sessionId": load.thread, "update": update}, now)
        emit = self._emit
        for line in done.lines:
            out_line = rewrite(line, load.backing, load.thread)
            emit.out.client.append(out_line)
            emit.tap(Direction.LIMINAL_TO_CLIENT, Kind.NOTIFICATION, now, out_line, None, load.thread,
                     load.backing, "session/update", None)
        emit.answer_client(load.key, load.answer)
        emit.tap(Direction.AGENT_TO_CLIENT, Kind.RESPONSE, now, load.raw, load.message, load.thread,
                 load.backing, "session/load", load.rpc_id)
        return True

    def agent_gone(self, now: float) -> None:
        """The agent died (rule 7, which answered the client's requests): loads it had not
        answered end, and the answers it did give go through with its own replay."""
        for load in self._loads.unanswered():
            self._end(load)
        for token in self._loads.parked:
            self.finish(token, None, now)
