"""Move leases in Redis: two sidecars on one store never both move one thread.

A thread's move (a swap, ``/clear``, ``/undo``, a reopen: anything that puts it on another
session) is decided from where the thread is. Two sidecars on one store (``liminal serve`` on
two machines, with one MongoDB) that both moved it at once would each put it on a session
written from the same past, and one of the two lineages would be lost for the thread. So when
``cache.url`` names a Redis, every move takes ``liminal:lock:move:<thread>`` first: ``SET NX``
to a token of this process, with an expiry that outlasts any move (a move gives up after
``swap.hold_timeout_seconds``, and its undo is bounded too), so a sidecar that dies mid-move
frees the thread within that time without anyone renewing anything; released by
compare-and-delete. The home's ``flock`` on ``swaps.moving/<id>.lock`` stays: it is what tells
another liminal on the same machine that an attempt is alive.

A Redis that does not answer does not stop a move (logged once): the thread's move lock in the
process and the journal's locks still hold on one machine, as without Redis.
A connection per move: moves are a few an hour, and nothing is left open between them.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

from liminal import log

logger = log.get("liminal.leases")
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0"""


def lease_name(thread_id: str) -> str:
    """One name however the id is spelled: an agent that reads ids as UUIDs (Codex's) opens the
    same session for ``ABC...``, ``abc...`` and the 32 digits without hyphens."""
    try:
        return str(uuid.UUID(thread_id))
    except ValueError:
        return thread_id


class MoveLeases:
    """This process's leases on the threads it moves, in the Redis at ``url``."""

    def __init__(self, url: str, ttl_seconds: float) -> None:
        self.url = url
        self.ttl_ms = max(1_000, int(ttl_seconds * 1000))
        self.token = uuid.uuid4().hex
        # The threads whose lease this process holds now, taken in a Redis that answered: no
        # other sidecar is moving them (a move it began and never ended is a dead one's).
        self.held: set[str] = set()
        self._warned = False

    @staticmethod
    def key(thread_id: str) -> str:
        return f"liminal:lock:move:{lease_name(thread_id)}"

    def _client(self) -> Any:
        import redis.asyncio as redis

        return redis.Redis.from_url(self.url, socket_timeout=5, socket_connect_timeout=5)

    @contextlib.asynccontextmanager
    async def holding(self, thread_id: str) -> AsyncIterator[bool]:
        """The thread's lease for the block: True when this process holds it (or Redis does not
        answer), False when another sidecar is moving the thread."""
        client = self._client()
        try:
            try:
                taken = await client.set(self.key(thread_id), self.token, nx=True, px=self.ttl_ms)
            except Exception as exc:  # Redis down: the locks on this machine are what there is
                self._warn(exc)
                yield True
                return
            if not taken:
                yield False
                return
            self.held.add(thread_id)
            try:
                yield True
            finally:
                self.held.discard(thread_id)
                try:
                    await client.eval(_RELEASE, 1, self.key(thread_id), self.token)
                except Exception as exc:  # it expires on its own
                    self._warn(exc)
        finally:
            with contextlib.suppress(Exception):
                await client.aclose()

    async def gone(self, thread_id: str) -> bool:
        """Nobody holds the thread's lease (False when Redis does not answer: not known)."""
        client = self._client()
        try:
            return bool(await client.get(self.key(thread_id)) is None)
        except Exception as exc:
            self._warn(exc)
            return False
        finally:
            with contextlib.suppress(Exception):
                await client.aclose()

    def _warn(self, exc: Exception) -> None:
        if not self._warned:
            self._warned = True
            logger.warning("Redis does not answer; moves are locked on this machine only",
                           error=f"{type(exc).__name__}: {exc}")
