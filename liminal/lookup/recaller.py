"""One way to turn a recall key back into the bytes the gradient cut: cache, store, file.

The key (``liminal.gradient.recall``) names a record of a CLI session file and a block in it;
which CLI's, and how to read it there, only the harnesses know (``liminal.harness.base``).
The store indexes every line of those files whole (``SessionRecord.raw``), those liminal wrote
into its rewrites and cuts too (``SessionRecord.own``: a key names the session it was cut from,
which may be one of liminal's, and a record liminal copied into it), so it answers for as long
as the thread is kept, even once the CLI has deleted its files, and for any sidecar that shares
the store; the file is the fallback for a session liminal never indexed (``store.index =
false``, a ``liminal compress`` run by hand) and for a store that is down.
A tool output the CLI kept beside its session (Claude Code's ``<id>/tool-results/``: the
line holds only a preview naming the file) is recalled whole: the file's bytes, from the store
(``liminal.ingest.tail`` keeps them with the line), else the file; the preview when neither has it.
What was found is kept in the cache under ``recall:<key>``: Redis when configured, so every
sidecar on a team sees it, else files under ``$LIMINAL_HOME/cache``. A dump's id
(``liminal.lookup.dumps``) is recalled too: a large search answer, kept in the cache; and so is
a key the dynamic zone placed from memory (``liminal.lookup.lessons``: a lesson, another
thread's summary or title), from the store alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import anyio.to_thread

from liminal import log
from liminal.config import GradientSettings
from liminal.gradient.recall import RecallError, RecallKey
from liminal.harness.base import HarnessChoice, Recall
from liminal.harness.known import known_harnesses

if TYPE_CHECKING:
    from liminal.store.base import Store
    from liminal.store.cache import Cache
    from liminal.store.records import SessionRecord

logger = log.get("liminal.recall")


class Recaller:
    def __init__(self, store: Store | None, cache: Cache | None,
                 env: Mapping[str, str] | None = None, harness: Recall | None = None) -> None:
        self.store = store
        self.cache = cache
        # Any harness will do: the choice's asks each CLI's in turn (``ChosenHarness``).
        self.harness = harness or HarnessChoice(known_harnesses(GradientSettings(), env)).harness

    async def recall(self, text: str) -> bytes:
        """The bytes behind ``text`` (a key from a truncation marker, or a dump's id:
        ``liminal.lookup.dumps``). Raises ``RecallError``."""
        from liminal.lookup import dumps, lessons

        if dumps.is_dump_id(text):
            return (await dumps.resolve(self.store, self.cache, text)).encode()
        if lessons.is_memory_key(text):  # a lesson, another thread's summary or title: the store's
            return (await self._memory(text)).encode()
        key = RecallKey.parse(text)  # checked before any part of it becomes a path or a query
        cache_key = f"recall:{key}"
        if self.cache is not None:
            hit = await self.cache.get(cache_key)
            if hit is not None:
                return hit
        value = await self._from_store(key)
        if value is None:
            value = await anyio.to_thread.run_sync(self._from_file, key)
        value = await self._whole(value)
        if self.cache is not None:
            await self.cache.set(cache_key, value)
        return value

    async def _memory(self, key: str) -> str:
        """A key the dynamic zone placed from memory (``liminal.lookup.lessons.resolve``): read
        from the store each time, never cached, so that what was forgotten or deleted is gone."""
        from liminal.lookup import lessons
        from liminal.store.base import StoreError

        if self.store is None:
            raise RecallError(f"{key.strip()}: lessons need liminal's store, which is off or down")
        try:
            return await lessons.resolve(self.store, key)
        except LookupError as exc:
            raise RecallError(str(exc)) from exc
        except StoreError as exc:
            raise RecallError(f"{key.strip()}: liminal's store could not be read ({exc})") from exc

    async def _from_store(self, key: RecallKey) -> bytes | None:
        if self.store is None:
            return None
        from liminal.store.base import StoreError

        try:
            # Several lines may carry the id: a record the CLI wrote twice (the first is the one
            # the model saw), a Codex call and its output (one ``call_id``, the key's block tells).
            found = self._first(await self.store.session_records(key.session_id, uuid=key.uuid), key)
            if found is None:
                # A line stored without the id: indexed by a liminal that kept no id for a Codex
                # call, or one its parser could not read. The session's lines, each asked (the
                # harness looks for the id in the bytes before it parses one).
                found = self._first(await self.store.session_records(key.session_id), key)
        except StoreError as exc:  # the file may still have it
            logger.warning("store unavailable for recall; reading the session file", error=str(exc))
            return None
        return found

    async def _whole(self, value: bytes) -> bytes:
        """The whole output ``value`` is a preview of, where a harness says it is one."""
        ref = self.harness.previews(value)
        if ref is None:
            return value
        if self.store is not None:
            from liminal.lookup.sessionlines import stored_beside_one
            from liminal.store.base import StoreError

            try:
                whole = await stored_beside_one(self.store, ref)
            except StoreError as exc:
                logger.warning("store unavailable for recall; reading the file", error=str(exc))
                whole = None
            if whole is not None:
                return whole
        path = self.harness.beside_path(ref, None)
        if path is None:
            return value
        from liminal.ingest.tail import MAX_BESIDE, read_bounded

        try:
            whole = await anyio.to_thread.run_sync(read_bounded, path, MAX_BESIDE)
        except OSError:
            whole = None
        return value if whole is None else whole

    def _first(self, records: list[SessionRecord], key: RecallKey) -> bytes | None:
        for record in records:
            value = self.harness.recall_in_line(record.raw, key)
            if value is not None:
                return value
        return None

    def _from_file(self, key: RecallKey) -> bytes:
        try:
            value = self.harness.recall(key)
        except RecallError:
            raise
        except (LookupError, OSError) as exc:
            raise RecallError(f"{key}: neither the store nor a session file has it") from exc
        if value is None:
            raise RecallError(f"{key}: neither the store nor a session file has it")
        return value
