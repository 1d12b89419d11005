"""History for a moved thread's ``session/load``, from the store rather than from the agent.

A thread liminal has swapped lives on a compressed session: loading it makes the agent replay
the compressed history (a consolidated preamble, cut tool outputs). The router captures that
replay and parks the agent's answer (its rule 8); this component, a proxy component like the
swap manager, answers each ``Output.replays`` request with the thread's history as the store
has it (``conversation``: what liminal recorded live, after what came before it), turned back
into the ``session/update`` notifications an agent would have sent, and calls
``Router.finish_replay``. If it cannot (no store, nothing stored for the thread, the store
lagging behind the agent, or ``timeout`` passed), it hands back ``None`` and the client gets
the agent's own replay, as it did before: the load must answer, whatever the store does.

The store is opened only when a first such load arrives, read-only (SQLite reads run in a
worker thread, so the event loop never waits on the disk).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import anyio
import orjson

from liminal import log
from liminal.acp.moved_loads import HISTORY_UPDATES
from liminal.acp.port import ClientVoice, Component
from liminal.acp.router import ReplayRequest
from liminal.ingest.derive import content_text
from liminal.kernel.rewind import timeline
from liminal.store.records import MessageRecord, acp_message_id, conversation

if TYPE_CHECKING:
    from liminal.store.base import Store

logger = log.get("liminal.replay")
# How long the store may take to show the turn the agent replayed last (the index worker runs a
# few milliseconds behind the proxy), within the overall timeout.
FRESH_POLL_SECONDS = 0.05

StoreOpener = Callable[[], AbstractAsyncContextManager["Store"]]


class ReplayManager(Component):
    answers_replays = True

    def __init__(self, open_store: StoreOpener, *, timeout: float = 3.0) -> None:
        self._open_store = open_store
        self.timeout = timeout
        self._store: Store | None = None
        self._stack = contextlib.AsyncExitStack()
        self._lock = anyio.Lock()
        self._send, self._receive = anyio.create_memory_object_stream[ReplayRequest](1024)
        self.finished: list[tuple[str, str]] = []  # (thread, "store" or "agent"), for tests
        self._progress = anyio.Event()
        # ``run`` has ended (failed, switched off) and not started again: nothing reads the
        # queue. Before the first ``run``, loads wait in the queue for it.
        self._stopped = False

    def replay_requested(self, request: ReplayRequest) -> None:
        """Called by the proxy (inside a flush) for each ``Output.replays`` entry. Raises when
        nothing will answer it (the queue is full, ``run`` failed or was switched off): the proxy
        then answers the load with the agent's own replay, as it must be answered."""
        if self._stopped:
            raise RuntimeError("the replay manager is not running")
        try:
            self._send.send_nowait(request)
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            raise RuntimeError("the replay queue cannot take the load") from exc

    async def run(self, port: ClientVoice) -> None:
        # The stream is not closed on the way out: ``run`` again after a failure (the
        # supervisor) must find it open. Loads queued meanwhile wait for it.
        self._stopped = False
        try:
            async with anyio.create_task_group() as tg:
                async for request in self._receive:
                    tg.start_soon(self._answered, port, request)
        finally:
            self._stopped = True

    async def _answered(self, port: ClientVoice, request: ReplayRequest) -> None:
        """``_answer``, and whatever happens to it (a failure, cancelled with ``run``), the load
        answered: with the agent's own replay if nothing better came."""
        try:
            await self._answer(port, request)
        except Exception:
            logger.exception("replay failed; the agent's replay is used", thread=request.thread_id)
        finally:
            port.finish_replay(request.token, None)

    async def _answer(self, port: ClientVoice, request: ReplayRequest) -> None:
        history: list[dict[str, Any]] | None = None
        t0 = time.monotonic()
        with anyio.move_on_after(self.timeout) as scope:
            try:
                history = await self.history(request)
            except Exception as exc:  # the store is never in the way of a load
                logger.warning("history not read from the store; the agent's replay is used",
                               thread=request.thread_id, error=f"{type(exc).__name__}: {exc}")
        if scope.cancelled_caught:
            logger.warning("history not read from the store in time; the agent's replay is used",
                           thread=request.thread_id, timeout=self.timeout)
        port.finish_replay(request.token, history)
        source = "agent" if history is None else "store"
        logger.info("moved thread loaded", thread=request.thread_id, backing=request.backing_id,
                    history_from=source, updates=len(history or ()),
                    seconds=round(time.monotonic() - t0, 4))
        self.finished.append((request.thread_id, source))
        self._progress.set()
        self._progress = anyio.Event()

    async def wait_for_replays(self, count: int) -> None:
        """For tests: until ``count`` loads have been answered."""
        while len(self.finished) < count:
            await self._progress.wait()

    async def history(self, request: ReplayRequest) -> list[dict[str, Any]] | None:
        """The thread's history as ``session/update`` updates, or None to use the agent's."""
        store = await self._opened()
        last_prompt = agent_last_prompt(request.agent_lines)
        while True:
            shown = conversation(await store.messages(request.thread_id))
            if last_prompt is None or any(_same_prompt(m.text, last_prompt)
                                          for m in shown if m.kind == "user"):
                break
            # The agent replayed a turn the store does not show yet: the index worker is behind
            # (or still replaying a spool after a restart). Give it until the timeout.
            await anyio.sleep(FRESH_POLL_SECONDS)
        # What a rewind or an edit cut off is not replayed (the RFD); ``liminal history`` has it.
        updates = history_updates(timeline(shown))
        return updates or None

    async def _opened(self) -> Store:
        async with self._lock:
            if self._store is None:
                self._store = await self._stack.enter_async_context(self._open_store())
            return self._store

    async def aclose(self) -> None:
        self._send.close()
        with anyio.CancelScope(shield=True):
            await self._stack.aclose()


async def send_history(port: ClientVoice, store: Store, thread: str) -> None:
    """The thread's history from the store, to the client, for a load liminal answers itself
    (``liminal.kernel.reopen``, ``restore``); a store that cannot be read sends none and the
    load is answered all the same."""
    try:
        updates = history_updates(conversation(await store.messages(thread)))
    except Exception as exc:
        logger.warning("history not read from the store", thread=thread, error=str(exc))
        return
    for update in updates:
        port.notify_client("session/update", {"sessionId": thread, "update": update})


def history_updates(messages: Sequence[MessageRecord]) -> list[dict[str, Any]]:
    """Messages as the ``session/update`` updates that replay them (ACP: ``user_message_chunk``,
    ``agent_message_chunk``, ``agent_thought_chunk``, ``tool_call`` in its final state, ``plan``).
    Usage points and turn ends have no update of their own; the agent's answer to the load
    brings the session's current state. Each message's chunks carry its ``messageId``, the one
    the client was given live (``acp_message_id``)."""
    updates: list[dict[str, Any]] = []
    for m in messages:
        if m.kind == "user":
            prompt = m.data.get("prompt")
            blocks = [b for b in prompt if isinstance(b, dict) and isinstance(b.get("type"), str)] \
                if isinstance(prompt, list) else []
            if not blocks and m.text:
                blocks = [{"type": "text", "text": m.text}]
            updates.extend({"sessionUpdate": "user_message_chunk", "content": b,
                            "messageId": acp_message_id(m)} for b in blocks)
        elif m.kind in ("agent", "thought"):
            if m.text:
                kind = "agent_message_chunk" if m.kind == "agent" else "agent_thought_chunk"
                updates.append({"sessionUpdate": kind, "content": {"type": "text", "text": m.text},
                                "messageId": acp_message_id(m)})
        elif m.kind == "tool_call":
            data = {k: v for k, v in m.data.items() if k != "sessionUpdate"}
            content = data.get("content")
            if isinstance(content, list):
                # A terminal is gone once its turn is over: keep what can be shown without it.
                data["content"] = [c for c in content if not (isinstance(c, dict) and c.get("type") == "terminal")]
            updates.append({**data, "sessionUpdate": "tool_call",
                            "toolCallId": m.tool_call_id or str(data.get("toolCallId") or m.id),
                            "title": str(data.get("title") or "")})
        elif m.kind == "plan":
            updates.append({"sessionUpdate": "plan", "entries": list(m.data.get("entries") or [])})
    return updates


def agent_last_prompt(lines: Sequence[bytes]) -> str | None:
    """The text of the last user message in an agent's replay (its chunks joined) that the
    replay answers: a user message nothing of the agent's follows is not evidence of a turn
    (Gemini CLI answers a load after the first line of its replay, its own context as a user
    message, and streams the rest after; waiting for the store to show that "prompt" ran out
    the timeout and gave the client the agent's replay, cut short)."""
    last: list[str] = []
    answered: list[str] = []
    in_user = False
    for line in lines:
        try:
            message = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        update = ((message.get("params") or {}).get("update") or {}) if isinstance(message, dict) else {}
        if not isinstance(update, dict):
            continue
        kind = update.get("sessionUpdate")
        if kind == "user_message_chunk":
            if not in_user:
                last, in_user = [], True
            last.append(content_text(update.get("content")))
        else:
            if in_user and kind in HISTORY_UPDATES:
                answered = last
            in_user = False
    text = "".join(answered).strip()
    return text or None


def _same_prompt(stored: str, replayed: str) -> bool:
    """The stored prompt and the agent's replay of it (the CLI may add or drop a little around
    it, such as attached context): one contains the other, whitespace aside."""
    a, b = " ".join(stored.split()), " ".join(replayed.split())
    return bool(a and b) and (a in b or b in a)
