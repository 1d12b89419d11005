"""The dashboard's reads: the store opened read-only once and kept, the CLIs' files through the
harness (what the model sees now: its turns, its cuts, its bands), recall. Every answer is a
JSON-ready value (``liminal.dashboard.views`` shapes them); nothing here writes anywhere (the
recall cache too is left alone: ``Recaller`` without a cache)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from liminal import log
from liminal.config import Settings
from liminal.dashboard import views
from liminal.errors import in_words
from liminal.gradient.recall import KEY_IN_MARKER, RecallError, RecallKey
from liminal.harness.base import HarnessChoice, SessionHarness
from liminal.harness.known import known_harnesses
from liminal.lookup.shown import cli_name
from liminal.store.records import DELETED

if TYPE_CHECKING:
    from liminal.kernel.policy import CostPolicy
    from liminal.store.base import Store
    from liminal.store.records import MessageRecord, SessionRecord, Thread, ThreadSummary

logger = log.get("liminal.dashboard")
SEARCH_LIMIT = 40


def _stamp(t: Thread) -> str:
    """A thread's stamp (``Reader.stamp``) from its record."""
    return f"{t.updated}:{len(t.backing_ids)}:{t.state}:{t.title}"


class NotFound(LookupError):
    """The thread or message asked for is not in the store."""


class Reader:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._stack = AsyncExitStack()
        self._store: Store | None = None
        self._opening = anyio.Lock()
        self._harnesses: dict[str, SessionHarness] = {}
        self._rows: dict[str, tuple[ThreadSummary, dict[str, Any]]] = {}  # the list's, by thread

    async def store(self) -> Store:
        """The configured store, read-only, opened at the first request (``StoreError`` while
        it cannot be: the next request tries again)."""
        async with self._opening:
            if self._store is None:
                from liminal.store.base import StoreError
                from liminal.store.configured import open_store

                if not self.settings.store.index:
                    raise StoreError("store.index = false: liminal keeps no history to show")
                self._store = await self._stack.enter_async_context(
                    open_store(self.settings, create=False, readonly=True))
            return self._store

    async def aclose(self) -> None:
        await self._stack.aclose()
        self._store = None

    def harness(self, cli: str) -> SessionHarness:
        """The harness of the CLI named ``cli``; another name: Claude Code's, each CLI's asked
        in turn for a recall key (``ChosenHarness``)."""
        if cli not in self._harnesses:
            forced = cli if cli in ("claude", "codex", "gemini") else None
            self._harnesses[cli] = HarnessChoice(known_harnesses(self.settings.gradient), forced=forced).harness
        return self._harnesses[cli]

    def ceiling(self, thread: Thread, messages: Sequence[MessageRecord] = ()) -> int:
        """The context the thread's CLI compacts past without liminal: the setting that bounds
        liminal's swaps if set, else the CLI's own auto-compaction point on the model's window
        as the thread's usage gives it (``views.model_window``; a 1M-token model compacts far
        later than the usual 200k one)."""
        harness = self.harness(cli_name(thread.harness))
        return self.settings.swap.ceiling_tokens or harness.ceiling_at(views.model_window(messages))

    def policy(self, thread: Thread, ceiling: int) -> CostPolicy:
        """The swap's cost policy as the settings in force make it for the thread's CLI: what the
        page says to change when swaps lose money (``views.payback_view``)."""
        from liminal.kernel.policy import CostPolicy

        harness = self.harness(cli_name(thread.harness))
        made = CostPolicy(self.settings.swap, self.settings.gradient, ceiling)
        made.follow(harness)
        return made

    async def context_of_file(self, thread: Thread) -> dict[str, Any]:
        """The context of a thread no model call has measured (a fork, before its first prompt:
        its session holds the context it was forked with), as its session file says; else why
        it is not known."""
        harness = self.harness(cli_name(thread.harness))
        backing = thread.backing_ids[-1] if thread.backing_ids else thread.id

        def read() -> dict[str, Any]:
            path = harness.locate(backing, thread.cwd or None)
            if path is None:
                return {"used": None, "why": "not known until its next model call: no session file of it on this machine"}
            used = harness.context_tokens(path)
            if used is None:
                return {"used": None, "why": "not known until its next model call: its session file does not say"}
            return {"used": used, "from_file": True}

        try:
            return await anyio.to_thread.run_sync(read)
        except Exception as exc:  # a file the harness cannot read: said, the rest still shown
            logger.warning("the session file could not be read", thread=thread.id, error=str(exc)[:200])
            return {"used": None, "why": "not known until its next model call: its session file could not "
                                         f"be read ({in_words(exc)})"}

    # -- the list and a thread ------------------------------------------------------------------

    async def threads(self, *, archived: bool) -> list[dict[str, Any]]:
        """The list's rows. A row is a thread's summary and its usage and swap messages: one whose
        summary is as it was at the last load (``last_activity`` moves with every message) is the
        row made then, so a list reloaded when a turn ends elsewhere reads only that thread's."""
        store = await self.store()
        rows = []
        kept: dict[str, tuple[ThreadSummary, dict[str, Any]]] = {}
        made_by_model: dict[str, list[float]] | None = None  # read once, if a row is made again
        for summary in await store.threads(limit=100_000):
            if summary.thread.state == "archived" and not archived:
                continue
            made = self._rows.get(summary.thread.id)
            if made is None or made[0] != summary:
                messages = [*await store.messages(summary.thread.id, kind="usage"),
                            *await store.messages(summary.thread.id, kind="swap")]
                messages.sort(key=lambda m: m.order)
                if made_by_model is None:
                    made_by_model = await self._summaries(store)
                ceiling = self.ceiling(summary.thread, messages)
                row = views.thread_row(summary, messages, views.Terms(
                    ceiling, self.settings.swap.cache_life_seconds,
                    made_by_model.get(summary.thread.id, []), self.policy(summary.thread, ceiling)))
                if row["context_used"] is None:
                    known = await self.context_of_file(summary.thread)
                    row["context_used"], row["context_why"] = known["used"], known.get("why")
                    row["context_from_file"] = bool(known.get("from_file"))
                made = summary, row
            kept[summary.thread.id] = made
            rows.append(made[1])
        self._rows = kept
        return rows

    @staticmethod
    async def _summaries(store: Store) -> dict[str, list[float]]:
        """When each thread's summaries by the model were made (``swap.summaries``): what its
        saving pays for them (``views.summaries_paid``)."""
        from liminal.store.records import SUMMARY_THREAD, summarised

        made: dict[str, list[float]] = {}
        for m in await store.messages(SUMMARY_THREAD, "summary"):
            thread = summarised(m.data)
            if thread is not None:
                made.setdefault(thread, []).append(m.time)
        return made

    async def stamp(self, thread_id: str | None) -> str:
        """What changes when a turn ends or a move commits: the page asks for this every few
        seconds and reloads its data only when it changed. A thread's is its record, which the
        indexer touches at every turn's end and every committed move (``Thread.updated``, its
        lineage), and at a new title or state: one read by key. The list's is every row's."""
        store = await self.store()
        if thread_id is not None:
            try:
                return _stamp(await self.resolve(thread_id))
            except NotFound:
                return ""
        return "|".join(f"{s.thread.id}:{s.last_activity}:{s.turns}:{s.context_used}:{s.swaps}:"
                        f"{s.thread.state}:{s.thread.title}"
                        for s in await store.threads(limit=100_000, empty=True))

    async def resolve(self, thread_id: str) -> Thread:
        """The thread an address names: by its id, a session's, or a unique prefix of either
        (``liminal.lookup.names``), as the commands read them."""
        from liminal.lookup import names

        store = await self.store()
        thread = await store.thread(thread_id)
        if thread is None or thread.state == DELETED:  # a tombstone is no thread
            found = await names.resolve(store, thread_id)
            if not isinstance(found, names.Named):
                raise NotFound(names.refusal(thread_id, found))
            thread = await store.thread(found.thread)
            if thread is None or thread.state == DELETED:
                raise NotFound(names.refusal(thread_id, []))
        return thread

    async def thread(self, thread_id: str, window: views.Window | None = None) -> dict[str, Any]:
        thread = await self.resolve(thread_id)
        stamp = _stamp(thread)  # before the reading: a change during it shows next time
        messages, liminals, head, summary_before, cut = await self._seen(thread)
        made_by_model = await self._summaries(await self.store())
        ceiling = self.ceiling(thread, messages)
        terms = views.Terms(ceiling, self.settings.swap.cache_life_seconds, made_by_model.get(thread.id, []),
                            self.policy(thread, ceiling))
        view = views.thread_view(thread, messages, liminals, head=head, summary_before=summary_before, cut=cut,
                                 terms=terms, window=window)
        if view["context_now"]["used"] is None:
            view["context_now"].update(await self.context_of_file(thread))
        view["stamp"] = stamp
        return view

    async def turns(self, thread_id: str, window: views.Window | None = None) -> dict[str, Any]:
        """A window of the thread's transcript alone (``views.transcript``): a page asking for more
        turns needs none of the rest."""
        messages, liminals, head, summary_before, cut = await self._seen(await self.resolve(thread_id))
        return views.turns_view(messages, liminals, head=head, summary_before=summary_before, cut=cut,
                                window=window)

    async def _seen(self, thread: Thread) -> tuple[list[MessageRecord], set[str], int | None, bool,
                                                   dict[str, list[str]]]:
        """The thread's messages, the turns liminal answered itself (its commands: no turns of
        the conversation), and what the model sees of them: the turns that start in what
        liminal wrote into its session (``_head_turns``) and the recall keys of the cut outputs."""
        store = await self.store()
        messages = await store.messages(thread.id)
        liminals = await store.liminal_turns(thread.id)
        backing = thread.backing_ids[-1] if thread.backing_ids else thread.id
        records = await store.session_records(backing)
        # Where liminal's own bytes end in the session (a rewrite's, a cut's): 0 for the CLI's.
        own_end = max((r.offset + len(r.raw) + 1 for r in records if r.own), default=0)
        head, summary_before = await self._head_turns(thread, backing, own_end)
        cut = await self._cut([r for r in records if r.own])
        return messages, liminals, head, summary_before, cut

    async def _head_turns(self, thread: Thread, backing: str, own_end: int) -> tuple[int | None, bool]:
        """How many turns of the model's session file start in what liminal wrote (``own_end``
        bytes), and whether a summary precedes them; (None, False) when the file is not on this
        machine or cannot be read."""
        harness = self.harness(cli_name(thread.harness))

        def read() -> tuple[int | None, bool]:
            path = harness.locate(backing, thread.cwd or None)
            if path is None:
                return None, False
            turns = harness.turns(path)
            return sum(1 for start in turns.starts if start < own_end), turns.earlier

        try:
            return await anyio.to_thread.run_sync(read)
        except Exception as exc:  # a file the harness cannot read: the rest is still shown
            logger.warning("the session file could not be read", thread=thread.id, error=str(exc)[:200])
            return None, False

    async def _cut(self, own: list[SessionRecord]) -> dict[str, list[str]]:
        """The recall keys in the session the model works from (in the lines liminal wrote into
        it, ``own``), by the tool call whose output each cut: the call's ids, as the CLI's
        original record of the key names them."""
        store = await self.store()
        keys: dict[str, RecallKey] = {}
        for record in own:
            for found in KEY_IN_MARKER.finditer(record.raw.decode("utf-8", "replace")):
                try:
                    keys.setdefault(found.group(1), RecallKey.parse(found.group(1)))
                except RecallError:
                    continue
        cut: dict[str, list[str]] = {}
        for text, key in keys.items():
            for original in await store.session_records(key.session_id, uuid=key.uuid, limit=4):
                for tool_id in original.tool_ids:
                    if text not in cut.setdefault(tool_id, []):
                        cut[tool_id].append(text)
        return cut

    async def bands(self, thread_id: str) -> dict[str, Any]:
        """The bands a swap would make now (``SessionHarness.bands``, as ``/context`` says them),
        and the preamble's budget (``kernel.policy.floor_bounds``, as the gradient has it): from
        the CLI's file, so only where it is."""
        from liminal.kernel.policy import floor_bounds, recent_band

        thread = await self.resolve(thread_id)
        harness = self.harness(cli_name(thread.harness))
        backing = thread.backing_ids[-1] if thread.backing_ids else thread.id
        swap = self.settings.swap
        aim = swap.target_tokens or 0  # what a swap asks the rewrite for (``CostPolicy.aim``)

        def read() -> dict[str, Any]:
            path = harness.locate(backing, thread.cwd or None)
            if path is None:
                return {"bands": None, "why": "the session file is not on this machine"}
            # The recent band the swap keeps for this thread: its cache's life, as the CLI's records say.
            band = recent_band(swap, self.settings.gradient, harness.cache_life(path))
            return {"bands": harness.bands(path, aim, band)}

        try:
            found = await anyio.to_thread.run_sync(read)
        except Exception as exc:
            logger.warning("the session file could not be banded", thread=thread_id, error=str(exc)[:200])
            return {"bands": None, "why": f"the session file could not be read ({in_words(exc)})"}
        if found["bands"] is not None:
            found["preamble"] = floor_bounds(swap, self.settings.gradient).preamble
        return found

    async def message(self, thread_id: str, message_id: str) -> dict[str, Any]:
        """A tool call's whole output (the transcript carries its head)."""
        from liminal.lookup.shown import tool_output

        for m in await (await self.store()).messages(thread_id, kind="tool_call"):
            if m.id == message_id:
                return {"id": m.id, "output": tool_output(m.data)}
        raise NotFound(f"no tool call {message_id} in {thread_id}")

    async def recall(self, key: str) -> dict[str, Any]:
        from liminal.lookup.recaller import Recaller

        recaller = Recaller(await self.store(), None, harness=self.harness("auto"))
        data = await recaller.recall(key)  # RecallError names the key
        return {"key": key, "text": data.decode("utf-8", "replace")}

    # -- search ---------------------------------------------------------------------------------

    async def search(self, query: str) -> dict[str, Any]:
        """What ``liminal search`` finds, each linked to its place in a transcript, and the memos
        holding every word of the query."""
        from liminal.lookup.memos import memos_matching
        from liminal.lookup.search import find

        store = await self.store()
        found = await find(store, query, limit=SEARCH_LIMIT)
        memos = await memos_matching(store, query)
        return {
            "query": query,
            "hits": [{"thread_id": f.hit.thread_id, "title": f.title, "turn": f.turn,
                      "who": f.speaker, "time": f.hit.time, "snippet": f.hit.snippet,
                      "message_id": f.hit.message_id or (f.hit.id if f.hit.source == "message" else None)}
                     for f in found],
            "memos": [{"text": m.text, "tags": m.data.get("tags") or [], "time": m.time,
                       "thread_id": m.data.get("thread")} for m in memos],
        }
